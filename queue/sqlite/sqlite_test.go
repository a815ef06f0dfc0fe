package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/queuetest"
)

// setup opens a store on a new file in tb.TempDir and closes it after tb,
// a test or a benchmark.
func setup(tb testing.TB, opts ...func(*Config)) *Store {
	tb.Helper()
	cfg := Config{Path: filepath.Join(tb.TempDir(), "queue.db")}
	for _, o := range opts {
		o(&cfg)
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

func TestConformance(t *testing.T) {
	queuetest.Run(t, func(t *testing.T) queue.Store { return setup(t) })
}

// TestConformanceSerial runs the suite with one request per transaction,
// the benchmark baseline, so both modes of the writer are held to it.
func TestConformanceSerial(t *testing.T) {
	if testing.Short() {
		t.Skip("the batched run covers the same code")
	}
	queuetest.Run(t, func(t *testing.T) queue.Store {
		return setup(t, func(c *Config) { c.MaxBatch = 1; c.Synchronous = "normal" })
	})
}

// sealedDB is a file of its own for queuetest.RunSealed.
type sealedDB struct{ path string }

func (d sealedDB) Open(t *testing.T, keys queue.Keys) (queue.Store, error) {
	s, err := Open(t.Context(), Config{Path: d.path, Keys: keys})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { s.Close() })
	return s, nil
}

func (d sealedDB) Dump(t *testing.T) []byte { return testutil.SQLiteBytes(t, d.path) }

// Exec runs query on s's writer, between two of its batches.
func (d sealedDB) Exec(t *testing.T, s queue.Store, query string) {
	t.Helper()
	if err := s.(*Store).onWriterNow(t, query); err != nil {
		t.Fatalf("%.40s: %v", query, err)
	}
}

func TestSealed(t *testing.T) {
	queuetest.RunSealed(t, func(t *testing.T) queuetest.Database {
		return sealedDB{path: filepath.Join(t.TempDir(), "queue.db")}
	})
}

func testEvent(id string, targets ...string) queue.Event {
	return queue.Event{Source: "shop", DeliveryID: id, Payload: []byte("{}"), Targets: targets}
}

func TestFileMode(t *testing.T) {
	old := setUmask(0)
	t.Cleanup(func() { setUmask(old) })
	s := setup(t)
	if _, err := s.Enqueue(t.Context(), testEvent("d1", "mail")); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		t.Run("db"+suffix, func(t *testing.T) {
			fi, err := os.Stat(s.path + suffix)
			if err != nil {
				t.Fatal(err)
			}
			if mode := fi.Mode().Perm(); mode != 0o600 {
				t.Errorf("mode %o, want 600", mode)
			}
		})
	}
}

func TestConfig(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		cfg  Config
		want string // substring of the error, "" for success
	}{
		{"defaults", Config{Path: filepath.Join(dir, "a.db")}, ""},
		{"normal, upper case", Config{Path: filepath.Join(dir, "b.db"), Synchronous: "NORMAL"}, ""},
		{"path with a question mark", Config{Path: filepath.Join(dir, "c?mode=ro.db")}, ""},
		{"no path", Config{}, "Config.Path"},
		{"memory", Config{Path: ":memory:"}, "Config.Path"},
		{"synchronous off", Config{Path: filepath.Join(dir, "d.db"), Synchronous: "off"}, "Config.Synchronous"},
		{"negative busy timeout", Config{Path: filepath.Join(dir, "e.db"), BusyTimeout: -1}, "Config.BusyTimeout"},
		{"negative batch", Config{Path: filepath.Join(dir, "f.db"), MaxBatch: -1}, "Config.MaxBatch"},
		{"negative read conns", Config{Path: filepath.Join(dir, "g.db"), ReadConns: -1}, "Config.ReadConns"},
		{"missing directory", Config{Path: filepath.Join(dir, "no", "h.db")}, "create db file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(t.Context(), tt.cfg)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				defer s.Close()
				if _, err := os.Stat(tt.cfg.Path); err != nil {
					t.Errorf("database not at its path: %v", err)
				}
				var sync int
				if err := s.onWriter(t.Context(), func(w *writer) error {
					return w.conn.QueryRowContext(t.Context(), "PRAGMA synchronous").Scan(&sync)
				}); err != nil {
					t.Fatal(err)
				}
				want := map[string]int{"": 2, "NORMAL": 1}[tt.cfg.Synchronous]
				if sync != want {
					t.Errorf("synchronous = %d, want %d", sync, want)
				}
				return
			}
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open = %v, want an error naming %s", err, tt.want)
			}
		})
	}
}

