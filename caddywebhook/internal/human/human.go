// Package human prints durations for people, the same way in every command
// of the plugin (caddy webhook show, tail and listen) and in the dashboard's
// page, which mirrors it in JavaScript. It is for the plugin's own
// packages, no part of its public API.
package human

import (
	"fmt"
	"strconv"
	"time"
)

// Duration rounds d to what a person reads at a glance: 42s, 3m12s,
// 5h3m, 3d4h.
func Duration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	case d < 48*time.Hour:
		d = d.Round(time.Minute)
		return fmt.Sprintf("%dh%dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	d = d.Round(time.Hour)
	return fmt.Sprintf("%dd%dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}

// Latency prints how long an attempt took, keeping what a short one
// would lose to rounding to whole milliseconds: 0.004 ms, 0.04 ms,
// 0.4 ms, 4.2 ms, 180 ms, 1.5 s, 12 s, then as Duration from a
// minute on. The dashboard's fmtLatency prints the same, and so does
// every command that prints a duration (show, tail, listen).
func Latency(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case d <= 0:
		return "0 ms"
	case d < time.Microsecond:
		return "< 0.001 ms"
	case d < 10*time.Microsecond:
		return strconv.FormatFloat(ms, 'f', 3, 64) + " ms"
	case d < 100*time.Microsecond:
		return strconv.FormatFloat(ms, 'f', 2, 64) + " ms"
	case d < 10*time.Millisecond:
		return strconv.FormatFloat(ms, 'f', 1, 64) + " ms"
	case d < time.Second:
		return strconv.FormatFloat(ms, 'f', 0, 64) + " ms"
	case d < 10*time.Second:
		return strconv.FormatFloat(ms/1000, 'f', 1, 64) + " s"
	case d < time.Minute:
		return strconv.FormatFloat(ms/1000, 'f', 0, 64) + " s"
	}
	return Duration(d)
}
