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
	o, err := parseFlags([]string{"-smoke", "-caddy", bin, "-dir", dir, "-d", "700ms", "-backlog", "5000"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	rep, err := run(ctx, o, &progress)
	var out bytes.Buffer
	if rep != nil {
		rep.print(&out)
	}
	t.Logf("progress:\n%s\nreport:\n%s", progress.String(), out.String())
	if err != nil {
		t.Fatal(err)
	}
	if bad := rep.failedChecks(); len(bad) > 0 {
		t.Fatalf("count checks failed:\n%s", strings.Join(bad, "\n"))
	}

	// Deliveries are counted over all delivering phases together: at these
	// sizes a stall of the shared machine can leave one window empty.
	var delivered int64
	for _, name := range []string{"static", "ingest", "baseline", "e2e", "slow1", "slow32", "backlog-ingest", "backlog-e2e"} {
		pr := rep.byName[name]
		switch {
		case pr == nil:
			t.Errorf("phase %s did not run", name)
		case !pr.finished:
			t.Errorf("phase %s did not finish", name)
		case pr.load != nil && pr.load.ok == 0:
			t.Errorf("phase %s: no request got its wanted status", name)
		default:
			delivered += pr.delivered
		}
		if pr != nil && pr.peakRSS <= 0 {
			t.Errorf("phase %s: no RSS reading", name)
		}
	}
	if delivered == 0 {
		t.Error("no phase delivered anything")
	}
	for _, name := range []string{"ingest", "e2e", "slow1", "slow32", "backlog-ingest", "backlog-e2e"} {
		if pr := rep.byName[name]; pr != nil && len(pr.counts) == 0 {
			t.Errorf("%s: the database was not checked", name)
		}
	}
}
