//go:build !unix

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
)

// runCaddy runs Caddy as a child with this program's standard streams.
// The console delivers Ctrl-C to both processes, so this one only waits
// for Caddy and exits with its status.
func runCaddy(bin, config string) error {
	path, err := filepath.Abs(bin)
	if err != nil {
		return fmt.Errorf("find %s: %w", bin, err)
	}
	signal.Ignore(os.Interrupt)
	cmd := exec.Command(path, "run", "--config", config)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.ExitCode())
		}
		return fmt.Errorf("start %s: %w", path, err)
	}
	return nil
}
