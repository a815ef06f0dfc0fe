package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/jackc/pgx/v5"
)

// TestOrderingTwoInstances: two stores on one schema, as two instances,
// enqueue events of the same keys and claim and finish them at once, with
// retries. The enqueues of one instance race the releases of the other
// (see ordering.go); each key's jobs must still run one at a time, done in
// arrival order, and none may be left blocked.
func TestOrderingTwoInstances(t *testing.T) {
	a, b := pair(t)
	stores := []*Store{a, b}
	const (
		keys    = 8
		perKey  = 25
		total   = keys * perKey
		workers = 6
	)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var (
		mu       sync.Mutex
		active   = map[string]int64{} // key -> job held
		lastDone = map[string]int{}   // key -> sequence last done
		finished atomic.Int64
		errs     = make(chan error, workers+keys)
		wg       sync.WaitGroup
	)
	// One producer per key, so a key's events arrive in sequence order,
	// each through either instance.
	for k := range keys {
		wg.Go(func() {
			for i := range perKey {
				e := ev(fmt.Sprintf("k%d-%03d", k, i), "mail")
				e.OrderingKey = fmt.Sprint("key", k)
				if _, err := stores[rand.IntN(2)].Enqueue(ctx, e); err != nil {
					errs <- fmt.Errorf("enqueue: %w", err)
					return
				}
			}
		})
	}
	for w := range workers {
		s := stores[w%2]
		owner := fmt.Sprint("worker-", w)
		wg.Go(func() {
			for finished.Load() < total {
				jobs, err := s.Claim(ctx, queue.ClaimParams{Owner: owner, Limit: 4, Lease: time.Hour})
				if err != nil {
					errs <- fmt.Errorf("%s: claim: %w", owner, err)
					return
				}
				if len(jobs) == 0 {
					select {
					case <-s.Ready():
					case <-time.After(10 * time.Millisecond): // the other instance's work
					case <-ctx.Done():
						errs <- fmt.Errorf("%s: %w with %d of %d done", owner, ctx.Err(), finished.Load(), total)
						return
					}
					continue
				}
				cs := make([]queue.Completion, len(jobs))
				mu.Lock()
				for i, j := range jobs {
					var k, seq int
					fmt.Sscanf(j.DeliveryID, "k%d-%d", &k, &seq)
					key := fmt.Sprint("key", k)
					if h, ok := active[key]; ok {
						mu.Unlock()
						errs <- fmt.Errorf("job %d (%s) claimed while job %d of its key is held", j.ID, j.DeliveryID, h)
						return
					}
					active[key] = j.ID
					status := queue.StatusDone
					if rand.IntN(5) == 0 {
						status = queue.StatusPending
					} else if last, ok := lastDone[key]; ok && seq != last+1 || !ok && seq != 0 {
						mu.Unlock()
						errs <- fmt.Errorf("%s done after sequence %d of its key (seen: %v)", j.DeliveryID, last, ok)
						return
					} else {
						lastDone[key] = seq
					}
					at := time.Now()
					cs[i] = queue.Completion{JobID: j.ID, Owner: owner, Fence: j.Fence, Status: status, RunAt: at, Error: "retry", Started: at, Now: at}
				}
				// Forgotten as held before Finish lets the next job go.
				for _, c := range cs {
					for key, id := range active {
						if id == c.JobID {
							delete(active, key)
						}
					}
				}
				mu.Unlock()
				rec, err := s.Finish(ctx, cs)
				if err != nil {
					errs <- fmt.Errorf("%s: finish: %w", owner, err)
					return
				}
				for i, c := range cs {
					if !rec[i] {
						errs <- fmt.Errorf("job %d: finish not recorded", c.JobID)
						return
					}
					if c.Status == queue.StatusDone {
						finished.Add(1)
					}
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case err := <-errs:
		cancel()
		<-done
		t.Fatal(err)
	case <-done:
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	st, err := a.Stats(t.Context(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range st.Counts {
		if c.Status != queue.StatusDone && c.Jobs != 0 {
			t.Errorf("%d jobs left %s", c.Jobs, c.Status)
		}
	}
}

// TestReleaseHeadsScansJobsOnlyToRelease: the release that follows every
// finish reads the jobs table only when a finished job held a key with
// another job blocked behind it. The scans are forced to be sequential,
// the plan a cached statement kept from when the table was small (the
// load test saw it: 1 ms a finish at 11,000 jobs); with nothing to
// release, no scan of jobs may run, and with a key to hand on, the
// blocked job must still be promoted.
func TestReleaseHeadsScansJobsOnlyToRelease(t *testing.T) {
	admin, schema := planSchema(t)
	_, err := admin.Exec(t.Context(), `
INSERT INTO `+schema+`.jobs (event_id, source, target, status, run_at, created_at, finished_at, ordering_key)
SELECT id, 'shop', 'mail', CASE WHEN id = 20000 THEN 'blocked' ELSE 'done' END, now(), now(),
	CASE WHEN id = 20000 THEN NULL ELSE now() END, CASE WHEN id >= 19999 THEN 'k' END
FROM `+schema+`.events;
INSERT INTO `+schema+`.ordering_heads (source, target, ordering_key, job_id)
SELECT source, target, ordering_key, id FROM `+schema+`.jobs WHERE id = 19999;
ANALYZE `+schema+`.jobs; ANALYZE `+schema+`.ordering_heads;`)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		ids          []int64 // the finished jobs
		wantScan     bool
		wantPromoted []int64
	}{
		{"no key held", []int64{10, 20, 30}, false, []int64{}},
		{"a key handed on", []int64{10, 19999}, true, []int64{20000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Now()
			// EXPLAIN ANALYZE runs the statement: its transaction is rolled
			// back before the second one runs it for its result.
			tx := seqScanTx(t, admin, schema)
			rows, err := tx.Query(t.Context(), "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) "+sqlReleaseHeads, tt.ids, now)
			if err != nil {
				t.Fatal(err)
			}
			lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			if err := tx.Rollback(t.Context()); err != nil {
				t.Fatal(err)
			}
			scanned := slices.ContainsFunc(lines, func(l string) bool {
				return jobsScan.MatchString(l) && !strings.Contains(l, "never executed")
			})
			if scanned != tt.wantScan {
				t.Errorf("a scan of jobs ran: %v, want %v; the plan:\n%s", scanned, tt.wantScan, strings.Join(lines, "\n"))
			}
			var promoted []int64
			if err := seqScanTx(t, admin, schema).QueryRow(t.Context(), sqlReleaseHeads, tt.ids, now).Scan(&promoted); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(promoted, tt.wantPromoted) {
				t.Errorf("promoted %v, want %v", promoted, tt.wantPromoted)
			}
		})
	}
}

// jobsScan matches a plan line that reads the jobs table, by any kind of
// scan.
var jobsScan = regexp.MustCompile(`\bScan\b.* on jobs\b`)

// seqScanTx begins a transaction on admin in schema, rolled back when the
// test ends if not before, in which the planner may use no index: what a
// plan cached on a small table does.
func seqScanTx(t *testing.T, admin *pgx.Conn, schema string) pgx.Tx {
	t.Helper()
	tx, err := admin.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	for _, set := range []string{"search_path TO " + schema, "enable_indexscan = off", "enable_bitmapscan = off", "enable_indexonlyscan = off"} {
		if _, err := tx.Exec(t.Context(), "SET LOCAL "+set); err != nil {
			t.Fatal(err)
		}
	}
	return tx
}

// TestSweepStrandedHeads: a Finish hands its jobs' ordering keys on in a
// second transaction; when that one never runs (a crash between the two
// commits), the key's next job stays blocked behind a done head until the
// sweep, every few seconds, hands it on.
func TestSweepStrandedHeads(t *testing.T) {
	s := setup(t)
	ctx := t.Context()
	for _, id := range []string{"first", "second"} {
		e := ev(id, "mail")
		e.OrderingKey = "k"
		if _, err := s.Enqueue(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	jobs, err := s.Claim(ctx, queue.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %d jobs, %v; want the key's head alone", len(jobs), err)
	}
	// The Finish's first transaction alone: the job done, its key held.
	a := finishArgs{sealer: s.sealer.Load()}
	a.add(&queue.Completion{JobID: jobs[0].ID, Owner: "w", Fence: jobs[0].Fence, Status: queue.StatusDone, Started: time.Now()}, time.Now())
	if done, err := s.finishRound(ctx, &a); err != nil || !done[jobs[0].ID] {
		t.Fatalf("finish round: %v, %v; want the job recorded, with its key", done, err)
	}
	if got, _ := s.Claim(ctx, queue.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute}); len(got) != 0 {
		t.Fatalf("claimed %d jobs behind a stranded head, want none", len(got))
	}
	promoted, err := s.sweepHeads(ctx)
	if err != nil || !promoted {
		t.Fatalf("sweep: %v, %v; want the next job made pending", promoted, err)
	}
	got, err := s.Claim(ctx, queue.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute})
	if err != nil || len(got) != 1 || got[0].DeliveryID != "second" {
		t.Fatalf("claim after the sweep: %v, %v; want the second job", got, err)
	}
	if promoted, err := s.sweepHeads(ctx); err != nil || promoted {
		t.Errorf("a second sweep: %v, %v; want nothing to do", promoted, err)
	}
}
