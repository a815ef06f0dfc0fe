package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/phases"
	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/queuedb"
	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/report"
	"github.com/caddywebhook/caddywebhook/internal/caddyproc"
	"github.com/caddywebhook/caddywebhook/internal/testutil"
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
	bin, err := caddyproc.Build(ctx, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	o, err := parseFlags([]string{"-smoke", "-caddy", bin, "-dir", dir, "-d", "700ms", "-backlog", "5000", "-profile", "ingest"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	res, _, printed := runSmoke(ctx, t, o)
	checkPhases(t, res, []string{"static", "ingest", "baseline", "e2e", "slow1", "slow32", "rate", "backlog-ingest", "backlog-e2e"}, nil)
	checkCost(t, res.Get("ingest"), printed)
}

// checkCost checks that the cost table of a profiled phase read each of
// its sources: /proc, the store's counters, the WAL and the CPU profile.
func checkCost(t *testing.T, pr *phases.Phase, printed string) {
	t.Helper()
	if pr == nil || pr.Cost == nil {
		t.Fatal("the profiled phase has no cost table")
	}
	if missing := pr.Cost.Missing(true); len(missing) > 0 {
		t.Errorf("%s: the cost table read nothing from %s", pr.Name, strings.Join(missing, ", "))
	}
	if !strings.Contains(printed, pr.Name+": cost per accepted event") {
		t.Errorf("the report has no cost table for %s", pr.Name)
	}
}

// runSmoke runs the load test with o, logs its progress lines and report,
// and stops t when the run fails or a count check does not add up. It
// returns the report, the progress lines and the printed report.
func runSmoke(ctx context.Context, t *testing.T, o options) (res *phases.Results, progress, printed string) {
	t.Helper()
	var pb, out bytes.Buffer
	res, err := phases.Run(ctx, o.Options, &pb)
	if res != nil {
		report.Print(&out, res)
	}
	t.Logf("progress:\n%s\nreport:\n%s", pb.String(), out.String())
	if err != nil {
		t.Fatal(err)
	}
	if bad := res.FailedChecks(); len(bad) > 0 {
		t.Fatalf("count checks failed:\n%s", strings.Join(bad, "\n"))
	}
	return res, pb.String(), out.String()
}

// checkPhases checks each of the named phases of rep: it ran, it finished,
// some request got its wanted status, its RSS was read and, but for
// static, its database was checked. more, if not nil, checks further each
// phase that ran to its end. Deliveries are counted over all the phases
// together, since at these sizes a stall of the shared machine can leave
// one window empty: at least one phase must have delivered something.
func checkPhases(t *testing.T, res *phases.Results, names []string, more func(name string, pr *phases.Phase)) {
	t.Helper()
	var delivered int64
	for _, name := range names {
		pr := res.Get(name)
		switch {
		case pr == nil:
			t.Errorf("phase %s did not run", name)
			continue
		case !pr.Finished:
			t.Errorf("phase %s did not finish", name)
		case pr.Load != nil && pr.Load.OK == 0:
			t.Errorf("phase %s: no request got its wanted status", name)
		default:
			delivered += pr.Delivered
			if more != nil {
				more(name, pr)
			}
		}
		if pr.PeakRSS <= 0 {
			t.Errorf("phase %s: no RSS reading", name)
		}
		if name != "static" && len(pr.Counts) == 0 {
			t.Errorf("%s: the database was not checked", name)
		}
	}
	if delivered == 0 {
		t.Error("no phase delivered anything")
	}
}

// TestSmokePostgres runs the load test, small and short, with
// -storage postgres against the test server, with one Caddy and with two
// on one schema per phase, and fails when a count does not add up, when
// the report or the progress lines show the DSN's password, or when the
// run leaves a schema behind.
func TestSmokePostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs Caddy")
	}
	dsn := testutil.PostgresDSN(t)
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal("the test DSN does not parse")
	}
	password := cfg.Password
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin, err := caddyproc.Build(ctx, t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name      string
		args      []string
		phases    []string
		instances int
	}{
		{"every phase, one instance", nil,
			[]string{"static", "ingest", "baseline", "e2e", "slow1", "slow32", "rate", "backlog-ingest", "backlog-e2e"}, 1},
		{"two instances share the queue", []string{"-instances", "2", "-phases", "ingest,e2e,slow32"},
			[]string{"ingest", "e2e", "slow32"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			prefix := testutil.FreshSchemaPrefix(t, dsn)
			args := append([]string{"-smoke", "-storage", "postgres", "-dsn", dsn, "-schema-prefix", prefix,
				"-caddy", bin, "-dir", dir, "-d", "700ms", "-backlog", "5000"}, tt.args...)
			o, err := parseFlags(args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			res, progress, out := runSmoke(ctx, t, o)
			if password != "" && strings.Contains(progress+out, password) {
				t.Error("the progress lines or the report show the DSN's password")
			}
			header := fmt.Sprintf("storage: postgres %s", res.ServerVersion)
			if !strings.Contains(out, header) || !strings.Contains(out, "synchronous does not apply") {
				t.Errorf("the report's header does not name the backend and say synchronous does not apply")
			}
			if tt.instances > 1 && !strings.Contains(out, fmt.Sprintf("%d Caddy instances", tt.instances)) {
				t.Errorf("the report's header does not name the %d instances", tt.instances)
			}
			for i := range tt.instances {
				name, _ := phases.InstanceName(i)
				if _, err := os.Stat(filepath.Join(dir, name+".log")); err != nil {
					t.Errorf("instance %d did not run: %v", i+1, err)
				}
				cfgText, err := os.ReadFile(filepath.Join(dir, name+".json"))
				if err != nil {
					t.Errorf("instance %d: %v", i+1, err)
				} else if bytes.Contains(cfgText, []byte(dsn)) || password != "" && bytes.Contains(cfgText, []byte(password)) {
					t.Errorf("instance %d's config holds the DSN", i+1)
				}
			}

			checkPhases(t, res, tt.phases, func(name string, pr *phases.Phase) {
				if pr.Server.Window <= 0 || name != "static" && pr.Server.Xacts <= 0 {
					t.Errorf("phase %s: the server's counters were not read (%+v)", name, pr.Server)
				}
			})
			left, err := queuedb.ListSchemas(ctx, dsn, prefix)
			if err != nil {
				t.Fatal(err)
			}
			if len(left) > 0 {
				t.Errorf("the run left schemas %v; without -keep it drops them", left)
			}
		})
	}
}
