//go:build linux || darwin || freebsd

package testutil

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// MountTmpfs mounts a tmpfs of size (mount's syntax: "20m") on a fresh
// directory and unmounts it at cleanup, after everything registered later
// (a store or a Caddy using it) has stopped. Mounting needs root (or
// CAP_SYS_ADMIN): where it is not permitted the test is skipped with a
// message, except under CI=true, where the test must run and fails.
func MountTmpfs(tb testing.TB, size string) string {
	tb.Helper()
	dir := tb.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput()
	if err != nil {
		msg := "mount a " + size + " tmpfs on " + dir + ": " + err.Error() + ": " + string(out)
		if os.Getenv("CI") == "true" {
			tb.Fatalf("%s (CI=true: this test must run; run it as root)", msg)
		}
		if os.Geteuid() != 0 || errors.Is(err, exec.ErrNotFound) {
			tb.Skipf("%s; mounting needs root and mount(8), so the test is skipped", msg)
		}
		tb.Fatal(msg)
	}
	tb.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			tb.Errorf("umount %s: %v\n%s", dir, err, out)
		}
	})
	return dir
}

// FillDisk writes the file name in dir until its filesystem has at most
// leave bytes free (0: until it is full), and returns the file's path and
// size. Free space is what statfs reports to an unprivileged process.
func FillDisk(tb testing.TB, dir, name string, leave int64) (string, int64) {
	tb.Helper()
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		tb.Fatalf("create filler: %v", err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	var size int64
	for {
		if leave > 0 {
			free := FreeSpace(tb, dir)
			if free <= leave {
				return path, size
			}
			chunk = chunk[:min(int64(cap(chunk)), max(free-leave, 4096))]
		}
		n, err := f.Write(chunk)
		size += int64(n)
		if errors.Is(err, syscall.ENOSPC) {
			return path, size
		}
		if err != nil {
			tb.Fatalf("write filler: %v", err)
		}
	}
}

// FreeSpace returns the bytes free on dir's filesystem for an
// unprivileged process.
func FreeSpace(tb testing.TB, dir string) int64 {
	tb.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		tb.Fatalf("statfs %s: %v", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}