func TestOpen(t *testing.T) {
	t.Run("reopen keeps data and schema", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "q.db")
		for i := range 3 {
			s, err := Open(t.Context(), Config{Path: path})
			if err != nil {
				t.Fatalf("Open #%d: %v", i+1, err)
			}
			res, err := s.Enqueue(t.Context(), testEvent("d1", "mail"))
			if err != nil || res.Duplicate != (i > 0) {
				t.Errorf("Enqueue #%d = %+v, %v", i+1, res, err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("two stores on one file", func(t *testing.T) {
		a := setup(t)
		b, err := Open(t.Context(), Config{Path: a.path})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for i, s := range []*Store{a, b} {
			wg.Go(func() {
				for j := range 100 {
					if _, err := s.Enqueue(t.Context(), testEvent(fmt.Sprintf("s%d-%d", i, j), "mail")); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for _, s := range []*Store{a, b} {
			st, err := s.Stats(t.Context(), time.Now())
			if err != nil || st.Events != 200 {
				t.Errorf("Stats = %+v, %v; want 200 events seen by both", st, err)
			}
		}
	})
	t.Run("garbage file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "q.db")
		if err := os.WriteFile(path, []byte(strings.Repeat("not a database ", 512)), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(t.Context(), Config{Path: path})
		if err == nil {
			s.Close()
			t.Fatal("Open of a garbage file succeeded")
		}
		if !strings.Contains(err.Error(), "not a database") {
			t.Errorf("Open = %v, want it to say the file is not a database", err)
		}
	})
	t.Run("newer schema", func(t *testing.T) {
		s := setup(t)
		if err := s.onWriter(t.Context(), func(w *writer) error {
			_, err := w.conn.ExecContext(t.Context(), fmt.Sprintf("PRAGMA user_version = %d", schemaVersion+1))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		s2, err := Open(t.Context(), Config{Path: s.path})
		if err == nil {
			s2.Close()
			t.Fatal("Open of a newer schema succeeded")
		}
		if !strings.Contains(err.Error(), "newer than this build") {
			t.Errorf("Open = %v", err)
		}
	})
}

// TestQueryPlans checks that the claim and purge statements read their
// partial indexes and never scan the jobs table.
func TestQueryPlans(t *testing.T) {
	s := setup(t)
	// Statistics as of a large table, so the planner is not tempted by
	// scans that are only cheap because the table is empty.
	if err := s.onWriterNow(t, `
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
INSERT INTO events (id, source, delivery_id, headers, payload, targets, created_at)
SELECT i, 's', i, x'', x'', 1, 0 FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
INSERT INTO jobs (event_id, source, target, status, run_at, created_at, finished_at)
SELECT i, 's', 't', CASE i % 4 WHEN 0 THEN 'pending' WHEN 1 THEN 'done' WHEN 2 THEN 'dead' ELSE 'running' END, 0, 0, 0 FROM n;
ANALYZE;`); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		query string
		args  []any
		uses  []string
	}{
		// The pending jobs of each route asked for are one range of
		// the index: jobs of other routes are never read.
		{"claim", sqlClaim, []any{"o", 1, 1, 10, `[["s","t"]]`, nil}, []string{"INDEX jobs_pending (source=? AND target=? AND run_at<?)", "INDEX jobs_leased"}},
		{"claim with routes", sqlClaim, []any{"o", 1, 1, 10, `[["s","t"],["s","u"]]`, `[["s","t"],["s","u"]]`}, []string{"INDEX jobs_pending (source=? AND target=? AND run_at<?)", "INDEX jobs_leased"}},
		{"replay dead chunk", sqlReplayDead, []any{1, "s", "", 10}, []string{"INDEX jobs_dead (source=? AND target=?)"}},
		{"discard dead chunk", sqlDiscardDead, []any{"s", "t", 10}, []string{"INDEX jobs_dead (source=? AND target=?)"}},
		{"discard pending chunk", sqlDiscardPending, []any{"", "t", 10, "[5]"}, []string{"INDEX jobs_pending (source=? AND target=?)"}},
		{"counts", sqlCounts, nil, []string{"job_counts"}},
		{"purge jobs", sqlPurgeJobs, []any{1, 10}, []string{"INDEX jobs_done"}},
		{"purge bare events", sqlPurgeBareEvents, []any{1, 10}, []string{"INDEX events_no_jobs"}},
		{"delete event if empty", sqlDeleteEventIfEmpty, []any{1}, []string{"INDEX jobs_event"}},
		{"oldest pending", sqlOldestPending, []any{1}, []string{"INDEX jobs_pending (source=? AND target=? AND run_at<?)"}},
		{"claim events", sqlClaimEvents, []any{"[1,2]"}, []string{"INTEGER PRIMARY KEY"}},
		{"history entry", sqlInsertAttempt, []any{1, 0, 0, 0, "done", "", 200}, []string{"INTEGER PRIMARY KEY"}},
		// An ordering key is handed on through one entry of the blocked
		// index, however many jobs wait behind it.
		{"promote next of a key", sqlPromote, []any{"s", "t", "k", 1, 1}, []string{"INDEX jobs_blocked (source=? AND target=? AND ordering_key=?)", "PRIMARY KEY (source=? AND target=? AND ordering_key=?)"}},
		{"key head", sqlKeyHead, []any{"s", "t", "k"}, []string{"PRIMARY KEY (source=? AND target=? AND ordering_key=?)"}},
		{"reblock", sqlReblock, []any{1}, []string{"INTEGER PRIMARY KEY", "PRIMARY KEY (source=? AND target=? AND ordering_key=?)"}},
		// A scan's page is a range of the primary key, whatever the
		// filters; where it ends, a walk of the key from the cursor.
		{"scan bounds", sqlScanBounds, []any{100, 256}, []string{"SEARCH events USING INTEGER PRIMARY KEY (rowid>?)"}},
		{"scan page", sqlScanEvents, []any{100, 356, 0, 1, "s", "t"}, []string{"SEARCH events USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)"}},
		{"scan start", sqlScanStart, []any{1}, []string{"INDEX events_created (created_at>?)"}},
		{"scan jobs", sqlScanJobs, []any{100, 356}, []string{"INTEGER PRIMARY KEY", "INDEX jobs_event (event_id>? AND event_id<?)"}},
		{"requeue", sqlRequeue, []any{1, 1}, []string{"INTEGER PRIMARY KEY"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := queryPlan(t, s, tt.query, tt.args...)
			text := strings.Join(plan, "\n")
			for _, line := range plan {
				if strings.HasPrefix(line, "SCAN jobs") || strings.HasPrefix(line, "SCAN events") || strings.HasPrefix(line, "SCAN attempts") {
					t.Errorf("full scan %q in plan:\n%s", line, text)
				}
			}
			for _, idx := range tt.uses {
				if !strings.Contains(text, idx) {
					t.Errorf("plan does not use %s:\n%s", idx, text)
				}
			}
		})
	}
}

func TestCancelled(t *testing.T) {
	s := setup(t)
	t.Run("while queued", func(t *testing.T) {
		// Hold the writer so the request cannot run before its caller
		// gives up; whether the cancel lands before or after the send,
		// the caller sees ctx.Err() and nothing is stored.
		hold, release := make(chan struct{}), make(chan struct{})
		go s.onWriter(context.Background(), func(*writer) error { close(hold); <-release; return nil })
		<-hold
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := s.Enqueue(ctx, testEvent("queued", "mail"))
			errc <- err
		}()
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("Enqueue = %v, want context.Canceled", err)
		}
		close(release)
	})
	t.Run("in a batch", func(t *testing.T) {
		// Build a batch by hand on the writer goroutine: a request whose
		// context ended before its turn is skipped with ctx.Err(); one
		// abandoned by its caller is dropped; the others commit.
		cancelled, cancel := context.WithCancel(t.Context())
		cancel()
		live := newRequest(t.Context(), kindEnqueue)
		live.ev = testEvent("live", "mail")
		dead := newRequest(cancelled, kindEnqueue)
		dead.ev = testEvent("cancelled", "mail")
		gone := newRequest(t.Context(), kindEnqueue)
		gone.ev = testEvent("abandoned", "mail")
		gone.state.Store(stateAbandoned)
		s.runBatchNow(t, dead, gone, live)
		if !errors.Is(dead.err, context.Canceled) || live.err != nil || live.res.Jobs != 1 {
			t.Errorf("cancelled: %v; live: %+v, %v", dead.err, live.res, live.err)
		}
		select {
		case <-gone.done:
			t.Error("the abandoned request was answered")
		default:
		}
	})
	page, err := s.ListJobs(t.Context(), queue.ListParams{})
	if err != nil || len(page.Jobs) != 1 || page.Jobs[0].DeliveryID != "live" {
		t.Errorf("stored %+v, %v; want only the live request", page.Jobs, err)
	}
	if _, err := s.Enqueue(t.Context(), testEvent("after", "mail")); err != nil {
		t.Errorf("Enqueue after skipped requests: %v", err)
	}
}

// TestBatchIsolation checks that a request failing in the middle of a
// batch is rolled back alone, event and all, and gets its own error, while
// its neighbours commit: the batch first runs without savepoints, and after
// a failure the others run again each in its own savepoint, where a second
// failure must not sink them either.
func TestBatchIsolation(t *testing.T) {
	tests := []struct {
		name  string
		batch []string // delivery ids; "bad…" ones fail after their event row
		want  string   // stored jobs, newest first
	}{
		{name: "one failure", batch: []string{"ok1", "bad", "ok2"}, want: "ok2,ok1"},
		{name: "failure first", batch: []string{"bad", "ok1", "ok2"}, want: "ok2,ok1"},
		{name: "two failures", batch: []string{"ok1", "bad1", "ok2", "bad2", "ok3"}, want: "ok3,ok2,ok1"},
		{name: "lone failure", batch: []string{"bad"}, want: ""},
		{name: "all fail", batch: []string{"bad1", "bad2"}, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := setup(t)
			// A job insert that fails after its event row was written.
			if err := s.onWriterNow(t, `CREATE TEMP TRIGGER refuse BEFORE INSERT ON jobs WHEN NEW.target = 'refused'
				BEGIN SELECT RAISE(ABORT, 'refused target'); END`); err != nil {
				t.Fatal(err)
			}
			var reqs []*request
			for _, id := range tt.batch {
				ev := testEvent(id, "mail")
				if strings.HasPrefix(id, "bad") {
					ev = testEvent(id, "mail", "refused")
				}
				r := newRequest(t.Context(), kindEnqueue)
				r.ev = ev
				reqs = append(reqs, r)
			}
			s.runBatchNow(t, reqs...)
			var events int64
			for _, r := range reqs {
				bad := strings.HasPrefix(r.ev.DeliveryID, "bad")
				switch {
				case bad && (r.err == nil || !strings.Contains(r.err.Error(), "refused target") || r.res != (queue.EnqueueResult{})):
					t.Errorf("%s: %+v, %v; want its own error and no result", r.ev.DeliveryID, r.res, r.err)
				case !bad && (r.err != nil || r.res.Jobs != 1 || r.res.EventID == 0):
					t.Errorf("%s: %+v, %v; want stored with one job", r.ev.DeliveryID, r.res, r.err)
				case !bad:
					events++
				}
			}
			page, err := s.ListJobs(t.Context(), queue.ListParams{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, j := range page.Jobs {
				got = append(got, j.DeliveryID)
			}
			if strings.Join(got, ",") != tt.want {
				t.Errorf("stored jobs of %v, want %s", got, tt.want)
			}
			if st, _ := s.Stats(t.Context(), time.Now()); st.Events != events {
				t.Errorf("events = %d, want %d: a bad event must roll back with its job", st.Events, events)
			}
			// The store goes on: the failures left no transaction open.
			if _, err := s.Enqueue(t.Context(), testEvent("after", "mail")); err != nil {
				t.Errorf("Enqueue after the batch: %v", err)
			}
		})
	}
}

// TestCommitFailure makes the COMMIT of a batch fail after every request in
// it ran (a deferred foreign key, checked only at commit, stands in for an
// fsync error) and checks that no request is answered with success, no
// result or Ready signal leaks out, nothing is stored, and the store goes on
// with a fresh connection: a nil error only ever follows a commit.
func TestCommitFailure(t *testing.T) {
	s := setup(t)
	if err := s.onWriterNow(t, `
CREATE TABLE IF NOT EXISTS commit_guard_parent (id INTEGER PRIMARY KEY);
CREATE TABLE IF NOT EXISTS commit_guard (parent INTEGER REFERENCES commit_guard_parent (id) DEFERRABLE INITIALLY DEFERRED);
CREATE TEMP TRIGGER fail_commit AFTER INSERT ON jobs WHEN NEW.target = 'unpaid'
	BEGIN INSERT INTO commit_guard (parent) VALUES (1); END`); err != nil {
		t.Fatal(err)
	}
	var reqs []*request
	for i, target := range []string{"mail", "unpaid", "mail"} {
		r := newRequest(t.Context(), kindEnqueue)
		r.ev = testEvent(fmt.Sprint("d", i), target)
		reqs = append(reqs, r)
	}
	s.runBatchNow(t, reqs...)
	for _, r := range reqs {
		if r.err == nil || !strings.Contains(r.err.Error(), "commit") || r.res != (queue.EnqueueResult{}) {
			t.Errorf("%s: %+v, %v; want a commit error and no result", r.ev.DeliveryID, r.res, r.err)
		}
	}
	select {
	case <-s.Ready():
		t.Error("Ready signalled for a batch that did not commit")
	default:
	}
	if st, err := s.Stats(t.Context(), time.Now()); err != nil || st.Events != 0 {
		t.Errorf("Stats = %+v, %v; want nothing stored", st, err)
	}
	// The failure discarded the connection, and its temp trigger with it.
	if _, err := s.Enqueue(t.Context(), testEvent("after", "unpaid")); err != nil {
		t.Errorf("Enqueue after the failed commit: %v", err)
	}
}

// runBatchNow runs reqs on the writer goroutine as one batch, as if they
// had arrived together.
func (s *Store) runBatchNow(t *testing.T, reqs ...*request) {
	t.Helper()
	if err := s.onWriter(t.Context(), func(w *writer) error {
		w.batch = append(w.batch[:0], reqs...)
		w.runBatch()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// onWriterNow runs sql on the write connection, between batches.
func (s *Store) onWriterNow(t *testing.T, query string) error {
	t.Helper()
	return s.onWriter(t.Context(), func(w *writer) error {
		_, err := w.conn.ExecContext(t.Context(), query)
		return err
	})
}

// TestDiskFull fills the database (SQLite's max_page_count gives the same
// SQLITE_FULL a full disk does), checks that enqueues fail rather than
// report success, and that the store recovers once there is room.
func TestDiskFull(t *testing.T) {
	s := setup(t)
	if _, err := s.Enqueue(t.Context(), testEvent("d0", "mail")); err != nil {
		t.Fatal(err)
	}
	if err := s.onWriter(t.Context(), func(w *writer) error {
		var pages int
		if err := w.conn.QueryRowContext(t.Context(), "PRAGMA page_count").Scan(&pages); err != nil {
			return err
		}
		return w.conn.QueryRowContext(t.Context(), fmt.Sprintf("PRAGMA max_page_count = %d", pages)).Scan(&pages)
	}); err != nil {
		t.Fatal(err)
	}
	big := testEvent("big", "mail")
	big.Payload = make([]byte, 1<<20)
	_, err := s.Enqueue(t.Context(), big)
	if err == nil || !strings.Contains(err.Error(), "full") {
		t.Fatalf("Enqueue into a full database = %v, want a full error", err)
	}
	// The failure discarded the write connection; a fresh one has no
	// page cap, as a disk with room again.
	if _, err := s.Enqueue(t.Context(), big); err != nil {
		t.Fatalf("Enqueue after room was made: %v", err)
	}
	st, err := s.Stats(t.Context(), time.Now())
	if err != nil || st.Events != 2 {
		t.Errorf("Stats = %+v, %v; want d0 and big", st, err)
	}
}

// TestReadOnlyFile opens a store on a file the process may not write.
func TestReadOnlyFile(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes read-only files; covered by TestDiskFull's failure path")
	}
	s := setup(t)
	if _, err := s.Enqueue(t.Context(), testEvent("d0", "mail")); err != nil {
		t.Fatal(err)
	}
	path := s.path
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o400); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(t.Context(), Config{Path: path})
	if err == nil {
		defer s2.Close()
		if _, err := s2.Enqueue(t.Context(), testEvent("d1", "mail")); err == nil {
			t.Fatal("Enqueue into a read-only file succeeded")
		}
	}
}

// TestWALBounded writes many small transactions while readers come and
// go, and checks that checkpoints keep the WAL file bounded, and that an
// idle checkpoint empties it.
func TestWALBounded(t *testing.T) {
	s := setup(t, func(c *Config) { c.Synchronous = "normal"; c.MaxBatch = 1 })
	ctx := t.Context()
	if _, err := s.Enqueue(ctx, testEvent("first", "mail")); err != nil {
		t.Fatal(err)
	}
	// One reader holds two read transactions in turn, opening the next
	// before it ends the last, so some snapshot is held at every moment:
	// the pattern that keeps a PASSIVE checkpoint from ever resetting the
	// WAL.
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		begin := func() *sql.Tx {
			tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
			if err != nil {
				t.Error(err)
				return nil
			}
			var n int
			if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM events").Scan(&n); err != nil {
				t.Error(err)
			}
			return tx
		}
		held := begin()
		for held != nil {
			select {
			case <-stop:
				held.Rollback()
				return
			default:
			}
			next := begin()
			held.Rollback()
			held = next
		}
	})
	const writes = 3000
	var maxWAL int64
	for i := range writes {
		ev := testEvent(fmt.Sprint("d", i), "mail", "chat")
		ev.Payload = make([]byte, 4096)
		if _, err := s.Enqueue(ctx, ev); err != nil {
			t.Fatal(err)
		}
		if i%500 == 0 {
			if fi, err := os.Stat(s.path + "-wal"); err == nil {
				maxWAL = max(maxWAL, fi.Size())
			}
		}
	}
	close(stop)
	readers.Wait()
	// Unchecked, this many commits leave about 60 MiB of WAL. The bound
	// allows walTruncateAt plus what is written while a TRUNCATE that the
	// reader held off waits for its retry.
	const bound = walTruncateAt + 16<<20
	if maxWAL > bound {
		t.Errorf("WAL grew to %d bytes, want at most %d", maxWAL, bound)
	}
	if err := s.onWriter(ctx, func(w *writer) error {
		w.truncateFailed = time.Time{} // no reader is left: try now
		return w.checkpoint("TRUNCATE")
	}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(s.path + "-wal"); err != nil || fi.Size() != 0 {
		t.Errorf("WAL after an idle TRUNCATE checkpoint: %v, %v; want empty", fi.Size(), err)
	}
}

// TestCloseDrains checks that writes queued before Close are run, not
// dropped, and that later calls fail with ErrClosed.
func TestCloseDrains(t *testing.T) {
	cfg := Config{Path: filepath.Join(t.TempDir(), "q.db"), Synchronous: "normal"}
	s, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := 0
	for i := range n {
		wg.Go(func() {
			_, err := s.Enqueue(context.Background(), testEvent(fmt.Sprint("d", i), "mail"))
			switch {
			case err == nil:
				mu.Lock()
				acked++
				mu.Unlock()
			case !errors.Is(err, queue.ErrClosed):
				t.Errorf("Enqueue: %v", err)
			}
		})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	s, err = Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Stats(t.Context(), time.Now())
	if err != nil || st.Events != int64(acked) {
		t.Errorf("stored %d events, acknowledged %d (%v)", st.Events, acked, err)
	}
}

// TestReadyOnlyForReadyWork checks that writes that make nothing ready
// leave Ready quiet, so an idle pool does not claim for nothing.
func TestReadyOnlyForReadyWork(t *testing.T) {
	s := setup(t)
	if _, err := s.Enqueue(t.Context(), testEvent("d1", "mail")); err != nil {
		t.Fatal(err)
	}
	<-s.Ready()
	jobs, err := s.Claim(t.Context(), queue.ClaimParams{Owner: "w", Limit: 1, Lease: time.Minute, Now: time.Now()})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Claim = %v, %v", jobs, err)
	}
	steps := []struct {
		name  string
		write func() error
	}{
		{"enqueue without a target", func() error { _, err := s.Enqueue(t.Context(), testEvent("d2")); return err }},
		{"duplicate", func() error { _, err := s.Enqueue(t.Context(), testEvent("d1", "mail")); return err }},
		{"claim", func() error {
			_, err := s.Claim(t.Context(), queue.ClaimParams{Owner: "w", Limit: 1, Lease: time.Minute, Now: time.Now()})
			return err
		}},
		{"retry not yet due", func() error {
			_, err := s.Finish(t.Context(), []queue.Completion{{JobID: jobs[0].ID, Owner: "w", Fence: jobs[0].Fence, Status: queue.StatusPending, RunAt: time.Now().Add(time.Hour)}})
			return err
		}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if err := st.write(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-s.Ready():
				t.Error("Ready signalled")
			default:
			}
		})
	}
}

// TestWriteConnectionDurability checks the pragmas of the write
// connection's DSN (invariant 2: a 202 means durable): WAL, and
// synchronous=FULL unless NORMAL is asked for. The writer holds the one
// write connection, so the test opens another with the same DSN.
func TestWriteConnectionDurability(t *testing.T) {
	tests := []struct {
		name        string
		synchronous string
		want        int // PRAGMA synchronous: 1 NORMAL, 2 FULL
	}{
		{"default is full", "", 2},
		{"full", "full", 2},
		{"normal on request", "normal", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := setup(t, func(c *Config) { c.Synchronous = tt.synchronous })
			db, err := sql.Open("sqlite", s.dsn(false))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var sync int
			var mode string
			if err := db.QueryRowContext(t.Context(), "PRAGMA synchronous").Scan(&sync); err != nil {
				t.Fatal(err)
			}
			if err := db.QueryRowContext(t.Context(), "PRAGMA journal_mode").Scan(&mode); err != nil {
				t.Fatal(err)
			}
			if sync != tt.want || mode != "wal" {
				t.Errorf("synchronous = %d, journal_mode = %q; want %d, wal", sync, mode, tt.want)
			}
		})
	}
}

// TestBulkInChunks checks that a bulk replay and a bulk discard reach the
// writer as many short requests, each its own commit, not as one
// transaction that holds the writer for all their rows.
func TestBulkInChunks(t *testing.T) {
	s := setup(t)
	if err := s.onWriterNow(t, `
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000)
INSERT INTO events (id, source, delivery_id, headers, payload, targets, created_at)
SELECT i, 's', i, x'', x'', 1, 0 FROM n;
INSERT INTO jobs (event_id, source, target, status, run_at, created_at, finished_at)
SELECT id, 's', 't', 'dead', 0, 0, 0 FROM events;
INSERT INTO job_counts VALUES ('s', 't', 'dead', 1000);
UPDATE event_count SET events = 1000;`); err != nil {
		t.Fatal(err)
	}
	commits := func() int64 {
		var n int64
		s.onWriter(t.Context(), func(w *writer) error { n = w.batches; return nil })
		return n
	}
	tests := []struct {
		name string
		op   func() (int, error)
	}{
		{"replay", func() (int, error) { return s.ReplayDead(t.Context(), queue.Filter{Source: "s"}) }},
		{"discard", func() (int, error) {
			return s.DiscardJobs(t.Context(), queue.Filter{Status: queue.StatusPending, Source: "s"})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := commits()
			n, err := tt.op()
			if err != nil || n != 1000 {
				t.Fatalf("= %d, %v; want 1000", n, err)
			}
			// 1000 rows in chunks of bulkChunk, and a last, short one.
			if got, want := commits()-before, int64(1000/bulkChunk+1); got != want {
				t.Errorf("%d commits, want %d", got, want)
			}
		})
	}
}

// TestMigrateOrderingKeys opens a database of schema version 4 holding a
// job: version 6 widens the status check in place (see migrations), so
// the old job is still claimed, a blocked job can be stored, a status
// outside the list is still refused, and the file passes integrity_check.
func TestMigrateOrderingKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "queue.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range append(migrations[:4:4],
		"PRAGMA user_version = 4",
		`INSERT INTO events (id, source, delivery_id, headers, payload, targets, created_at) VALUES (1, 'shop', 'old', x'', x'', 1, 0)`,
		`INSERT INTO jobs (event_id, source, target, run_at, created_at) VALUES (1, 'shop', 'mail', 0, 0)`,
		`INSERT INTO job_counts (source, target, status, jobs) VALUES ('shop', 'mail', 'pending', 1)`,
	) {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%.40s: %v", q, err)
		}
	}
	db.Close()

	s := setup(t, func(c *Config) { c.Path = path })
	jobs, err := s.Claim(t.Context(), queue.ClaimParams{Owner: "o", Limit: 10, Lease: time.Minute, Now: time.Now()})
	if err != nil || len(jobs) != 1 || jobs[0].DeliveryID != "old" {
		t.Fatalf("Claim after the migration = %v, %v; want the old job", jobs, err)
	}
	for _, id := range []string{"k1", "k2"} {
		ev := testEvent(id, "mail")
		ev.OrderingKey = "K"
		if _, err := s.Enqueue(t.Context(), ev); err != nil {
			t.Fatalf("Enqueue(%s): %v", id, err)
		}
	}
	st, err := s.Stats(t.Context(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var blocked int64
	for _, c := range st.Counts {
		if c.Status == queue.StatusBlocked {
			blocked += c.Jobs
		}
	}
	if blocked != 1 {
		t.Errorf("Stats = %+v, want one blocked job", st.Counts)
	}
	err = s.onWriter(t.Context(), func(w *writer) error {
		_, err := w.conn.ExecContext(t.Context(), `UPDATE jobs SET status = 'bogus' WHERE id = 1`)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "CHECK") {
		t.Errorf("a status outside the check = %v, want a CHECK failure", err)
	}
	var ok string
	if err := s.rdb.QueryRowContext(t.Context(), "PRAGMA integrity_check").Scan(&ok); err != nil || ok != "ok" {
		t.Errorf("integrity_check = %q, %v", ok, err)
	}
}

// queryPlan returns the detail lines of SQLite's EXPLAIN QUERY PLAN for
// query run on the read pool with args.
func queryPlan(t *testing.T, s *Store, query string, args ...any) []string {
	t.Helper()
	rows, err := s.rdb.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}

// TestStalledWriter: a write whose transaction the writer has begun but
// cannot commit (here another connection holds the file's write lock; in
// production a disk that stopped answering) fails at Config.Timeout, so a
// receiver answers 503 in time, rather than when the writer gets through.
// The write was begun and may still commit: once the lock is gone it does,
// and the sender's retry is a duplicate.
func TestStalledWriter(t *testing.T) {
	const timeout = 300 * time.Millisecond
	s := setup(t, func(c *Config) { c.Timeout = timeout; c.BusyTimeout = time.Minute })
	other, err := sql.Open("sqlite", s.path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatalf("take the write lock: %v", err)
	}
	started := time.Now()
	_, err = s.Enqueue(t.Context(), testEvent("stalled", "mail"))
	took := time.Since(started)
	t.Logf("enqueue with the writer stalled: %v after %s", err, took.Round(time.Millisecond))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Enqueue = %v, want a deadline exceeded", err)
	}
	if took > timeout+time.Second {
		t.Errorf("Enqueue returned after %s, want about %s", took, timeout)
	}
	if _, err := conn.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	res, err := s.Enqueue(t.Context(), testEvent("stalled", "mail"))
	if err != nil || !res.Duplicate {
		t.Errorf("the sender's retry: %+v, %v; want a duplicate of the write that committed late", res, err)
	}
	if res, err := s.Enqueue(t.Context(), testEvent("after", "mail")); err != nil || res.Jobs != 1 {
		t.Errorf("Enqueue after the stall: %+v, %v", res, err)
	}
}
