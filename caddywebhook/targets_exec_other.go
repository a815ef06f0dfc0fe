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

// execRunToken is never used; Provision refuses the target on this platform.
func execRunToken() string { return "" }

// execStartTime does nothing; Provision refuses the target on this platform.
func execStartTime(int) (uint64, bool) { return 0, false }

// execKillMarked does nothing; Provision refuses the target on this platform.
func execKillMarked(string, uint64) int { return 0 }

// execRunEnv names the run's marker; unused on this platform.
const execRunEnv = "WEBHOOK_EXEC_RUN"
