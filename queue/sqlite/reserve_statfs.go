//go:build linux || darwin || freebsd

package sqlite

import "syscall"

// freeSpace returns the bytes of dir's filesystem available to an
// unprivileged process (f_bavail: the root-only blocks an ext4 keeps back
// are not counted, so the reserve holds whoever Caddy runs as).
func freeSpace(dir string) (uint64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return uint64(st.Bavail) * uint64(st.Bsize), true
}
