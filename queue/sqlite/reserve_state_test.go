package sqlite

import "testing"

// TestReserveMargin: the reserve turns low below MinFreeSpace and back
// only an eighth above it, so free space that hovers at the edge does
// not flip ingest on and off.
func TestReserveMargin(t *testing.T) {
	const min = 64 << 20
	tests := []struct {
		name   string
		wasLow bool
		free   uint64
		low    bool
	}{
		{"room", false, 2 * min, false},
		{"at the reserve", false, min, false},
		{"into the reserve", false, min - 1, true},
		{"low, a little freed", true, min + 1, true},
		{"low, just short of the margin", true, min + min/8 - 1, true},
		{"low, the margin freed", true, min + min/8, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := lowAfter(tt.wasLow, tt.free, min); got != tt.low {
				t.Errorf("lowAfter(%v, %d) = %v, want %v", tt.wasLow, tt.free, got, tt.low)
			}
		})
	}
}
