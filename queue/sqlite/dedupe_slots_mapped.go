//go:build linux || darwin || freebsd

package sqlite

import (
	"syscall"
	"unsafe"
)

// newSlots returns a key set's table of n slots in an anonymous private
// mapping, outside the Go heap. The table holds no pointers, so the
// collector has nothing to scan in it, and kept off the heap it does not
// count toward the heap goal either: on the heap, a million stored events'
// 23 MiB of slots (of 16 bytes then) let the collector leave as much again
// of garbage unreclaimed (GOGC's doubling of the live heap): Caddy with a
// million events grew by 57 MiB, and by 28–30 MiB with the table mapped
// (docs/BENCHMARKS-LOG.md); 17–18 MiB with today's 8-byte slots. The pages
// are the kernel's zeroed pages, resident once touched; free gives them
// back.
//
// The race detector watches Go's memory only: it still sees the set's
// fields (the slices' headers, n, more), not the slots themselves, so
// keySet's rule that every access holds mu is kept by reading, not by
// go test -race alone.
func newSlots(n int) slots {
	mem, err := syscall.Mmap(-1, 0, n*slotBytes, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		// No mapping to be had (a limit on them, or on address space):
		// the Go heap serves as well, at the collector's price.
		return heapSlots(n)
	}
	return slots{
		tags:   unsafe.Slice((*uint32)(unsafe.Pointer(&mem[0])), n),
		offs:   unsafe.Slice((*int32)(unsafe.Pointer(&mem[n*4])), n),
		mapped: mem,
	}
}

// free unmaps a mapped table. Nothing may read the slots afterwards: the
// key set frees a table only under its lock for writing, once no reader
// holds the old one.
func (s *slots) free() {
	if s.mapped != nil {
		// Munmap of a mapping this process made and still holds fails
		// only on a bad address; there is nothing to do about it but
		// leave the pages mapped.
		_ = syscall.Munmap(s.mapped)
	}
	*s = slots{}
}
