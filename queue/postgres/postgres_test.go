package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/queuetest"
	"github.com/jackc/pgx/v5"
)

// openStore opens a Store on cfg (DSN filled in from the environment) and
// closes it when tb ends.
func openStore(tb testing.TB, cfg Config) *Store {
	tb.Helper()
	if cfg.DSN == "" {
		cfg.DSN = testutil.PostgresDSN(tb)
	}
	s, err := Open(tb.Context(), cfg)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

// setup opens a store on an empty schema of its own.
func setup(tb testing.TB) *Store {
	tb.Helper()
	dsn := testutil.PostgresDSN(tb)
	return openStore(tb, Config{DSN: dsn, Schema: testSchema(tb, dsn)})
}

// Migrating a new schema costs a few hundred milliseconds of DDL commits;
// emptying one costs a few. Tests that need no schema of their own making
// take one that an earlier test used and emptied: as good as fresh, ids
// included. The package's TestMain drops them all at the end.
var schemas struct {
	sync.Mutex
	free, all []string
}

// testSchema returns a schema no other running test uses, empty (migrated
// or not yet created), and empties it for the next test when tb ends.
func testSchema(tb testing.TB, dsn string) string {
	tb.Helper()
	schemas.Lock()
	var schema string
	if n := len(schemas.free); n > 0 {
		schema, schemas.free = schemas.free[n-1], schemas.free[:n-1]
	} else {
		schema = testutil.SchemaName()
		schemas.all = append(schemas.all, schema)
	}
	schemas.Unlock()
	// Registered before the test opens its stores, so it runs after their
	// Close.
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			tb.Errorf("empty schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		var exists bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil {
			tb.Errorf("empty schema %s: %v", schema, err)
			return
		}
		if exists {
			// DELETE is the quicker for a few rows, TRUNCATE (new files)
			// for many.
			var many bool
			err = conn.QueryRow(ctx, "SELECT count(*) > 10000 FROM (SELECT 1 FROM "+schema+".events LIMIT 10001) AS e").Scan(&many)
			if err == nil && many {
				_, err = conn.Exec(ctx, "TRUNCATE "+schema+".attempts, "+schema+".jobs, "+schema+".events, "+
					schema+".job_counts, "+schema+".event_counts, "+schema+".ordering_heads, "+schema+".seal_counts RESTART IDENTITY")
			} else if err == nil {
				_, err = conn.Exec(ctx, `BEGIN;
DELETE FROM `+schema+`.attempts; DELETE FROM `+schema+`.jobs; DELETE FROM `+schema+`.events;
DELETE FROM `+schema+`.job_counts; DELETE FROM `+schema+`.event_counts;
DELETE FROM `+schema+`.ordering_heads; DELETE FROM `+schema+`.seal_counts;
ALTER TABLE `+schema+`.attempts ALTER COLUMN id RESTART;
ALTER TABLE `+schema+`.jobs ALTER COLUMN id RESTART;
ALTER TABLE `+schema+`.events ALTER COLUMN id RESTART;
COMMIT`)
			}
			if err != nil {
				tb.Errorf("empty schema %s: %v", schema, err)
				return // not reused
			}
		}
		schemas.Lock()
		schemas.free = append(schemas.free, schema)
		schemas.Unlock()
	})
	return schema
}

func TestMain(m *testing.M) {
	code := m.Run()
	if dsn := os.Getenv(testutil.DSNEnv); dsn != "" && len(schemas.all) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		conn, err := pgx.Connect(ctx, dsn)
		if err == nil {
			for _, schema := range schemas.all {
				if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
					fmt.Fprintf(os.Stderr, "drop schema %s: %v\n", schema, err)
				}
			}
			conn.Close(ctx)
		} else {
			fmt.Fprintf(os.Stderr, "drop test schemas: %v\n", err)
		}
		cancel()
	}
	os.Exit(code)
}

