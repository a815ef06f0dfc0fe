package caddywebhook

import (
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/queue"
)

func TestRecentLag(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	a := queue.Route{Source: "gh", Target: "app"}
	b := queue.Route{Source: "gh", Target: "old"}
	tests := []struct {
		name string
		add  func(l *lagRings)
		want []adminapi.RecentLag
	}{
		{"none", func(*lagRings) {}, nil},
		{"quantiles of 1..100 ms", func(l *lagRings) {
			for i := 1; i <= 100; i++ {
				l.add(a, now.Add(-time.Minute), time.Duration(i)*time.Millisecond)
			}
		}, []adminapi.RecentLag{{Source: "gh", Target: "app", Deliveries: 100, P50: 50 * time.Millisecond, P99: 99 * time.Millisecond}}},
		{"older than the window left out", func(l *lagRings) {
			l.add(a, now.Add(-time.Second), time.Second)
			l.add(b, now.Add(-lagWindow-time.Second), time.Hour)
		}, []adminapi.RecentLag{{Source: "gh", Target: "app", Deliveries: 1, P50: time.Second, P99: time.Second}}},
		{"the ring keeps the last deliveries", func(l *lagRings) {
			for i := range lagSamples + 10 {
				lag := time.Hour
				if i >= 10 {
					lag = time.Millisecond
				}
				l.add(a, now, lag)
			}
		}, []adminapi.RecentLag{{Source: "gh", Target: "app", Deliveries: lagSamples, P50: time.Millisecond, P99: time.Millisecond}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &lagRings{routes: make(map[queue.Route]*lagRing)}
			tt.add(l)
			got := l.snapshot(now)
			if len(got) != len(tt.want) {
				t.Fatalf("snapshot = %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("snapshot[%d] = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}
