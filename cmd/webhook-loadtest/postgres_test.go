package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/postgres"
)

// setupSchemaPrefix returns a schema prefix no other test binary uses, and
// drops every schema named with it when t ends, whatever the run left.
func setupSchemaPrefix(t *testing.T, dsn string) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	prefix := "lt_" + hex.EncodeToString(b[:]) + "_"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		left, err := schemasWithPrefix(ctx, dsn, prefix)
		if err == nil {
			err = dropSchemas(ctx, dsn, left)
		}
		if err != nil {
			t.Errorf("drop the test's schemas: %v", err)
		}
	})
	return prefix
}

// schemasWithPrefix lists the schemas whose names start with prefix.
func schemasWithPrefix(ctx context.Context, dsn, prefix string) ([]string, error) {
	pool, err := pgConnect(ctx, dsn, "", 1, true)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	rows, err := pool.Query(ctx, `SELECT nspname FROM pg_namespace WHERE starts_with(nspname, $1) ORDER BY 1`, prefix)
	if err != nil {
		return nil, err
	}
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
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
	bin, err := buildCaddy(ctx, t.TempDir())
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
			prefix := setupSchemaPrefix(t, dsn)
			args := append([]string{"-smoke", "-storage", "postgres", "-dsn", dsn, "-schema-prefix", prefix,
				"-caddy", bin, "-dir", dir, "-d", "700ms", "-backlog", "5000"}, tt.args...)
			o, err := parseFlags(args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			rep, progress, out := runSmoke(ctx, t, o)
			if password != "" && strings.Contains(progress+out, password) {
				t.Error("the progress lines or the report show the DSN's password")
			}
			header := fmt.Sprintf("storage: postgres %s", rep.serverVersion)
			if !strings.Contains(out, header) || !strings.Contains(out, "synchronous does not apply") {
				t.Errorf("the report's header does not name the backend and say synchronous does not apply")
			}
			if tt.instances > 1 && !strings.Contains(out, fmt.Sprintf("%d Caddy instances", tt.instances)) {
				t.Errorf("the report's header does not name the %d instances", tt.instances)
			}
			for i := range tt.instances {
				name, _ := instanceName(i)
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

			checkPhases(t, rep, tt.phases, func(name string, pr *phaseResult) {
				if pr.server.window <= 0 || name != "static" && pr.server.xacts <= 0 {
					t.Errorf("phase %s: the server's counters were not read (%+v)", name, pr.server)
				}
			})
			left, err := schemasWithPrefix(ctx, dsn, prefix)
			if err != nil {
				t.Fatal(err)
			}
			if len(left) > 0 {
				t.Errorf("the run left schemas %v; without -keep it drops them", left)
			}
		})
	}
}

// TestSeedPostgresMatchesStore proves that the Postgres seed writes rows
// the real store claims and decodes like its own, as TestSeedMatchesStore
// does for SQLite.
func TestSeedPostgresMatchesStore(t *testing.T) {
	dsn := testutil.PostgresDSN(t)
	schema := setupSchemaPrefix(t, dsn) + "seed"
	const n, bodySize = 40, 512
	ctx := context.Background()
	s, err := seedPostgres(ctx, dsn, schema, "seed", n, bodySize, source, targetName, queue.StatusPending)
	if err != nil {
		t.Fatal(err)
	}
	if s.jobs != n || s.lastID != n || s.dbBytes <= 0 {
		t.Fatalf("seed = %d jobs, last id %d, %d bytes; want %d, %d, some", s.jobs, s.lastID, s.dbBytes, n, n)
	}
	st, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	checkSeedClaims(ctx, t, st, n, bodySize)

	// The readers of the checks see the claimed jobs as running and none
	// done.
	q, err := openPgQueue(ctx, dsn, schema)
	if err != nil {
		t.Fatal(err)
	}
	defer q.close()
	byStatus, err := q.statusAfter(ctx, 0)
	if err != nil || byStatus[string(queue.StatusRunning)] != n || len(byStatus) != 1 {
		t.Errorf("statusAfter(0) = %v, %v; want %d running", byStatus, err, n)
	}
	found, missing, extra, err := q.matchEvents(ctx, n-2, map[string]struct{}{"seed-0000000040": {}, "nope": {}})
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
			if got := schemaFor(tt.prefix, tt.db); got != tt.want {
				t.Errorf("schemaFor(%q, %q) = %q, want %q", tt.prefix, tt.db, got, tt.want)
			}
		})
	}
	// Every schema of a run with the longest prefix is one the store
	// accepts (postgres.Config.Schema's rule).
	storeRule := regexp.MustCompile(`^[a-z_][a-z0-9_]{0,56}$`)
	r := &runner{o: options{schemaPrefix: strings.Repeat("p", 32), rounds: 99}}
	for _, s := range r.schemas() {
		if !storeRule.MatchString(s) {
			t.Errorf("schema %q is too long or malformed for the store", s)
		}
	}
}