// adminConn is a plain connection to the test database, for the test to
// look at the server the way an operator would.
func adminConn(tb testing.TB) *pgx.Conn {
	tb.Helper()
	conn, err := pgx.Connect(tb.Context(), testutil.PostgresDSN(tb))
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	tb.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestConformance(t *testing.T) {
	testutil.PostgresDSN(t)
	queuetest.Run(t, func(t *testing.T) queue.Store { return setup(t) })
}

// TestConformanceSerial runs the suite with each enqueue alone in its
// statement (MaxBatch 1), the benchmark baseline, so both paths of
// Enqueue are held to it.
func TestConformanceSerial(t *testing.T) {
	dsn := testutil.PostgresDSN(t)
	queuetest.Run(t, func(t *testing.T) queue.Store {
		return openStore(t, Config{DSN: dsn, Schema: testSchema(t, dsn), MaxBatch: 1})
	})
}

// sealedDB is a schema of its own for queuetest.RunSealed; the stores
// opened on it share it.
type sealedDB struct{ dsn, schema string }

func (d sealedDB) Open(t *testing.T, keys queue.Keys) (queue.Store, error) {
	s, err := Open(t.Context(), Config{DSN: d.dsn, Schema: d.schema, Keys: keys})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { s.Close() })
	return s, nil
}

func (d sealedDB) Dump(t *testing.T) []byte { return testutil.PostgresBytes(t, d.dsn, d.schema) }

func (d sealedDB) Exec(t *testing.T, _ queue.Store, query string) {
	t.Helper()
	conn := adminConn(t)
	for _, q := range []string{"SET search_path TO " + d.schema, query} {
		if _, err := conn.Exec(t.Context(), q); err != nil {
			t.Fatalf("%.40s: %v", q, err)
		}
	}
}

func TestSealed(t *testing.T) {
	dsn := testutil.PostgresDSN(t)
	queuetest.RunSealed(t, func(t *testing.T) queuetest.Database {
		return sealedDB{dsn: dsn, schema: testutil.FreshSchema(t, dsn)}
	})
}

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		field string // the field the error must name
	}{
		{"no dsn", Config{}, "Config.DSN"},
		{"bad dsn", Config{DSN: "postgres://u:secret@[::1"}, "Config.DSN"},
		{"upper-case schema", Config{DSN: "postgres://localhost/x", Schema: "Queue"}, "Config.Schema"},
		{"quoted schema", Config{DSN: "postgres://localhost/x", Schema: `a"; DROP`}, "Config.Schema"},
		{"pg_ schema", Config{DSN: "postgres://localhost/x", Schema: "pg_queue"}, "Config.Schema"},
		{"long schema", Config{DSN: "postgres://localhost/x", Schema: strings.Repeat("a", 58)}, "Config.Schema"},
		{"negative conns", Config{DSN: "postgres://localhost/x", MaxConns: -1}, "Config.MaxConns"},
		{"negative batch", Config{DSN: "postgres://localhost/x", MaxBatch: -1}, "Config.MaxBatch"},
		{"huge batch", Config{DSN: "postgres://localhost/x", MaxBatch: 1 << 20}, "Config.MaxBatch"},
		{"negative interval", Config{DSN: "postgres://localhost/x", NotifyInterval: -time.Second}, "Config.NotifyInterval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Open(t.Context(), tt.cfg)
			if err == nil {
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("error %q does not name %s", err, tt.field)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q leaks the DSN's password", err)
			}
		})
	}
}

// TestMigrateConcurrently opens several stores on one new schema at once:
// the advisory lock lets one migrate and the others find it done.
func TestMigrateConcurrently(t *testing.T) {
	dsn := testutil.PostgresDSN(t)
	schema := testutil.FreshSchema(t, dsn)
	const n = 4
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			s, err := Open(t.Context(), Config{DSN: dsn, Schema: schema, MaxConns: 2})
			if err == nil {
				err = s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open #%d: %v", i, err)
		}
	}
	conn := adminConn(t)
	var version int
	if err := conn.QueryRow(t.Context(), "SELECT version FROM "+schema+".schema_version").Scan(&version); err != nil {
		t.Fatalf("read version: %v", err)
	}
	if version != schemaVersion {
		t.Errorf("schema_version = %d, want %d", version, schemaVersion)
	}
}

