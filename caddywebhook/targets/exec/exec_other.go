//go:build !unix

package exectarget

import (
	"fmt"
	"os/exec"
	"runtime"
)

// supported reports whether the exec target can run here: it needs Unix
// process groups to kill a program together with its descendants.
func supported() error {
	return fmt.Errorf("exec target: not supported on %s", runtime.GOOS)
}

// isolate does nothing; Provision refuses the target on this platform.
func isolate(*exec.Cmd) {}

// killGroup does nothing; Provision refuses the target on this platform.
func killGroup(int) {}

// runEnv names the run's marker; unused on this platform.
const runEnv = "WEBHOOK_EXEC_RUN"

// runToken is never used; Provision refuses the target on this platform.
func runToken() string { return "" }

// startTime does nothing; Provision refuses the target on this platform.
func startTime(int) (uint64, bool) { return 0, false }

// killMarked does nothing; Provision refuses the target on this platform.
func killMarked(string, uint64) int { return 0 }
