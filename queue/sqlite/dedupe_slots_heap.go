//go:build !(linux || darwin || freebsd)

package sqlite

// newSlots returns a key set's table of n slots on the Go heap: this
// platform has no mapping the store uses (see dedupe_slots_mapped.go).
func newSlots(n int) slots { return heapSlots(n) }

// free drops the table for the collector.
func (s *slots) free() { *s = slots{} }
