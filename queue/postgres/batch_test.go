package postgres

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// gatedStore opens a batching store whose sessions carry an application
// name of their own, so a test can see them wait on a lock.
func gatedStore(t *testing.T) (*Store, string) {
	t.Helper()
	dsn := testutil.PostgresDSN(t)
	app := testutil.SchemaName()
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	s := openStore(t, Config{DSN: dsn + sep + "application_name=" + app, Schema: testSchema(t, dsn)})
	if s.batcher == nil {
		t.Fatal("the default store does not batch")
	}
	return s, app
}

// hold inserts the event (shop, key) in a transaction of its own and
// leaves it open: any statement that inserts the same key waits on it.
// release rolls it back, and the waiting insert goes on.
func hold(t *testing.T, s *Store, key string) (release func()) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), testutil.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(t.Context(), "INSERT INTO "+s.cfg.Schema+`.events (source, delivery_id, headers, payload, targets, created_at)
VALUES ('shop', $1, '', '', 0, now())`, key)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			tx.Rollback(context.Background())
			conn.Close(context.Background())
		})
	}
	t.Cleanup(release)
	return release
}

// blockWrites makes an Enqueue of key the write in flight and keeps it
// waiting on a lock held by hold, so the calls made meanwhile queue for
// the next batch. release lets it go on; its outcome arrives on gate.
func blockWrites(t *testing.T, s *Store, admin *pgx.Conn, app, key string, targets ...string) (release func(), gate <-chan outcome) {
	t.Helper()
	release = hold(t, s, key)
	done := make(chan outcome, 1)
	go func() {
		res, err := s.Enqueue(t.Context(), ev(key, targets...))
		done <- outcome{res, err}
	}()
	waitLocked(t, admin, app, 1)
	return release, done
}

// waitLocked waits until n sessions named app wait on a lock. The server
// is another process: poll it, with a deadline.
func waitLocked(t *testing.T, admin *pgx.Conn, app string, n int) {
	t.Helper()
	var got int
	testutil.Eventually(t, func() bool {
		err := admin.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&got)
		if err != nil {
			t.Fatal(err)
		}
		return got >= n
	}, func() string { return fmt.Sprintf("%d sessions wait on a lock, want %d", got, n) })
}

// waitQueued waits until n requests have been handed to the batcher and
// wait to be gathered into a batch.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.batcher.queued.Load() != int64(n) {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests wait for a batch, want %d", s.batcher.queued.Load(), n)
		}
		runtime.Gosched()
	}
}

type outcome struct {
	res queue.EnqueueResult
	err error
}

