package compare

import (
	"strings"
	"testing"
)

func TestComparisonSummary(t *testing.T) {
	c := &Comparison{
		phases: []string{"static", "ingest", "e2e", "slow1"},
		runsA: []buildRun{
			{"static": 20000, "ingest": 8000, "e2e": 4000},
			{"static": 25000, "ingest": 9000, "e2e": 5000},
			{"static": 30000, "ingest": 10000, "e2e": 6000},
		},
		runsB: []buildRun{
			{"static": 20000, "ingest": 10000, "e2e": 3000},
			{"static": 25000, "ingest": 8000, "e2e": 6000},
			{"static": 30000, "ingest": 12000, "e2e": 6000},
		},
	}
	tests := []struct {
		name                         string
		phase                        string
		meanA, meanB, ratioA, ratioB float64
		bAhead, pairs                int
	}{
		{"static has no ratio of its own", "static", 25000, 25000, 0, 0, 0, 3},
		{"ingest, B ahead twice", "ingest", 9000, 10000, (0.4 + 0.36 + 1.0/3) / 3, (0.5 + 0.32 + 0.4) / 3, 2, 3},
		{"a tie is not ahead", "e2e", 5000, 5000, (0.2 + 0.2 + 0.2) / 3, (0.15 + 0.24 + 0.2) / 3, 1, 3},
	}
	got := map[string]phaseSummary{}
	for _, s := range c.summarise() {
		got[s.phase] = s
	}
	if _, ok := got["slow1"]; ok {
		t.Errorf("slow1 ran in no pair, yet it has a summary")
	}
	near := func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ok := got[tt.phase]
			if !ok {
				t.Fatalf("no summary of %s", tt.phase)
			}
			if !near(s.meanA, tt.meanA) || !near(s.meanB, tt.meanB) || !near(s.ratioA, tt.ratioA) || !near(s.ratioB, tt.ratioB) || s.bAhead != tt.bAhead || s.pairs != tt.pairs {
				t.Errorf("summary %+v, want means %.0f %.0f, ratios %.4f %.4f, B ahead %d of %d", s, tt.meanA, tt.meanB, tt.ratioA, tt.ratioB, tt.bAhead, tt.pairs)
			}
		})
	}
	var out strings.Builder
	c.Print(&out)
	lines := map[string]bool{}
	for line := range strings.SplitSeq(out.String(), "\n") {
		lines[strings.Join(strings.Fields(line), " ")] = true
	}
	for _, want := range []string{"ingest 1 8000 10000 1.25", "e2e 1 4000 3000 0.75", "ingest 9000 10000 1.11 2 of 3 0.364 0.407", "static 25000 25000 1.00 0 of 3 — —"} {
		if !lines[want] {
			t.Errorf("printed comparison lacks the line %q:\n%s", want, out.String())
		}
	}
}
