//go:build unix

package exectarget

import (
	"os/exec"
	"syscall"
)

// supported reports whether the exec target can run here.
func supported() error { return nil }

// isolate starts the program in a process group of its own, so that a
// timeout or cancellation kills its descendants too, not just the program.
func isolate(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		killGroup(cmd.Process.Pid)
		return nil
	}
}

// killGroup kills every process in the group the program led. The group
// id stays reserved while any member lives, so after the program has been
// reaped a kill still reaches only its leftovers; when none are left it
// reaches no one (ESRCH), as the kernel does not reuse a pid that soon.
func killGroup(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}
