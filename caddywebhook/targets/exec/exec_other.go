//go:build !unix

package caddywebhook

import (
	"fmt"
	"os/exec"
	"runtime"
)

// execSupported reports whether the exec target can run here: it needs Unix
// process groups to kill a program together with its descendants.
func execSupported() error {
	return fmt.Errorf("exec target: not supported on %s", runtime.GOOS)
}

// execIsolate does nothing; Provision refuses the target on this platform.
func execIsolate(*exec.Cmd) {}

// execKillGroup does nothing; Provision refuses the target on this platform.
func execKillGroup(int) {}
