//go:build !race

package queue_test

// raceEnabled is true under the race detector, which slows the pure-Go
// SQLite enough that the larger tests shrink their job counts.
const raceEnabled = false