// eventIDs maps the stored events' delivery ids to their ids.
func eventIDs(t *testing.T, admin *pgx.Conn, schema string) map[string]int64 {
	t.Helper()
	rows, err := admin.Query(t.Context(), "SELECT delivery_id, id FROM "+schema+".events")
	if err != nil {
		t.Fatal(err)
	}
	ids := make(map[string]int64)
	var d string
	var id int64
	if _, err := pgx.ForEachRow(rows, []any{&d, &id}, func() error { ids[d] = id; return nil }); err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestEnqueueBatch holds the batcher on one event that a second session
// keeps locked, queues the case's calls behind it in order, then lets go:
// the calls form one batch, and each must get what a lone Enqueue would
// have returned.
func TestEnqueueBatch(t *testing.T) {
	type call struct {
		ev     queue.Event
		cancel bool // its context ends while it waits for its batch
	}
	type want struct {
		err  string // the error must contain this; "" for success
		dup  bool
		jobs int
		id   string // the delivery id whose stored event id it returns
	}
	good := func(n int) ([]call, []want) {
		var cs []call
		var ws []want
		for i := range n {
			id := fmt.Sprint("good-", i)
			cs = append(cs, call{ev: ev(id, "a", "b")})
			ws = append(ws, want{jobs: 2, id: id})
		}
		return cs, ws
	}
	twenty, twentyWant := good(20)
	// PostgreSQL's text holds no NUL: the batch statement fails, and each
	// event is written alone.
	nul, nulWant := good(20)
	nul = slices.Insert(nul, 10, call{ev: ev("bad\x00id", "a")},
		call{ev: queue.Event{Source: "shop", DeliveryID: "bad-type", EventType: "t\x00", Targets: []string{"a"}}})
	nulWant = slices.Insert(nulWant, 10, want{err: "enqueue"}, want{err: "enqueue"})
	tests := []struct {
		name        string
		stored      []queue.Event // enqueued alone beforehand
		calls       []call
		want        []want
		wantBatches int64 // batch statements committed for the calls
	}{
		{name: "twenty in one batch", calls: twenty, want: twentyWant, wantBatches: 1},
		{name: "a NUL byte fails alone among twenty", calls: nul, want: nulWant, wantBatches: 0},
		{
			name:   "duplicates inside the batch and of a stored event",
			stored: []queue.Event{ev("old", "a")},
			calls: []call{
				{ev: ev("x", "a", "b", "c")},
				{ev: ev("old", "a")},
				{ev: ev("x", "a")},
				{ev: ev("y")},
				{ev: ev("x", "a", "b", "c")},
			},
			want: []want{
				{jobs: 3, id: "x"},
				{dup: true, id: "old"},
				{dup: true, id: "x"},
				{id: "y"},
				{dup: true, id: "x"},
			},
			wantBatches: 1,
		},
		{
			name:        "copies of one delivery id only",
			calls:       []call{{ev: ev("z", "a")}, {ev: ev("z", "a")}, {ev: ev("z", "a", "b")}},
			want:        []want{{jobs: 1, id: "z"}, {dup: true, id: "z"}, {dup: true, id: "z"}},
			wantBatches: 1,
		},
		{
			name: "a context cancelled before sending",
			calls: []call{
				{ev: ev("kept-1", "a")},
				{ev: ev("gone", "a"), cancel: true},
				{ev: ev("kept-2", "a")},
			},
			want: []want{
				{jobs: 1, id: "kept-1"},
				{err: context.Canceled.Error()},
				{jobs: 1, id: "kept-2"},
			},
			wantBatches: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, app := gatedStore(t)
			admin := adminConn(t)
			for _, e := range tt.stored {
				if _, err := s.Enqueue(t.Context(), e); err != nil {
					t.Fatal(err)
				}
			}
			release, gate := blockWrites(t, s, admin, app, "gate", "a")
			batches := s.batcher.batches.Load()

			outs := make([]chan outcome, len(tt.calls))
			waiting := 0
			for i, c := range tt.calls {
				outs[i] = make(chan outcome, 1)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				go func() {
					res, err := s.Enqueue(ctx, c.ev)
					outs[i] <- outcome{res, err}
				}()
				waiting++
				waitQueued(t, s, waiting) // in order: the batch keeps it
				if c.cancel {
					// Handed over, waiting for its batch: it returns at
					// once, and the batch drops it.
					cancel()
					if o := <-outs[i]; !errors.Is(o.err, context.Canceled) {
						t.Fatalf("call %d cancelled while waiting: %+v, %v; want context.Canceled", i, o.res, o.err)
					}
					outs[i] <- outcome{err: context.Canceled}
				}
			}
			release()
			if o := <-gate; o.err != nil || o.res.Jobs != 1 {
				t.Fatalf("gate enqueue = %+v, %v", o.res, o.err)
			}
			got := make([]outcome, len(outs))
			for i, ch := range outs {
				got[i] = <-ch
			}
			ids := eventIDs(t, admin, s.cfg.Schema)
			for i, w := range tt.want {
				o := got[i]
				if w.err != "" {
					if o.err == nil || !strings.Contains(o.err.Error(), w.err) {
						t.Errorf("call %d (%q) = %+v, %v; want an error with %q", i, tt.calls[i].ev.DeliveryID, o.res, o.err, w.err)
					}
					if _, ok := ids[tt.calls[i].ev.DeliveryID]; ok && !tt.calls[i].cancel {
						t.Errorf("call %d failed but its event is stored", i)
					}
					if tt.calls[i].cancel {
						if _, ok := ids[tt.calls[i].ev.DeliveryID]; ok {
							t.Errorf("call %d was cancelled before sending but its event is stored", i)
						}
					}
					continue
				}
				wantRes := queue.EnqueueResult{EventID: ids[w.id], Duplicate: w.dup, Jobs: w.jobs}
				if o.err != nil || o.res != wantRes || wantRes.EventID == 0 {
					t.Errorf("call %d (%q) = %+v, %v; want %+v", i, tt.calls[i].ev.DeliveryID, o.res, o.err, wantRes)
				}
			}
			if n := s.batcher.batches.Load() - batches; n != tt.wantBatches+1 { // +1: the gate's
				t.Errorf("%d batch statements committed after the gate's, want %d", n-1, tt.wantBatches)
			}
			// Every event stored has exactly its jobs, in target order.
			rows, err := admin.Query(t.Context(), `SELECT e.delivery_id, e.targets, count(j.id),
	coalesce(string_agg(j.target, ',' ORDER BY j.id), '')
FROM `+s.cfg.Schema+`.events AS e LEFT JOIN `+s.cfg.Schema+`.jobs AS j ON j.event_id = e.id
GROUP BY e.id`)
			if err != nil {
				t.Fatal(err)
			}
			var d, order string
			var targets, jobs int
			_, err = pgx.ForEachRow(rows, []any{&d, &targets, &jobs, &order}, func() error {
				if targets != jobs {
					t.Errorf("event %q has %d jobs, want %d", d, jobs, targets)
				}
				if want := strings.Join([]string{"a", "b", "c"}[:min(jobs, 3)], ","); order != want {
					t.Errorf("event %q has jobs %q, want %q", d, order, want)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestEnqueueCancelAfterSend: a caller whose context ends once its batch
// is sent gets the batch's outcome, here a commit, not its context's
// error: the event is stored, so reporting a failure would be a lie.
func TestEnqueueCancelAfterSend(t *testing.T) {
	s, app := gatedStore(t)
	admin := adminConn(t)
	release1 := hold(t, s, "gate-1")
	release0, first := blockWrites(t, s, admin, app, "gate-0")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	outs := []chan outcome{make(chan outcome, 1), make(chan outcome, 1)}
	for i, e := range []queue.Event{ev("gate-1", "a"), ev("neighbour", "a")} {
		c := t.Context()
		if i == 0 {
			c = ctx
		}
		go func() {
			res, err := s.Enqueue(c, e)
			outs[i] <- outcome{res, err}
		}()
		waitQueued(t, s, i+1)
	}
	release0()
	if o := <-first; o.err != nil {
		t.Fatal(o.err)
	}
	waitLocked(t, admin, app, 1) // the second batch is sent, waiting on gate-1
	cancel()
	select {
	case o := <-outs[0]:
		t.Fatalf("the cancelled caller returned %+v, %v while its batch was in flight", o.res, o.err)
	default:
	}
	release1()
	ids := make([]outcome, 2)
	for i := range outs {
		ids[i] = <-outs[i]
	}
	stored := eventIDs(t, admin, s.cfg.Schema)
	for i, d := range []string{"gate-1", "neighbour"} {
		want := queue.EnqueueResult{EventID: stored[d], Jobs: 1}
		if ids[i].err != nil || ids[i].res != want || want.EventID == 0 {
			t.Errorf("%s = %+v, %v; want %+v", d, ids[i].res, ids[i].err, want)
		}
	}
}

// TestEnqueueConcurrent: many producers, each event acknowledged once and
// stored once under the id it was acknowledged with, in both modes; one
// delivery id sent by every producer is stored once and the others are
// told it is a duplicate of it.
func TestEnqueueConcurrent(t *testing.T) {
	tests := []struct {
		name       string
		maxBatch   int
		producers  int
		each       int
		wantShared bool // fewer batch statements than events
	}{
		{"batched", 0, 32, 20, true},
		{"one per statement", 1, 8, 10, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dsn := testutil.PostgresDSN(t)
			s := openStore(t, Config{DSN: dsn, Schema: testSchema(t, dsn), MaxBatch: tt.maxBatch, MaxConns: 4})
			admin := adminConn(t)
			results := make([][]outcome, tt.producers)
			shared := make([]outcome, tt.producers)
			var wg sync.WaitGroup
			for p := range tt.producers {
				wg.Go(func() {
					results[p] = make([]outcome, tt.each)
					for i := range tt.each {
						res, err := s.Enqueue(t.Context(), ev(fmt.Sprintf("p%d-%d", p, i), "a", "b"))
						results[p][i] = outcome{res, err}
						if i == tt.each/2 {
							res, err := s.Enqueue(t.Context(), ev("shared", "a"))
							shared[p] = outcome{res, err}
						}
					}
				})
			}
			wg.Wait()
			ids := eventIDs(t, admin, s.cfg.Schema)
			if want := tt.producers*tt.each + 1; len(ids) != want {
				t.Errorf("%d events stored, want %d", len(ids), want)
			}
			seen := make(map[int64]bool)
			for p := range results {
				for i, o := range results[p] {
					d := fmt.Sprintf("p%d-%d", p, i)
					want := queue.EnqueueResult{EventID: ids[d], Jobs: 2}
					if o.err != nil || o.res != want || want.EventID == 0 {
						t.Errorf("%s = %+v, %v; want %+v", d, o.res, o.err, want)
					}
					if seen[o.res.EventID] {
						t.Errorf("%s: event id %d acknowledged twice", d, o.res.EventID)
					}
					seen[o.res.EventID] = true
				}
			}
			news := 0
			for p, o := range shared {
				if o.err != nil || o.res.EventID != ids["shared"] {
					t.Errorf("producer %d: shared = %+v, %v; want event %d", p, o.res, o.err, ids["shared"])
				}
				if !o.res.Duplicate {
					news++
				}
			}
			if news != 1 {
				t.Errorf("the shared delivery id was new %d times, want once", news)
			}
			var jobs int
			if err := admin.QueryRow(t.Context(), "SELECT count(*) FROM "+s.cfg.Schema+".jobs").Scan(&jobs); err != nil {
				t.Fatal(err)
			}
			if want := 2*tt.producers*tt.each + 1; jobs != want {
				t.Errorf("%d jobs stored, want %d", jobs, want)
			}
			if s.batcher == nil {
				if tt.wantShared {
					t.Fatal("the store does not batch")
				}
				return
			}
			if batches, events := s.batcher.batches.Load(), s.batcher.events.Load(); tt.wantShared && batches >= events {
				t.Errorf("%d batch statements for %d events: no statement was shared", batches, events)
			}
		})
	}
}

// TestEnqueueDeadlines: producers whose deadlines end at every stage of
// a batch (before handing over, while gathered, while the statement runs)
// never see a success for an event that is not stored, and a caller
// answered with an error saw its context end or the store fail.
func TestEnqueueDeadlines(t *testing.T) {
	dsn := testutil.PostgresDSN(t)
	s := openStore(t, Config{DSN: dsn, Schema: testSchema(t, dsn), MaxConns: 4})
	admin := adminConn(t)
	const producers, each = 16, 30
	type acked struct {
		id  string
		res queue.EnqueueResult
	}
	var mu sync.Mutex
	var ok []acked
	failed := 0
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range each {
				// Deadlines from 0 to 18ms, spread over the producers.
				ctx, cancel := context.WithTimeout(t.Context(), time.Duration((p*each+i)%7)*3*time.Millisecond)
				id := fmt.Sprintf("p%d-%d", p, i)
				res, err := s.Enqueue(ctx, ev(id, "a"))
				cancel()
				mu.Lock()
				if err == nil {
					ok = append(ok, acked{id, res})
				} else {
					failed++
					if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
						// pgx reports a cancelled statement as the
						// server's cancel error; nothing else may fail.
						if !strings.Contains(err.Error(), "canceling statement") && !pgconn.Timeout(err) {
							t.Errorf("%s: %v", id, err)
						}
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	ids := eventIDs(t, admin, s.cfg.Schema)
	for _, a := range ok {
		if want := (queue.EnqueueResult{EventID: ids[a.id], Jobs: 1}); a.res != want || want.EventID == 0 {
			t.Errorf("%s acknowledged as %+v; stored: %+v", a.id, a.res, want)
		}
	}
	t.Logf("%d acknowledged, %d failed, %d stored", len(ok), failed, len(ids))
	if len(ids) < len(ok) {
		t.Errorf("%d stored, fewer than the %d acknowledged", len(ids), len(ok))
	}
	// The store still works.
	if res, err := s.Enqueue(t.Context(), ev("after", "a")); err != nil || res.Jobs != 1 {
		t.Fatalf("Enqueue after the deadlines = %+v, %v", res, err)
	}
}

// TestCloseAnswersQueued: Close waits for the requests already handed to
// the batcher and writes them; none is left waiting, and calls after it
// fail with queue.ErrClosed.
func TestCloseAnswersQueued(t *testing.T) {
	s, app := gatedStore(t)
	admin := adminConn(t)
	release, gate := blockWrites(t, s, admin, app, "gate", "a")
	const n = 5
	outs := make(chan outcome, n)
	for i := range n {
		go func() {
			res, err := s.Enqueue(t.Context(), ev(fmt.Sprint("queued-", i), "a"))
			outs <- outcome{res, err}
		}()
		waitQueued(t, s, i+1)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	// Close cannot finish while the gate holds the write in flight.
	select {
	case err := <-closed:
		t.Fatalf("Close returned %v with a write in flight", err)
	default:
	}
	release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if o := <-gate; o.err != nil {
		t.Fatalf("gate: %v", o.err)
	}
	// Read before the callers' answers are: what Close waited for is in
	// the database now.
	if got := len(eventIDs(t, admin, s.cfg.Schema)); got != n+1 {
		t.Errorf("%d events stored when Close returned, want %d", got, n+1)
	}
	for range n {
		if o := <-outs; o.err != nil || o.res.Jobs != 1 {
			t.Errorf("queued enqueue = %+v, %v; want it written before Close returned", o.res, o.err)
		}
	}
	if _, err := s.Enqueue(t.Context(), ev("late", "a")); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Enqueue after Close = %v, want queue.ErrClosed", err)
	}
}
