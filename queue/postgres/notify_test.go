package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// waitReady fails the test unless s signals Ready within d.
func waitReady(t *testing.T, s *Store, d time.Duration, what string) {
	t.Helper()
	select {
	case <-s.Ready():
	case <-time.After(d):
		t.Fatalf("%s: Ready did not fire within %s", what, d)
	}
}

// drainReady empties s's Ready buffer.
func drainReady(s *Store) {
	select {
	case <-s.Ready():
	default:
	}
}

// pair opens two stores on one schema: two instances sharing a queue.
func pair(t *testing.T) (a, b *Store) {
	t.Helper()
	dsn := testutil.PostgresDSN(t)
	schema := testSchema(t, dsn)
	a = openStore(t, Config{DSN: dsn, Schema: schema})
	b = openStore(t, Config{DSN: dsn, Schema: schema})
	return a, b
}

func ev(id string, targets ...string) queue.Event {
	return queue.Event{Source: "shop", DeliveryID: id, Payload: []byte(`{}`), Targets: targets}
}

// TestNotifyWakesOtherInstance: work committed through one store wakes the
// other's Ready, which nothing else signals. Each case first consumes the
// wake of the enqueue that set it up, so the wake it waits for comes from
// its last step.
func TestNotifyWakesOtherInstance(t *testing.T) {
	tests := []struct {
		name string
		do   func(t *testing.T, a *Store, jobID int64)
	}{
		{"enqueue", func(t *testing.T, a *Store, _ int64) {
			if _, err := a.Enqueue(t.Context(), ev("e2", "mail")); err != nil {
				t.Fatal(err)
			}
		}},
		{"replay", func(t *testing.T, a *Store, id int64) {
			if _, err := a.Finish(t.Context(), []queue.Completion{{JobID: id, Owner: "o", Fence: 1, Status: queue.StatusDead}}); err != nil {
				t.Fatal(err)
			}
			if err := a.Replay(t.Context(), id); err != nil {
				t.Fatal(err)
			}
		}},
		{"hand back", func(t *testing.T, a *Store, id int64) {
			if err := a.HandBack(t.Context(), "o", []queue.Claimed{{ID: id, Fence: 1}}); err != nil {
				t.Fatal(err)
			}
		}},
		{"retry due now", func(t *testing.T, a *Store, id int64) {
			rec, err := a.Finish(t.Context(), []queue.Completion{{JobID: id, Owner: "o", Fence: 1, Status: queue.StatusPending}})
			if err != nil || !rec[0] {
				t.Fatalf("Finish = %v, %v", rec, err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := pair(t)
			if _, err := a.Enqueue(t.Context(), ev("e1", "mail")); err != nil {
				t.Fatal(err)
			}
			waitReady(t, b, 5*time.Second, "second instance, after the first enqueue")
			jobs, err := a.Claim(t.Context(), queue.ClaimParams{Owner: "o", Limit: 1, Lease: time.Minute})
			if err != nil || len(jobs) != 1 {
				t.Fatalf("Claim = %d jobs, %v", len(jobs), err)
			}
			tt.do(t, a, jobs[0].ID)
			waitReady(t, b, 5*time.Second, "second instance")
		})
	}
}

// TestNoNotifyWithoutWork: an enqueue that makes nothing ready (an event
// with no target) sends no NOTIFY: a marker sent afterwards is the first
// thing a listener on the channel hears.
func TestNoNotifyWithoutWork(t *testing.T) {
	a := setup(t)
	count := countNotifies(t, a.channel)
	if _, err := a.Enqueue(t.Context(), ev("bare")); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Errorf("enqueue without targets sent %d NOTIFYs", n)
	}
}

// countNotifies listens on channel and returns a function that stops
// listening and returns the number of notifications received before a
// marker it sends itself, so it counts exactly what was committed before.
func countNotifies(t *testing.T, channel string) func() int {
	t.Helper()
	conn := adminConn(t)
	if _, err := conn.Exec(t.Context(), "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return func() int {
		t.Helper()
		marker := adminConn(t)
		if _, err := marker.Exec(t.Context(), "SELECT pg_notify($1, 'marker')", channel); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		n := 0
		for {
			note, err := conn.WaitForNotification(ctx)
			if err != nil {
				t.Fatalf("wait for the marker after %d notifications: %v", n, err)
			}
			if note.Payload == "marker" {
				return n
			}
			n++
		}
	}
}

// TestNotifyDebounced: a burst of enqueues sends far fewer NOTIFYs than
// enqueues, at most one per NotifyInterval plus the first.
func TestNotifyDebounced(t *testing.T) {
	dsn := testutil.PostgresDSN(t)
	schema := testSchema(t, dsn)
	const interval = 50 * time.Millisecond
	s := openStore(t, Config{DSN: dsn, Schema: schema, NotifyInterval: interval})
	count := countNotifies(t, s.channel)

	const producers, each = 8, 25
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := range producers {
		wg.Go(func() {
			for i := range each {
				if _, err := s.Enqueue(t.Context(), ev(fmt.Sprintf("p%d-%d", p, i), "mail")); err != nil {
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
	// Close sends the NOTIFY still owed, so every one of them is counted.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	n := count()
	// The first at once, one per interval after it, and the one Close
	// flushes without waiting for the interval to end.
	bound := int(elapsed/interval) + 2
	t.Logf("%d enqueues in %s sent %d NOTIFYs (bound %d)", producers*each, elapsed.Round(time.Millisecond), n, bound)
	if n < 1 {
		t.Errorf("no NOTIFY for %d enqueues", producers*each)
	}
	if n > bound {
		t.Errorf("%d NOTIFYs in %s, more than one per %s", n, elapsed, interval)
	}
	if n > producers*each/10 {
		t.Errorf("%d NOTIFYs for %d enqueues: not debounced", n, producers*each)
	}
}

// TestListenerReconnects: when the listener's connection is killed, the
// store connects again, signals Ready once (it may have missed work), and
// is woken by the other instance's NOTIFYs again.
func TestListenerReconnects(t *testing.T) {
	a, b := pair(t)
	admin := adminConn(t)
	for round := range 2 {
		pid := b.listen.pid.Load()
		drainReady(b)
		var ok bool
		if err := admin.QueryRow(t.Context(), "SELECT pg_terminate_backend($1)", int32(pid)).Scan(&ok); err != nil || !ok {
			t.Fatalf("terminate listener backend %d: %v, %v", pid, ok, err)
		}
		waitReady(t, b, 10*time.Second, "after reconnecting")
		if got := b.listen.reconnects.Load(); got != int64(round+1) {
			t.Errorf("reconnects = %d, want %d", got, round+1)
		}
		if b.listen.pid.Load() == pid {
			t.Errorf("listener still on backend %d", pid)
		}
		drainReady(b)
		if _, err := a.Enqueue(t.Context(), ev(fmt.Sprint("after-", round), "mail")); err != nil {
			t.Fatal(err)
		}
		waitReady(t, b, 5*time.Second, "NOTIFY after reconnecting")
	}
}

// TestClaimSkipLocked: claimers in two stores and several goroutines each
// take jobs concurrently; no job is handed out twice, and all are handed
// out.
func TestClaimSkipLocked(t *testing.T) {
	a, b := pair(t)
	const jobs = 600
	for i := range jobs / 3 {
		if _, err := a.Enqueue(t.Context(), ev(fmt.Sprint("e", i), "mail", "chat", "log")); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu    sync.Mutex
		owner = map[int64]string{}
		dups  []string
		wg    sync.WaitGroup
	)
	now := time.Now()
	for i, s := range []*Store{a, b, a, b, a, b} {
		name := fmt.Sprintf("claimer-%d", i)
		wg.Go(func() {
			for {
				got, err := s.Claim(t.Context(), queue.ClaimParams{Owner: name, Limit: 7, Lease: time.Hour, Now: now})
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, j := range got {
					if prev, ok := owner[j.ID]; ok {
						dups = append(dups, fmt.Sprintf("job %d to %s and %s", j.ID, prev, name))
					}
					owner[j.ID] = name
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(dups) > 0 {
		t.Fatalf("jobs claimed twice: %v", dups)
	}
	if len(owner) != jobs {
		t.Errorf("claimed %d distinct jobs, want %d", len(owner), jobs)
	}
	per := map[string]int{}
	for _, o := range owner {
		per[o]++
	}
	t.Logf("jobs per claimer: %v", per)
}

// planSchema returns an admin connection and a store's schema holding
// 20,000 events of source shop (ids 1 to 20,000), for a test that adds
// their jobs and reads the plans a table of that size gets.
func planSchema(t *testing.T) (*pgx.Conn, string) {
	t.Helper()
	s := setup(t)
	admin := adminConn(t)
	_, err := admin.Exec(t.Context(), `
INSERT INTO `+s.cfg.Schema+`.events (source, delivery_id, headers, payload, targets, created_at)
SELECT 'shop', 'd' || g, '', '', 1, now() FROM generate_series(1, 20000) AS g`)
	if err != nil {
		t.Fatal(err)
	}
	return admin, s.cfg.Schema
}

// TestPlans checks, with a backlog of done and future jobs around a few
// ready ones, that claim walks the ready-job index in order (no sort of
// every due job), that every write reaches jobs by an index, never by
// scanning a table: the running jobs (few) through jobs_leased, done ones
// through jobs_done.
func TestPlans(t *testing.T) {
	admin, schema := planSchema(t)
	_, err := admin.Exec(t.Context(), `
INSERT INTO `+schema+`.jobs (event_id, source, target, status, run_at, created_at, finished_at)
SELECT id, 'shop', 'mail',
	CASE WHEN id % 10 = 0 THEN 'pending' ELSE 'done' END,
	CASE WHEN id % 20 = 0 THEN now() + interval '1 hour' ELSE now() - interval '1 hour' END,
	now(), CASE WHEN id % 10 = 0 THEN NULL ELSE now() END
FROM `+schema+`.events;
ANALYZE `+schema+`.jobs; ANALYZE `+schema+`.events;`)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ids := []int64{10, 20, 30}
	tests := []struct {
		name   string
		sql    string
		args   []any
		want   []string
		forbid []string
	}{
		{"claim", sqlClaim, []any{"o", int64(60000), now, 16, false, []string{}, []string{}, nil, []*int32{}},
			[]string{"Index Scan using jobs_pending", "jobs_leased", "jobs_pkey"}, []string{"Seq Scan on jobs", "Sort Key: jobs.run_at"}},
		// Each route asked for is one range of the pending index: jobs of
		// other routes are never read.
		{"claim with routes", sqlClaim, []any{"o", int64(60000), now, 16, true, []string{"shop", "shop"}, []string{"mail", "gone"}, now, []*int32{nil, nil}},
			[]string{"Index Scan using jobs_pending", "Index Cond: ((source = asked.source) AND (target = asked.target) AND (run_at <= "},
			[]string{"Seq Scan on jobs", "Sort Key: jobs.run_at"}},
		// Quotas stop each route's walk early; the plan is the same.
		{"claim with quotas", sqlClaim, []any{"o", int64(60000), now, 16, true, []string{"shop", "shop"}, []string{"mail", "gone"}, now, []int32{2, 3}},
			[]string{"Index Scan using jobs_pending", "Index Cond: ((source = asked.source) AND (target = asked.target) AND (run_at <= "},
			[]string{"Seq Scan on jobs", "Sort Key: jobs.run_at"}},
		{"replay dead chunk", sqlReplayDead, []any{"shop", "", 256, 0, now},
			[]string{"jobs_dead", "Index Cond: ((source = job_counts.source) AND (target = job_counts.target) AND (id > "}, []string{"Seq Scan on jobs"}},
		{"discard chunk", sqlDiscardPending, []any{"", "mail", 256, time.Time{}, 0, []int64{5, 6}},
			[]string{"jobs_pending", "Index Cond: ((source = job_counts.source) AND (target = job_counts.target) AND (ROW(run_at, id) > ROW(", "jobs_event"},
			[]string{"Seq Scan on jobs", "Seq Scan on events"}},
		{"discard dead chunk", sqlDiscardDead, []any{"shop", "mail", 256, 0},
			[]string{"jobs_dead", "Index Cond: ((source = job_counts.source) AND (target = job_counts.target) AND (id > "}, []string{"Seq Scan on jobs"}},
		{"oldest pending", sqlOldestPending, []any{now}, []string{"jobs_pending"}, []string{"Seq Scan on jobs"}},
		{"counts", sqlCounts, nil, []string{"job_counts"}, []string{"on jobs"}},
		{"finish", sqlFinish, []any{ids, []string{"o", "o", "o"}, []string{"done", "done", "done"},
			[]time.Time{now, now, now}, []string{"", "", ""}, []time.Time{now, now, now}, []time.Time{now, now, now}, []int64{0, 0, 0}, []int64{1, 1, 1},
			[]pgtype.Int4{{Int32: 200, Valid: true}, {}, {Int32: 1, Valid: true}}, []string{"", "", ""}, []bool{false, false, true}},
			nil, []string{"Seq Scan on jobs", "Seq Scan on attempts"}},
		{"extend", sqlExtend, []any{ids, []int64{1, 1, 1}, "o", nil, int64(60000)}, nil, []string{"Seq Scan on jobs"}},
		{"hand back", sqlHandBack, []any{ids, "o", now, []int64{1, 1, 1}}, nil, []string{"Seq Scan on jobs", "Seq Scan on attempts"}},
		{"enqueue batch", sqlEnqueueBatch, []any{[]string{"shop", "shop"}, []string{"d10", "new"}, []string{"", ""},
			[][]byte{{}, {}}, [][]byte{{}, {}}, []int32{1, 2}, []time.Time{now, now}, []int32{1, 2, 2}, []string{"a", "a", "b"}, []string{"", ""}, [][]byte{nil, nil}},
			[]string{"Conflict Arbiter Indexes: events_source_delivery_id_key"}, []string{"Seq Scan on events", "Seq Scan on jobs"}},
		{"find duplicates", sqlEventIDs, []any{[]string{"shop", "shop"}, []string{"d10", "d20"}},
			[]string{"events_source_delivery_id_key"}, []string{"Seq Scan on events"}},
		{"purge", sqlPurgeJobs, []any{now, 256}, []string{"jobs_done", "jobs_event"}, []string{"Seq Scan on jobs", "Seq Scan on events"}},
		// A scan's page is a range of the primary key, whatever the
		// filters; where it ends, a walk of the key from the cursor; where
		// a scan since a time starts, a walk of events_created from it.
		{"scan bounds", sqlScanBounds, []any{100, 256}, []string{"events_pkey", "Index Cond: (id > "}, []string{"Seq Scan on events"}},
		{"scan page", sqlScanEvents, []any{100, 356, now.Add(-time.Hour), now, "shop", ""},
			[]string{"events_pkey", "Index Cond: ((id > "}, []string{"Seq Scan on events", "Sort"}},
		{"scan start", sqlScanStart, []any{now.Add(time.Minute)}, []string{"events_created"}, []string{"Seq Scan on events", "events_pkey"}},
		{"scan jobs", sqlScanJobs, []any{100, 356}, []string{"jobs_event", "events_pkey"}, []string{"Seq Scan on jobs", "Seq Scan on events"}},
		{"requeue jobs", sqlRequeueJobs, []any{ids, []time.Time{now, now, now}}, []string{"jobs_pkey"}, []string{"Seq Scan on jobs"}},
		{"requeue adds", sqlRequeueAdds, []any{ids, []string{"a", "b", "c"}, []time.Time{now, now, now}, now, []int32{0, 1, 2}},
			[]string{"events_pkey"}, []string{"Seq Scan on events"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tx, err := admin.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(context.Background())
			if _, err := tx.Exec(t.Context(), "SET LOCAL search_path TO "+schema); err != nil {
				t.Fatal(err)
			}
			rows, err := tx.Query(t.Context(), "EXPLAIN "+tt.sql, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			plan := strings.Join(lines, "\n")
			for _, w := range tt.want {
				if !strings.Contains(plan, w) {
					t.Errorf("plan lacks %q:\n%s", w, plan)
				}
			}
			for _, f := range tt.forbid {
				if strings.Contains(plan, f) {
					t.Errorf("plan has %q:\n%s", f, plan)
				}
			}
		})
	}
}

// TestListenerHealthCheck: after silences long enough to ping, the
// listener is still on its first connection and still hears NOTIFYs: the
// interrupted wait does not break the connection.
func TestListenerHealthCheck(t *testing.T) {
	saved := healthEvery
	healthEvery = 20 * time.Millisecond
	a, b := pair(t)
	healthEvery = saved
	// The pings run against the server: wait for them with a deadline.
	testutil.Eventually(t, func() bool { return b.listen.pings.Load() >= 3 }, func() string {
		return fmt.Sprintf("%d health checks, want 3", b.listen.pings.Load())
	})
	if n := b.listen.reconnects.Load(); n != 0 {
		t.Errorf("listener reconnected %d times while only pinging", n)
	}
	drainReady(b)
	if _, err := a.Enqueue(t.Context(), ev("after-pings", "mail")); err != nil {
		t.Fatal(err)
	}
	waitReady(t, b, 5*time.Second, "NOTIFY after health checks")
}

// TestFinishGenericPlan: the plan a connection caches for Finish after five
// runs (a generic plan) is made from the statistics of when it was made.
// Made while no job ran (a backlog just enqueued, analyzed all pending) and
// used once 20,000 jobs run, it must still reach each job by its primary
// key, not walk the running jobs' index for each row of the batch (one
// Finish took 38 s that way during a drain), and must not read the
// attempt history of jobs claimed only once.
func TestFinishGenericPlan(t *testing.T) {
	admin, schema := planSchema(t)
	_, err := admin.Exec(t.Context(), `
INSERT INTO `+schema+`.jobs (event_id, source, target, status, run_at, created_at)
SELECT id, 'shop', 'mail', 'pending', now(), now() FROM `+schema+`.events;
ANALYZE `+schema+`.jobs; ANALYZE `+schema+`.attempts;
UPDATE `+schema+`.jobs SET status = 'running', lease_owner = 'o', fence = 1, attempts = 1,
	lease_until = now() + interval '1 minute';`)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := admin.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	for _, set := range []string{"SET LOCAL search_path TO " + schema, "SET LOCAL plan_cache_mode = force_generic_plan", "PREPARE finish AS " + sqlFinish} {
		if _, err := tx.Exec(t.Context(), set); err != nil {
			t.Fatal(err)
		}
	}
	// EXECUTE takes no parameters of the protocol's: the arguments are
	// written out.
	rows, err := tx.Query(t.Context(), `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) EXECUTE finish(
	'{10,20,30}', '{o,o,o}', '{done,done,done}', ARRAY[now(), now(), now()], '{"","",""}',
	ARRAY[now(), now(), now()], ARRAY[now(), now(), now()], '{0,0,0}', '{1,1,1}', '{NULL,NULL,NULL}', '{"","",""}', '{false,false,true}')`)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	for _, f := range []string{"jobs_leased", "Seq Scan on jobs"} {
		if strings.Contains(plan, f) {
			t.Errorf("the generic plan has %q:\n%s", f, plan)
		}
	}
	for _, l := range lines {
		if strings.Contains(l, "on attempts") && strings.Contains(l, "Scan") && !strings.Contains(l, "never executed") {
			t.Errorf("the history of once-claimed jobs was read: %q in\n%s", l, plan)
		}
	}
	if !strings.Contains(plan, "jobs_pkey") {
		t.Errorf("the generic plan does not reach jobs by the primary key:\n%s", plan)
	}
}
