package report

import (
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/loadgen"
	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/phases"
)

func TestFigures(t *testing.T) {
	res := phases.NewResults(phases.Options{Backlog: 1_000_000})
	add := func(name string, f func(pr *phases.Phase)) {
		pr := res.Phase(name)
		pr.Finished = true
		pr.Load = &loadgen.Result{}
		f(pr)
	}
	add("static", func(pr *phases.Phase) { pr.Rate = 30000 })
	add("ingest", func(pr *phases.Phase) { pr.Rate = 12000; pr.P99 = 4 * time.Millisecond; pr.PeakRSS = 100 << 20 })
	add("e2e", func(pr *phases.Phase) {
		pr.Rate, pr.DeliveredRate, pr.BacklogSlope, pr.BacklogEnd, pr.PeakRSS = 10000, 9000, 2000, 50000, 100<<20
	})
	add("slow1", func(pr *phases.Phase) { pr.Load, pr.Ref, pr.DeliveredRate = nil, 200.0, 195 })
	add("backlog-ingest", func(pr *phases.Phase) { pr.Rate = 9000; pr.PeakRSS = 140 << 20 })
	add("backlog-e2e", func(pr *phases.Phase) { pr.Rate, pr.DeliveredRate, pr.PeakRSS = 9000, 8000, 120<<20 })
	add("ingest-traced", func(pr *phases.Phase) { pr.FirstRate, pr.SecondRate = 10000, 9800 })
	add("rules", func(pr *phases.Phase) { pr.FirstRate, pr.SecondRate = 8000, 7200 })
	add("ingest-sealed", func(pr *phases.Phase) { pr.Rate = 11700 })
	add("e2e-sealed", func(pr *phases.Phase) { pr.Rate, pr.DeliveredRate = 10000, 8100 })

	got := map[string]figure{}
	for _, f := range figures(res) {
		got[f.name] = f
	}
	tests := []struct {
		name    string
		ratio   float64
		ok      bool
		missing string
	}{
		{"ingest / static", 0.4, false, ""},
		{"p99 group commit / p99 one commit", 0, false, "baseline not run"},
		// 0.9 delivered, but the backlog grows 20% of the accepted rate.
		{"e2e delivered / accepted", 0.9, false, ""},
		{"5 ms upstream, 1 worker", 0.975, true, ""},
		{"5 ms upstream, 32 workers", 0, false, "slow32 not run"},
		{"backlog 1M: ingest / empty", 0.75, false, ""},
		{"backlog 1M: delivered / empty", 8000.0 / 9000, true, ""},
		{"backlog 1M: RSS growth", 40.0 / 32, false, ""},
		{"traceparent: ingest, traced / plain", 0.98, true, ""},
		{"traceparent: e2e, traced / plain", 0, false, "e2e-traced not run"},
		{"2 KB ingest with a filter / without", 0.9, false, ""},
		{"encryption: ingest, sealed / plain", 0.975, true, ""},
		// Delivered, not accepted, over e2e's delivered.
		{"encryption: e2e, sealed / plain", 0.9, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, ok := got[tt.name]
			if !ok {
				t.Fatalf("no figure %q in %v", tt.name, got)
			}
			if f.missing != tt.missing {
				t.Fatalf("missing = %q, want %q", f.missing, tt.missing)
			}
			if tt.missing != "" {
				return
			}
			if d := f.ratio - tt.ratio; d > 1e-9 || d < -1e-9 || f.ok != tt.ok {
				t.Errorf("ratio %.4f ok %v, want %.4f ok %v", f.ratio, f.ok, tt.ratio, tt.ok)
			}
		})
	}
	if missed := MissedTargets(res); len(missed) != 6 {
		t.Errorf("missed targets %q, want 6", missed)
	}
}
