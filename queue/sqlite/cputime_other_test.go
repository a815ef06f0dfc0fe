//go:build !unix

package sqlite

import "time"

// processCPU is not measured here; the benchmarks then leave out cpu-us.
func processCPU() time.Duration { return 0 }