// TestNewerSchemaRefused keeps an old build from writing to a schema a
// newer build migrated.
func TestNewerSchemaRefused(t *testing.T) {
	dsn := testutil.PostgresDSN(t)
	schema := testutil.FreshSchema(t, dsn)
	s := openStore(t, Config{DSN: dsn, Schema: schema})
	s.Close()
	conn := adminConn(t)
	if _, err := conn.Exec(t.Context(), "UPDATE "+schema+".schema_version SET version = version + 1"); err != nil {
		t.Fatal(err)
	}
	_, err := Open(t.Context(), Config{DSN: dsn, Schema: schema})
	if err == nil || !strings.Contains(err.Error(), "newer than this build") {
		t.Fatalf("Open on a newer schema: %v, want a refusal", err)
	}
}

// TestAutovacuumSettings checks that the migration applied the per-table
// settings the package doc promises.
func TestAutovacuumSettings(t *testing.T) {
	s := setup(t)
	conn := adminConn(t)
	var opts []string
	err := conn.QueryRow(t.Context(), `SELECT reloptions FROM pg_class
WHERE oid = ($1 || '.jobs')::regclass`, s.cfg.Schema).Scan(&opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"autovacuum_vacuum_scale_factor=0.01", "autovacuum_vacuum_threshold=1000"} {
		if !strings.Contains(strings.Join(opts, ","), want) {
			t.Errorf("jobs reloptions %v lack %s", opts, want)
		}
	}
}

// TestSafeStrings stores what PostgreSQL's text type cannot hold: a NUL
// and invalid UTF-8 in an error, bytes of every value in headers and
// payload.
func TestSafeStrings(t *testing.T) {
	s := setup(t)
	ctx := t.Context()
	payload := []byte{0, 0xff, 0xfe, 'x', 0}
	ev := queue.Event{Source: "s", DeliveryID: "d", Payload: payload, Targets: []string{"t"},
		Headers: []queue.Header{{Name: "X-Bin", Value: "a\x00b\xff"}}}
	if _, err := s.Enqueue(ctx, ev); err != nil {
		t.Fatal(err)
	}
	jobs, err := s.Claim(ctx, queue.ClaimParams{Owner: "o", Limit: 1, Lease: time.Minute, Now: time.Now()})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Claim = %d jobs, %v", len(jobs), err)
	}
	if string(jobs[0].Payload) != string(payload) || jobs[0].Headers[0].Value != "a\x00b\xff" {
		t.Errorf("claimed payload %q headers %q, want them byte for byte", jobs[0].Payload, jobs[0].Headers)
	}
	rec, err := s.Finish(ctx, []queue.Completion{{JobID: jobs[0].ID, Owner: "o", Fence: jobs[0].Fence, Status: queue.StatusDead,
		Error: "exit 1: \x00\xff tail", Now: time.Now()}})
	if err != nil || !rec[0] {
		t.Fatalf("Finish = %v, %v", rec, err)
	}
	d, err := s.GetJob(ctx, jobs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := "exit 1: \uFFFD\uFFFD tail"; d.LastError != want {
		t.Errorf("LastError = %q, want %q", d.LastError, want)
	}
}

// TestEmptyEvent stores an event with no headers and no payload: both
// come back empty, not NULL.
func TestEmptyEvent(t *testing.T) {
	s := setup(t)
	if _, err := s.Enqueue(t.Context(), queue.Event{Source: "s", DeliveryID: "d", Targets: []string{"t"}}); err != nil {
		t.Fatal(err)
	}
	jobs, err := s.Claim(t.Context(), queue.ClaimParams{Owner: "o", Limit: 1, Lease: time.Minute})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Claim = %d jobs, %v", len(jobs), err)
	}
	if jobs[0].Headers != nil || jobs[0].Payload == nil || len(jobs[0].Payload) != 0 {
		t.Errorf("claimed headers %v, payload %#v; want none and empty", jobs[0].Headers, jobs[0].Payload)
	}
}

