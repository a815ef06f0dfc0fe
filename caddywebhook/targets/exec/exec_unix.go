//go:build unix

package caddywebhook

import (
	"os/exec"
	"syscall"
)

// execSupported reports whether the exec target can run here.
func execSupported() error { return nil }

// execIsolate starts the program in a process group of its own, so that a
// timeout or cancellation kills its descendants too, not just the program.
func execIsolate(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		execKillGroup(cmd.Process.Pid)
		return nil
	}
}

// execKillGroup kills every process in the group the program led. The group
// id stays reserved while any member lives, so after the program has been
// reaped a kill still reaches only its leftovers; when none are left it
// reaches no one (ESRCH), as the kernel does not reuse a pid that soon.
func execKillGroup(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}
