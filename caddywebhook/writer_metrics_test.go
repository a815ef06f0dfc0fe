package caddywebhook

import (
	"testing"
)

// TestWriterMetrics: the store's write counters are in the running
// config's registry, and an accepted event moves them.
func TestWriterMetrics(t *testing.T) {
	h := newHarness(t)
	h.load(t, map[string]any{"workers": 0}, githubReceiver("wm", httpTarget("", "http://127.0.0.1:9/")))
	const (
		commits = `caddy_webhook_store_commits_total{}`
		writes  = `caddy_webhook_store_writes_total{}`
		frames  = `caddy_webhook_store_wal_frames_total{}`
	)
	var before map[string]float64
	for i, id := range []string{"wm-1", "wm-2"} {
		if got := h.post(t, "wm", id, "push", testBody(i)); got != 202 {
			t.Fatalf("%s answered %d", id, got)
		}
		m := gather(t, activeRegistry())
		for _, name := range []string{commits, writes, frames} {
			got, ok := m[name]
			switch {
			case !ok:
				t.Fatalf("after %s: no sample %s", id, name)
			case got < 1:
				t.Errorf("after %s: %s = %v, want the store's writes", id, name, got)
			case before != nil && got <= before[name]:
				t.Errorf("after %s: %s = %v, not above %v before it", id, name, got, before[name])
			}
		}
		before = m
	}
}
