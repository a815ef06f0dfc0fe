package queuedb

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/postgres"
	"github.com/caddywebhook/caddywebhook/queue/sqlite"
)

// The route the seeds of these tests are for.
const source, target = "lt", "out"

// seedSpec is a seed of n pending jobs of bodySize bytes for the route,
// with ids seed-0000000001 and up.
func seedSpec(n, bodySize int) SeedSpec {
	return SeedSpec{IDPrefix: "seed", Jobs: n, BodySize: bodySize, Source: source, Target: target, Status: queue.StatusPending}
}

// setupSeeded seeds a database of n jobs and returns its path.
func setupSeeded(t *testing.T, n, bodySize int) (string, SeedResult) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "q.db")
	s, err := Seed(context.Background(), path, seedSpec(n, bodySize))
	if err != nil {
		t.Fatal(err)
	}
	return path, s
}

// checkSeedClaims claims every job of a seed of n jobs of bodySize bytes
// from st, the real store on the seeded database, and checks that they
// are all due and routed and that the first decodes as the receiver would
// have stored it.
func checkSeedClaims(ctx context.Context, t *testing.T, st queue.Store, n, bodySize int) {
	t.Helper()
	jobs, err := st.Claim(ctx, queue.ClaimParams{
		Owner: "test", Limit: 2 * n, Lease: time.Minute, Now: time.Now(),
		Routes: []queue.Route{{Source: source, Target: target}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != n {
		t.Fatalf("claimed %d jobs, want %d (every seeded job due and routed)", len(jobs), n)
	}
	j := jobs[0]
	if j.DeliveryID != "seed-0000000001" || j.EventType != "push" || len(j.Payload) != bodySize || j.Attempt != 1 {
		t.Errorf("first job: id %q, type %q, %d-byte payload, attempt %d", j.DeliveryID, j.EventType, len(j.Payload), j.Attempt)
	}
	want := []queue.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "X-GitHub-Event", Value: "push"}}
	if len(j.Headers) != 2 || j.Headers[0] != want[0] || j.Headers[1] != want[1] {
		t.Errorf("headers %v, want %v", j.Headers, want)
	}
	if !strings.HasPrefix(string(j.Payload), `{"seed":"0000000001","pad":"x`) || !strings.HasSuffix(string(j.Payload), `x"}`) {
		t.Errorf("payload %q is not the seed's JSON", j.Payload)
	}
}

// TestSeedMatchesStore proves that seeded rows are rows the real store can
// claim, decode and deliver: the seed writes SQL of its own against the
// store's schema, so this is where a schema change would show.
func TestSeedMatchesStore(t *testing.T) {
	const n, bodySize = 40, 512
	path, s := setupSeeded(t, n, bodySize)
	if s.Jobs != n || s.LastID != n {
		t.Fatalf("seed = %d jobs, last id %d; want %d, %d", s.Jobs, s.LastID, n, n)
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	checkSeedClaims(ctx, t, st, n, bodySize)
	// A second seed appends after the first.
	s2, err := Seed(ctx, filepath.Join(t.TempDir(), "other.db"), seedSpec(3, bodySize))
	if err != nil || s2.Jobs != 3 {
		t.Errorf("seed of a second file = %d jobs, %v", s2.Jobs, err)
	}
}

// TestQueryPlans holds the load test's own reads to indexes whose cost does
// not grow with the pending backlog, so measuring the backlog phase does
// not slow it.
func TestQueryPlans(t *testing.T) {
	path, _ := setupSeeded(t, 10, 256)
	q, err := openSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	tests := []struct {
		name, query string
		args        []any
		want        string
	}{
		{"done count", sqlDone, nil, "COVERING INDEX jobs_done"},
		{"phase's jobs", sqlStatusAfter, []any{int64(5)}, "INDEX jobs_event (event_id>?)"},
		{"phase's events", sqlEventsAfter, []any{int64(5)}, "INTEGER PRIMARY KEY (rowid>?)"},
		{"done ids", sqlDoneIDs, nil, "INDEX jobs_done"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := q.plan(context.Background(), tt.query, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(plan, tt.want) {
				t.Errorf("plan:\n%s\nwant it to use %s", plan, tt.want)
			}
		})
	}
}

// TestSeedPostgresMatchesStore proves that the Postgres seed writes rows
// the real store claims and decodes like its own, as TestSeedMatchesStore
// does for SQLite.
func TestSeedPostgresMatchesStore(t *testing.T) {
	dsn := testutil.PostgresDSN(t)
	schema := testutil.FreshSchemaPrefix(t, dsn) + "seed"
	const n, bodySize = 40, 512
	ctx := context.Background()
	s, err := SeedPostgres(ctx, dsn, schema, seedSpec(n, bodySize))
	if err != nil {
		t.Fatal(err)
	}
	if s.Jobs != n || s.LastID != n || s.DBBytes <= 0 {
		t.Fatalf("seed = %d jobs, last id %d, %d bytes; want %d, %d, some", s.Jobs, s.LastID, s.DBBytes, n, n)
	}
	st, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	checkSeedClaims(ctx, t, st, n, bodySize)

	// The readers of the checks see the claimed jobs as running and none
	// done.
	q, err := openPostgres(ctx, dsn, schema)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	byStatus, err := q.StatusAfter(ctx, 0)
	if err != nil || byStatus[string(queue.StatusRunning)] != n || len(byStatus) != 1 {
		t.Errorf("statusAfter(0) = %v, %v; want %d running", byStatus, err, n)
	}
	found, missing, extra, err := q.MatchEvents(ctx, n-2, map[string]struct{}{"seed-0000000040": {}, "nope": {}})
	if err != nil || found != 1 || missing != 1 || extra != 1 {
		t.Errorf("matchEvents = %d found, %d missing, %d extra, %v; want 1, 1, 1", found, missing, extra, err)
	}
}

func TestSchemaFor(t *testing.T) {
	tests := []struct {
		name, prefix, db, want string
	}{
		{"a round's database", "lt_", "ingest-1.db", "lt_ingest_1"},
		{"a seeded database", "lt_", "slow32.db", "lt_slow32"},
		{"the backlog", "lt_", "backlog.db", "lt_backlog"},
		{"a test's prefix", "lt_0a1b2c3d_", "baseline-12.db", "lt_0a1b2c3d_baseline_12"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SchemaFor(tt.prefix, tt.db); got != tt.want {
				t.Errorf("SchemaFor(%q, %q) = %q, want %q", tt.prefix, tt.db, got, tt.want)
			}
		})
	}
}

// TestQueryPlansPostgres holds the checks' reads to indexes whose cost
// does not grow with the pending backlog, as TestQueryPlans does on
// SQLite: with a seeded, analyzed backlog, none of them scans a table.
func TestQueryPlansPostgres(t *testing.T) {
	dsn := testutil.PostgresDSN(t)
	schema := testutil.FreshSchemaPrefix(t, dsn) + "plans"
	ctx := context.Background()
	s, err := SeedPostgres(ctx, dsn, schema, seedSpec(20_000, 256))
	if err != nil {
		t.Fatal(err)
	}
	q, err := openPostgres(ctx, dsn, schema)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	after := s.LastID - 10 // a phase's events: the last few
	tests := []struct {
		name, query string
		args        []any
		want        string
	}{
		{"done count", pgDone, nil, "Index Only Scan using jobs_done"},
		{"phase's jobs", pgStatusAfter, []any{after}, "using jobs_event"},
		{"phase's events", pgEventsAfter, []any{after}, "using events_pkey"},
		{"done ids", pgDoneIDs, nil, "using jobs_done"},
		{"last event", sqlLastEvent, nil, "using events_pkey"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := q.plan(ctx, tt.query, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(plan, tt.want) || strings.Contains(plan, "Seq Scan") {
				t.Errorf("plan:\n%s\nwant it to use %q and no Seq Scan", plan, tt.want)
			}
		})
	}
}
