//go:build unix

package sqlite

import "syscall"

// setUmask sets the process umask and returns the old one.
func setUmask(mask int) int { return syscall.Umask(mask) }
