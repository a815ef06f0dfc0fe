//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// runCaddy replaces this process with Caddy, so Ctrl-C and the signals a
// terminal or a service manager sends reach Caddy alone: a second copy of
// SIGINT, forwarded by a parent, would make Caddy quit without its graceful
// stop.
func runCaddy(bin, config string) error {
	path, err := filepath.Abs(bin)
	if err != nil {
		return fmt.Errorf("find %s: %w", bin, err)
	}
	if err := syscall.Exec(path, []string{path, "run", "--config", config}, os.Environ()); err != nil {
		return fmt.Errorf("start %s: %w", path, err)
	}
	return nil
}
