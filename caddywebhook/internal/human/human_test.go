package human

import (
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{-time.Second, "0s"},
		{1400 * time.Millisecond, "1s"},
		{90 * time.Second, "1m30s"},
		{time.Hour + 2*time.Minute + 40*time.Second, "1h3m"},
		{47*time.Hour + 59*time.Minute, "47h59m"},
		{3*24*time.Hour + 4*time.Hour + 10*time.Minute, "3d4h"},
	}
	for _, tt := range tests {
		t.Run(tt.in.String(), func(t *testing.T) {
			if got := Duration(tt.in); got != tt.want {
				t.Errorf("Duration(%v) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestLatency prints an attempt's duration without rounding a short one
// away: a delivery to a local upstream takes well under a millisecond.
func TestLatency(t *testing.T) {
	tests := []struct {
		name string
		d    time.Duration
		want string
	}{
		{"none", 0, "0 ms"},
		{"under a microsecond", 300 * time.Nanosecond, "< 0.001 ms"},
		{"microseconds", 4200 * time.Nanosecond, "0.004 ms"},
		{"tens of microseconds", 42 * time.Microsecond, "0.04 ms"},
		{"sub-millisecond", 412345 * time.Nanosecond, "0.4 ms"},
		{"milliseconds", 4240 * time.Microsecond, "4.2 ms"},
		{"hundreds of milliseconds", 177400 * time.Microsecond, "177 ms"},
		{"seconds", 1500 * time.Millisecond, "1.5 s"},
		{"tens of seconds", 12400 * time.Millisecond, "12 s"},
		{"minutes", 90 * time.Second, "1m30s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Latency(tt.d); got != tt.want {
				t.Errorf("Latency(%v) = %q, want %q", tt.d, got, tt.want)
			}
		})
	}
}