func TestClosedStore(t *testing.T) {
	s := setup(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := s.Enqueue(t.Context(), queue.Event{Source: "s", DeliveryID: "d"})
	if !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Enqueue after Close = %v, want ErrClosed", err)
	}
	if _, err := s.Stats(t.Context(), time.Now()); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Stats after Close = %v, want ErrClosed", err)
	}
}

// TestEnqueueAtomic: when the jobs cannot be written the event is not
// either, and Enqueue reports the failure; once the cause is gone the same
// event is accepted as new.
func TestEnqueueAtomic(t *testing.T) {
	s := setup(t)
	admin := adminConn(t)
	schema := s.cfg.Schema
	_, err := admin.Exec(t.Context(), `
CREATE FUNCTION `+schema+`.refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no space left'; END $$;
CREATE TRIGGER refuse BEFORE INSERT ON `+schema+`.jobs FOR EACH ROW EXECUTE FUNCTION `+schema+`.refuse();`)
	if err != nil {
		t.Fatal(err)
	}
	// The schema goes to another test afterwards.
	t.Cleanup(func() {
		_, err := admin.Exec(context.Background(), "DROP TRIGGER IF EXISTS refuse ON "+schema+".jobs; DROP FUNCTION "+schema+".refuse()")
		if err != nil {
			t.Errorf("drop trigger: %v", err)
		}
	})
	e := queue.Event{Source: "s", DeliveryID: "d", Payload: []byte("x"), Targets: []string{"a", "b"}}
	if _, err := s.Enqueue(t.Context(), e); err == nil {
		t.Fatal("Enqueue succeeded while jobs could not be written")
	}
	st, err := s.Stats(t.Context(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if st.Events != 0 || len(st.Counts) != 0 {
		t.Fatalf("after a failed enqueue: %+v, want nothing stored", st)
	}
	if _, err := admin.Exec(t.Context(), "DROP TRIGGER refuse ON "+schema+".jobs"); err != nil {
		t.Fatal(err)
	}
	res, err := s.Enqueue(t.Context(), e)
	if err != nil || res.Duplicate || res.Jobs != 2 {
		t.Fatalf("Enqueue after recovery = %+v, %v; want a new event with 2 jobs", res, err)
	}
}

// TestConnectionsLost: when the server ends every connection of the store
// (a restart, a failover), writes fail or succeed but never lie, and the
// store is back at work by itself.
func TestConnectionsLost(t *testing.T) {
	dsn := testutil.PostgresDSN(t)
	app := testutil.SchemaName() // a unique application_name to find our sessions by
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	s := openStore(t, Config{DSN: dsn + sep + "application_name=" + app, Schema: testSchema(t, dsn), MaxConns: 4})
	for i := range 8 { // fill the pool with several connections
		if _, err := s.Enqueue(t.Context(), ev(fmt.Sprint("before-", i), "mail")); err != nil {
			t.Fatal(err)
		}
	}
	admin := adminConn(t)
	drainReady(s) // from here on only the listener signals, until the next enqueue
	var killed int
	err := admin.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE application_name LIKE $1 || '%'`, app).Scan(&killed)
	if err != nil || killed < 2 { // the pool's and the listener's at least
		t.Fatalf("terminated %d sessions, %v; want the pool's and the listener's", killed, err)
	}
	waitReady(t, s, 10*time.Second, "listener back after the loss")
	if n := s.listen.reconnects.Load(); n != 1 {
		t.Errorf("listener reconnected %d times, want 1", n)
	}
	accepted := 0
	for i := range 10 {
		res, err := s.Enqueue(t.Context(), ev(fmt.Sprint("after-", i), "mail"))
		if err != nil {
			continue // a dead connection; the pool drops it
		}
		if res.Duplicate || res.Jobs != 1 {
			t.Fatalf("Enqueue = %+v", res)
		}
		accepted++
	}
	if accepted < 5 {
		t.Errorf("only %d of 10 enqueues after the loss succeeded", accepted)
	}
	st, err := s.Stats(t.Context(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(8 + accepted); st.Events != want {
		t.Errorf("stored %d events, want %d: every success stored, no failure stored", st.Events, want)
	}
}
