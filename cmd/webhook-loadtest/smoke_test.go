package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestSmoke runs every phase of the load test, small and short, against a
// real Caddy built from ./cmd/caddy, and fails when a count does not add
// up: a 202 missing from the database, a job done that never reached the
// upstream, a status or connection error. The figures themselves are not
// judged here; at these sizes they mean nothing.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs Caddy")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin, err := buildCaddy(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	o, err := parseFlags([]string{"-smoke", "-caddy", bin, "-dir", dir, "-d", "700ms", "-backlog", "5000", "-profile", "ingest"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	rep, _, printed := runSmoke(ctx, t, o)
	checkPhases(t, rep, []string{"static", "ingest", "baseline", "e2e", "slow1", "slow32", "rate", "backlog-ingest", "backlog-e2e"}, nil)
	checkCost(t, rep.byName["ingest"], printed)
}

// checkCost checks that the cost table of a profiled phase read each of
// its sources: /proc, the store's counters, the WAL and the CPU profile.
func checkCost(t *testing.T, pr *phaseResult, printed string) {
	t.Helper()
	c := pr.cost
	switch {
	case c == nil:
		t.Fatalf("%s: no cost table", pr.name)
	case c.ioEvents <= 0 || c.io.syscw <= 0:
		t.Errorf("%s: no /proc io reading: %+v", pr.name, c.io)
	case len(c.cores) == 0:
		t.Errorf("%s: no /proc/stat reading", pr.name)
	case c.writers.Commits <= 0 || c.writers.WALPages <= 0:
		t.Errorf("%s: no store counters: %+v", pr.name, c.writers)
	case c.walFrames <= 0:
		t.Errorf("%s: no WAL frame read", pr.name)
	case c.profiles != 1 || c.prof.totalCount <= 0:
		t.Errorf("%s: %d profiles read, %d samples", pr.name, c.profiles, c.prof.totalCount)
	}
	if !strings.Contains(printed, pr.name+": cost per accepted event") {
		t.Errorf("the report has no cost table for %s", pr.name)
	}
}

// runSmoke runs the load test with o, logs its progress lines and report,
// and stops t when the run fails or a count check does not add up. It
// returns the report, the progress lines and the printed report.
func runSmoke(ctx context.Context, t *testing.T, o options) (rep *report, progress, printed string) {
	t.Helper()
	var pb, out bytes.Buffer
	rep, err := run(ctx, o, &pb)
	if rep != nil {
		rep.print(&out)
	}
	t.Logf("progress:\n%s\nreport:\n%s", pb.String(), out.String())
	if err != nil {
		t.Fatal(err)
	}
	if bad := rep.failedChecks(); len(bad) > 0 {
		t.Fatalf("count checks failed:\n%s", strings.Join(bad, "\n"))
	}
	return rep, pb.String(), out.String()
}

// checkPhases checks each of the named phases of rep: it ran, it finished,
// some request got its wanted status, its RSS was read and, but for
// static, its database was checked. more, if not nil, checks further each
// phase that ran to its end. Deliveries are counted over all the phases
// together, since at these sizes a stall of the shared machine can leave
// one window empty: at least one phase must have delivered something.
func checkPhases(t *testing.T, rep *report, names []string, more func(name string, pr *phaseResult)) {
	t.Helper()
	var delivered int64
	for _, name := range names {
		pr := rep.byName[name]
		switch {
		case pr == nil:
			t.Errorf("phase %s did not run", name)
			continue
		case !pr.finished:
			t.Errorf("phase %s did not finish", name)
		case pr.load != nil && pr.load.ok == 0:
			t.Errorf("phase %s: no request got its wanted status", name)
		default:
			delivered += pr.delivered
			if more != nil {
				more(name, pr)
			}
		}
		if pr.peakRSS <= 0 {
			t.Errorf("phase %s: no RSS reading", name)
		}
		if name != "static" && len(pr.counts) == 0 {
			t.Errorf("%s: the database was not checked", name)
		}
	}
	if delivered == 0 {
		t.Error("no phase delivered anything")
	}
}
