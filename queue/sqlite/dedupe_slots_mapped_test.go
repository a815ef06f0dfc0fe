//go:build linux || darwin || freebsd

package sqlite

import (
	"runtime"
	"testing"
)

// TestKeySetTableOffHeap checks that a key set's table lives outside the
// Go heap, however it got its size: on the heap, the 23 MiB table of a
// million events (of 16-byte slots then) let the collector leave as much
// again of garbage, and the load test's process with a million events grew
// by 57 MiB against a budget of 32.
func TestKeySetTableOffHeap(t *testing.T) {
	tests := []struct {
		name  string
		sized int // the count newKeySet is given, as loadKeys gives it
		keys  int
	}{
		{name: "sized when read", sized: 1_000_000, keys: 1_000_000},
		{name: "grown by adds", sized: 0, keys: 400_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := liveHeap()
			k := newKeySet(tt.sized)
			t.Cleanup(k.release)
			for i := 1; i <= tt.keys; i++ {
				k.add(uint64(i)*0x9e3779b97f4a7c15, int64(i))
			}
			if k.mapped == nil {
				t.Fatal("the table is on the Go heap, want a mapping")
			}
			table := int64(len(k.offs)) * slotBytes
			if grew := liveHeap() - before; grew > table/16 {
				t.Errorf("the live heap grew by %d KiB with a table of %d KiB, want under %d KiB", grew>>10, table>>10, table>>14)
			}
			if got := k.candidates(nil, uint64(tt.keys)*0x9e3779b97f4a7c15); len(got) != 1 || got[0] != int64(tt.keys) {
				t.Errorf("candidates of the last key = %v, want [%d]", got, tt.keys)
			}
		})
	}
}

func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
