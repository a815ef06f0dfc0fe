package queuedb

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/sqlite"
	_ "modernc.org/sqlite" // the driver queue/sqlite uses, for the seed and the checks
)

// Seeding gives a phase a queue that already holds jobs: Seed (SQLite) or
// SeedPostgres writes them, before Caddy opens the queue.

// SeedSpec says what a seed writes: Jobs events, each with one job of
// Status for (Source, Target), due a minute ago, their bodies BodySize
// bytes of JSON. The delivery ids are IDPrefix-0000000001 and up.
type SeedSpec struct {
	IDPrefix       string
	Jobs           int
	BodySize       int
	Source, Target string
	Status         queue.Status
}

// bodyPad is how many pad bytes a seeded body of spec's size gets around
// {"seed":"<10 digits>","pad":"…"}, or an error when the size is too small.
func (spec SeedSpec) bodyPad(where string) (int, error) {
	prefix := `{"seed":"` // then 10 digits, `","pad":"`, x…, `"}`
	n := spec.BodySize - len(prefix) - 10 - len(`","pad":"`) - len(`"}`)
	if n < 0 {
		return 0, fmt.Errorf("seed %s: body size %d is too small", where, spec.BodySize)
	}
	return n, nil
}

// SeedResult says what a seed wrote.
type SeedResult struct {
	Jobs    int
	LastID  int64 // the highest event id seeded; later events are the phase's
	Took    time.Duration
	DBBytes int64

	Checkpoint bool // postgres: the seed's pages were checkpointed before Caddy started
}

// Seed pre-fills the queue database at path as spec says, before Caddy
// opens the file.
//
// queue/sqlite has no bulk-insert API (its writer is built for many small
// concurrent requests), so the schema comes from the package itself
// (sqlite.Open migrates a new file to the schema this build writes) and the
// rows are written here with plain SQL against that schema, in one
// transaction, generated inside SQLite by a recursive CTE so a million rows
// take seconds rather than a million round trips. The columns filled match
// what Enqueue writes: headers in the store's blob encoding (uvarint
// length, bytes, for each name and value), payload, targets = 1, and a job
// row per event with status pending. The payload is JSON of BodySize
// bytes, {"seed":"0000000001","pad":"x…"}, the event's number in a string
// of ten digits (so every body has the same size), which a search can read.
func Seed(ctx context.Context, path string, spec SeedSpec) (SeedResult, error) {
	t0 := time.Now()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		return SeedResult{}, fmt.Errorf("seed %s: create schema: %w", path, err)
	}
	if err := st.Close(); err != nil {
		return SeedResult{}, fmt.Errorf("seed %s: create schema: %w", path, err)
	}
	// synchronous=OFF: the file is ours alone until Caddy starts, and a
	// crash here just means running the load test again.
	db, err := sql.Open("sqlite", URI(path, false)+"&_pragma=synchronous(off)&_pragma=cache_size(-131072)")
	if err != nil {
		return SeedResult{}, fmt.Errorf("seed %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return SeedResult{}, fmt.Errorf("seed %s: begin: %w", path, err)
	}
	defer tx.Rollback()
	var before int64
	if err := tx.QueryRowContext(ctx, sqlLastEvent).Scan(&before); err != nil {
		return SeedResult{}, fmt.Errorf("seed %s: %w", path, err)
	}
	// Due a minute ago, so the first claim takes them.
	now := time.Now().Add(-time.Minute).UnixMilli()
	padLen, err := spec.bodyPad(path)
	if err != nil {
		return SeedResult{}, err
	}
	if _, err := tx.ExecContext(ctx, `
INSERT INTO events (source, delivery_id, event_type, headers, payload, targets, created_at)
WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < ?1)
SELECT ?2, printf('%s-%010d', ?6, i), 'push', ?3,
	CAST(printf('{"seed":"%010d","pad":"%s"}', i, ?4) AS BLOB), 1, ?5
FROM seq`,
		spec.Jobs, spec.Source, seedHeaders(), strings.Repeat("x", padLen), now, spec.IDPrefix); err != nil {
		return SeedResult{}, fmt.Errorf("seed %s: insert events: %w", path, err)
	}
	res, err := tx.ExecContext(ctx, `
INSERT INTO jobs (event_id, source, target, status, attempts, run_at, created_at, finished_at)
SELECT id, source, ?1, ?4, CASE ?4 WHEN 'dead' THEN 1 ELSE 0 END, ?2, ?2, CASE ?4 WHEN 'dead' THEN ?2 END
FROM events WHERE id > ?3 ORDER BY id`, spec.Target, now, before, string(spec.Status))
	if err != nil {
		return SeedResult{}, fmt.Errorf("seed %s: insert jobs: %w", path, err)
	}
	jobs, _ := res.RowsAffected()
	// The store's writer counts what Enqueue inserts (its triggers count
	// the rest); rows written here are counted here.
	if _, err := tx.ExecContext(ctx, `
INSERT INTO job_counts (source, target, status, jobs) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT DO UPDATE SET jobs = jobs + excluded.jobs`, spec.Source, spec.Target, string(spec.Status), jobs); err != nil {
		return SeedResult{}, fmt.Errorf("seed %s: count jobs: %w", path, err)
	}
	if _, err := tx.ExecContext(ctx, `
INSERT INTO event_count (id, events) VALUES (1, ?1)
ON CONFLICT DO UPDATE SET events = events + excluded.events`, spec.Jobs); err != nil {
		return SeedResult{}, fmt.Errorf("seed %s: count events: %w", path, err)
	}
	var last int64
	if err := tx.QueryRowContext(ctx, sqlLastEvent).Scan(&last); err != nil {
		return SeedResult{}, fmt.Errorf("seed %s: %w", path, err)
	}
	if err := tx.Commit(); err != nil {
		return SeedResult{}, fmt.Errorf("seed %s: commit: %w", path, err)
	}
	if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return SeedResult{}, fmt.Errorf("seed %s: checkpoint: %w", path, err)
	}
	out := SeedResult{Jobs: int(jobs), LastID: last}
	if err := db.QueryRowContext(ctx, `SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()`).Scan(&out.DBBytes); err != nil {
		return SeedResult{}, fmt.Errorf("seed %s: %w", path, err)
	}
	if err := db.Close(); err != nil {
		return SeedResult{}, fmt.Errorf("seed %s: %w", path, err)
	}
	// synchronous=OFF left the pages to the kernel's writeback; flush them
	// now, or the backlog phase would pay for the seed's I/O in its own
	// fsyncs.
	if err := syncFile(path); err != nil {
		return SeedResult{}, fmt.Errorf("seed %s: %w", path, err)
	}
	out.Took = time.Since(t0)
	return out, nil
}