func TestParseFlagsStorage(t *testing.T) {
	const dsn = "postgres://lt:flag-secret@127.0.0.1:54329/db?sslmode=disable"
	tests := []struct {
		name    string
		env     string // CADDYWEBHOOK_TEST_POSTGRES_DSN
		args    []string
		check   func(o options) bool
		wantErr string
	}{
		{"sqlite is the default", dsn, nil, func(o options) bool {
			return o.storage == "sqlite" && o.instances == 1 && o.dsn == ""
		}, ""},
		{"postgres with -dsn", "", []string{"-storage", "postgres", "-dsn", dsn}, func(o options) bool {
			return o.dsn == dsn && o.dsnDesc == "lt@127.0.0.1:54329/db" && o.schemaPrefix == "lt_" && o.redact != nil
		}, ""},
		{"postgres takes the DSN from the environment", dsn, []string{"-storage", "postgres"}, func(o options) bool {
			return o.dsn == dsn
		}, ""},
		{"-dsn wins over the environment", "postgres://other@h/x", []string{"-storage", "postgres", "-dsn", dsn}, func(o options) bool {
			return o.dsn == dsn
		}, ""},
		{"instances on postgres", dsn, []string{"-storage", "postgres", "-instances", "3", "-schema-prefix", "mine_"}, func(o options) bool {
			return o.instances == 3 && o.schemaPrefix == "mine_"
		}, ""},
		{"postgres without a DSN", "", []string{"-storage", "postgres"}, nil, `eval "$(.ci/start-postgres)"`},
		{"unknown storage", "", []string{"-storage", "mysql"}, nil, `-storage "mysql"`},
		{"instances on sqlite", "", []string{"-instances", "2"}, nil, "only on postgres"},
		{"fewer connections than instances", dsn, []string{"-storage", "postgres", "-instances", "4", "-c", "3"}, nil, "at least one connection per instance"},
		{"no instances", dsn, []string{"-storage", "postgres", "-instances", "0"}, nil, "-instances 0"},
		{"-dsn with sqlite", "", []string{"-dsn", dsn}, nil, "-dsn applies to -storage postgres only"},
		{"-schema-prefix with sqlite", "", []string{"-schema-prefix", "x_"}, nil, "-schema-prefix applies"},
		{"-synchronous with postgres", dsn, []string{"-storage", "postgres", "-synchronous", "normal"}, nil, "-synchronous applies to sqlite only"},
		{"upper-case schema prefix", dsn, []string{"-storage", "postgres", "-schema-prefix", "LT_"}, nil, "-schema-prefix"},
		{"pg_ schema prefix", dsn, []string{"-storage", "postgres", "-schema-prefix", "pg_x"}, nil, "-schema-prefix"},
		{"a DSN that does not parse", "", []string{"-storage", "postgres", "-dsn", "postgres://lt:flag-secret@h:port/db"}, nil, "does not parse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(dsnEnv, tt.env)
			o, err := parseFlags(tt.args, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "flag-secret") {
					t.Errorf("err = %v shows the password", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(o) {
				t.Errorf("options: storage %q, instances %d, prefix %q, desc %q", o.storage, o.instances, o.schemaPrefix, o.dsnDesc)
			}
		})
	}
}

// TestStorageJSON checks the storage block each backend's configs carry:
// the Postgres one names the DSN by placeholder, never by value, and has
// no synchronous.
func TestStorageJSON(t *testing.T) {
	tests := []struct {
		name string
		pc   phaseConfig
		want string
	}{
		{"sqlite", phaseConfig{db: "/w/ingest-1.db", sync: "full"},
			`{"backend":"sqlite","path":"/w/ingest-1.db","synchronous":"full"}`},
		{"sqlite baseline", phaseConfig{db: "/w/b.db", sync: "normal", maxBatch: 1},
			`{"backend":"sqlite","max_batch":1,"path":"/w/b.db","synchronous":"normal"}`},
		{"postgres", phaseConfig{schema: "lt_e2e_1", sync: "full"},
			`{"backend":"postgres","dsn":"{env.WEBHOOK_LOADTEST_PG_DSN}","schema":"lt_e2e_1"}`},
		{"postgres baseline", phaseConfig{schema: "lt_baseline_1", maxBatch: 1},
			`{"backend":"postgres","dsn":"{env.WEBHOOK_LOADTEST_PG_DSN}","max_batch":1,"schema":"lt_baseline_1"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.pc.storageJSON())
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("storage = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestQueryPlansPostgres holds the checks' reads to indexes whose cost
// does not grow with the pending backlog, as TestQueryPlans does on
// SQLite: with a seeded, analyzed backlog, none of them scans a table.
func TestQueryPlansPostgres(t *testing.T) {
	dsn := testutil.PostgresDSN(t)
	schema := setupSchemaPrefix(t, dsn) + "plans"
	ctx := context.Background()
	s, err := seedPostgres(ctx, dsn, schema, "seed", 20_000, 256, source, targetName, queue.StatusPending)
	if err != nil {
		t.Fatal(err)
	}
	q, err := openPgQueue(ctx, dsn, schema)
	if err != nil {
		t.Fatal(err)
	}
	defer q.close()
	after := s.lastID - 10 // a phase's events: the last few
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
