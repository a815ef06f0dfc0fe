//go:build race

package seal_test

// raceEnabled is true under the race detector, whose instrumentation
// allocates and whose sync.Pool drops entries at random: the allocation
// counts are checked without it.
const raceEnabled = true