// syncFile flushes path to the disk.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// seedHeaders is what the GitHub receiver stores with each event
// (Content-Type and X-GitHub-Event), in queue/sqlite's blob encoding.
func seedHeaders() []byte {
	var b []byte
	for _, s := range []string{"Content-Type", "application/json", "X-GitHub-Event", "push"} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// URI is the modernc driver's name for the file at path.
func URI(path string, readOnly bool) string {
	q := "_pragma=busy_timeout(10000)"
	if readOnly {
		q += "&mode=ro&_pragma=query_only(1)"
	}
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q
}

// Reader is what the count checks read from a phase's queue, in the
// SQLite file (sqliteQueue) or the Postgres schema (postgresQueue): the
// same queries, so the checks are as strict on either.
type Reader interface {
	// LastEvent returns the highest event id, 0 for none: the events of
	// a phase are those above the value read before it.
	LastEvent(ctx context.Context) (int64, error)
	// Done counts the done jobs.
	Done(ctx context.Context) (int64, error)
	// StatusAfter counts, by status, the jobs of the events with an id
	// above after, in one statement.
	StatusAfter(ctx context.Context, after int64) (map[string]int64, error)
	// MatchEvents compares the delivery ids of the events after the
	// given id with want: found are in both, missing only in want
	// (answered 202 but not stored: the invariant broken), extra only in
	// the database (stored, but the load test saw no 202, e.g. a
	// connection that broke before the answer).
	MatchEvents(ctx context.Context, after int64, want map[string]struct{}) (found, missing, extra int64, err error)
	// DoneIDs calls f with the delivery id of every done job.
	DoneIDs(ctx context.Context, f func(id string)) error
	Close() error
}

// Location is where a phase's queue is: an SQLite file (Path), or a
// schema on a PostgreSQL server (DSN and Schema).
type Location struct {
	Path        string
	DSN, Schema string
}

// Open opens the count checks' reader of the queue at loc.
func Open(ctx context.Context, loc Location) (Reader, error) {
	if loc.Schema != "" {
		return openPostgres(ctx, loc.DSN, loc.Schema)
	}
	return openSQLite(loc.Path)
}

// Interface guards.
var (
	_ Reader = (*sqliteQueue)(nil)
	_ Reader = (*postgresQueue)(nil)
)

// sqliteQueue reads a queue database beside the Caddy that writes it (WAL lets
// readers run beside the writer). Every query uses an index whose size does
// not grow with the pending backlog, so reading during a phase does not
// disturb it; the EXPLAIN QUERY PLAN test holds them to that.
type sqliteQueue struct{ db *sql.DB }

func openSQLite(path string) (*sqliteQueue, error) {
	db, err := sql.Open("sqlite", URI(path, true))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	return &sqliteQueue{db: db}, nil
}

// Close implements Reader.
func (q *sqliteQueue) Close() error { return q.db.Close() }

const (
	// sqlLastEvent reads the highest event id, 0 for none. It has no
	// placeholder, so the seeds and readers of both backends use it.
	sqlLastEvent = `SELECT coalesce(max(id), 0) FROM events`
	// sqlDone counts done jobs through the partial index jobs_done.
	sqlDone = `SELECT count(*) FROM jobs WHERE status = 'done'`
	// sqlStatusAfter counts the jobs of events after ?1 by status.
	sqlStatusAfter = `SELECT status, count(*) FROM jobs WHERE event_id > ?1 GROUP BY status`
	// sqlEventsAfter lists the delivery ids of events after ?1.
	sqlEventsAfter = `SELECT delivery_id FROM events WHERE id > ?1`
	// sqlDoneIDs lists the delivery ids of the done jobs.
	sqlDoneIDs = `SELECT e.delivery_id FROM jobs AS j JOIN events AS e ON e.id = j.event_id WHERE j.status = 'done'`
)

// LastEvent implements Reader.
func (q *sqliteQueue) LastEvent(ctx context.Context) (int64, error) {
	var id int64
	if err := q.db.QueryRowContext(ctx, sqlLastEvent).Scan(&id); err != nil {
		return 0, fmt.Errorf("read last event id: %w", err)
	}
	return id, nil
}

// Done implements Reader.
func (q *sqliteQueue) Done(ctx context.Context) (int64, error) {
	var n int64
	if err := q.db.QueryRowContext(ctx, sqlDone).Scan(&n); err != nil {
		return 0, fmt.Errorf("count done jobs: %w", err)
	}
	return n, nil
}

// StatusAfter implements Reader.
func (q *sqliteQueue) StatusAfter(ctx context.Context, after int64) (map[string]int64, error) {
	rows, err := q.db.QueryContext(ctx, sqlStatusAfter, after)
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	defer rows.Close()
	out := make(map[string]int64)
	for rows.Next() {
		var s string
		var n int64
		if err := rows.Scan(&s, &n); err != nil {
			return nil, fmt.Errorf("count jobs: %w", err)
		}
		out[s] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	return out, nil
}

// MatchEvents implements Reader.
func (q *sqliteQueue) MatchEvents(ctx context.Context, after int64, want map[string]struct{}) (found, missing, extra int64, err error) {
	rows, err := q.db.QueryContext(ctx, sqlEventsAfter, after)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("read events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return 0, 0, 0, fmt.Errorf("read events: %w", err)
		}
		if _, ok := want[id]; ok {
			found++
		} else {
			extra++
		}
	}
	if err := rows.Err(); err != nil {
		return 0, 0, 0, fmt.Errorf("read events: %w", err)
	}
	return found, int64(len(want)) - found, extra, nil
}

// DoneIDs implements Reader.
func (q *sqliteQueue) DoneIDs(ctx context.Context, f func(id string)) error {
	rows, err := q.db.QueryContext(ctx, sqlDoneIDs)
	if err != nil {
		return fmt.Errorf("read done jobs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return fmt.Errorf("read done jobs: %w", err)
		}
		f(id)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read done jobs: %w", err)
	}
	return nil
}

// plan returns SQLite's EXPLAIN QUERY PLAN for query, one detail per line.
func (q *sqliteQueue) plan(ctx context.Context, query string, args ...any) (string, error) {
	rows, err := q.db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		return "", fmt.Errorf("explain: %w", err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			return "", fmt.Errorf("explain: %w", err)
		}
		b.WriteString(detail)
		b.WriteByte('\n')
	}
	return b.String(), rows.Err()
}
