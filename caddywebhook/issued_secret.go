package caddywebhook

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// readIssuedSecret returns the secret in path, "" when the file does not
// exist. A file that exists without a secret (a crash between its
// creation and its write, a touch) is an error: the endpoint would be
// neither armed, since writeIssuedSecret refuses an existing file, nor
// able to verify an event.
func readIssuedSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read secret: %w", err)
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" {
		return "", fmt.Errorf("%s exists but is empty; remove it to accept the secret of the next handshake", path)
	}
	return secret, nil
}

// writeIssuedSecret creates path, mode 0600, with secret; it fails when
// the file exists.
func writeIssuedSecret(path, secret string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create secret file: %w", err)
	}
	if _, err := f.WriteString(secret + "\n"); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("write secret file: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("sync secret file: %w", err)
	}
	return f.Close()
}
