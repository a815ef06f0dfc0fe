package queue_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
)

// TestPoolReclaimOwnJobNeverOverlaps: a pool whose lease on a running job
// ran out (its process was paused, here: its clock jumps past the lease)
// claims the job again under the same owner. The older run is cancelled
// and reported lost before the new one starts, the two never run at once,
// and the older run's result is not recorded as the new attempt's
// (the fence is per claim, not per pool).
func TestPoolReclaimOwnJobNeverOverlaps(t *testing.T) {
	clk := newClock()
	s := setup(t, clk.Now)
	rec := newRecorder(t, 10)
	var active, most atomic.Int32
	secondStarted := make(chan struct{})
	cancelled := make(chan bool, 1)
	p := newPool(t, queue.PoolConfig{
		Store: s, Workers: 2, Observer: rec, Now: clk.Now, PollInterval: 5 * time.Millisecond,
		Handler: queue.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
			n := active.Add(1)
			defer active.Add(-1)
			for {
				if m := most.Load(); n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			if job.Attempt >= 2 {
				close(secondStarted)
				return nil
			}
			// The first run holds on until it is cancelled, or until a
			// second run of its job starts beside it.
			select {
			case <-ctx.Done():
				cancelled <- true
			case <-secondStarted:
				cancelled <- false
			}
			return errors.New("the first attempt's result")
		}),
	})
	id := enqueue(t, s, "paused", "t")
	start(t, p)
	if j := testutil.Receive(t, rec.started); j.Attempt != 1 {
		t.Fatalf("first run is attempt %d, want 1", j.Attempt)
	}
	clk.Advance(2 * queue.DefaultLease) // the pause: the lease has run out

	if !testutil.Receive(t, cancelled) {
		t.Fatal("a second run of the job started while the first still ran")
	}
	if j := testutil.Receive(t, rec.lost); j.Attempt != 1 {
		t.Errorf("lease lost reported for attempt %d, want 1", j.Attempt)
	}
	first, second := rec.nextFinished(t), rec.nextFinished(t)
	if first.job.Attempt > second.job.Attempt {
		first, second = second, first // the two report in either order
	}
	if first.job.Attempt != 1 || first.recorded {
		t.Errorf("first run: attempt %d recorded %v, want attempt 1 not recorded", first.job.Attempt, first.recorded)
	}
	if second.job.Attempt != 2 || !second.recorded || second.c.Status != queue.StatusDone {
		t.Errorf("second run: attempt %d recorded %v %s, want attempt 2 recorded done", second.job.Attempt, second.recorded, second.c.Status)
	}
	if m := most.Load(); m != 1 {
		t.Errorf("%d runs of one job at once, want 1", m)
	}
	j := getJob(t, s, id)
	// The history explains both runs: the first, whose lease ran out, as
	// lease_lost (the claim that took the job recorded it), then attempt 2.
	if j.Status != queue.StatusDone || j.Attempts != 2 || len(j.History) != 2 || j.LastError != "" ||
		j.History[0].Attempt != 1 || j.History[0].Outcome != queue.OutcomeLeaseLost ||
		j.History[1].Attempt != 2 || j.History[1].Outcome != queue.StatusDone {
		t.Errorf("job %s, %d attempts, history %+v, last error %q; want done by attempt 2, attempt 1 recorded as lease_lost",
			j.Status, j.Attempts, j.History, j.LastError)
	}
}

// TestPoolSelfFences: when the pool cannot extend a lease, it cancels the
// run a margin before the lease can end, not after, so that another
// instance that takes the job once the lease ends never overlaps it.
func TestPoolSelfFences(t *testing.T) {
	const lease = 1200 * time.Millisecond
	s := &hookedStore{Store: setup(t, nil), extendError: func() error { return errors.New("database unreachable") }}
	rec := newRecorder(t, 10)
	type run struct {
		started, cancelled time.Time
	}
	runs := make(chan run, 1)
	p := newPool(t, queue.PoolConfig{
		Store: s, Workers: 1, Lease: lease, Observer: &storeErrorsIgnored{rec},
		Handler: queue.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
			r := run{started: time.Now()}
			<-ctx.Done()
			r.cancelled = time.Now()
			runs <- r
			return ctx.Err()
		}),
	})
	enqueue(t, s, "unreachable", "t")
	start(t, p)
	r := testutil.Receive(t, runs)
	if took := r.cancelled.Sub(r.started); took >= lease {
		t.Errorf("run cancelled %s after it started, want before its %s lease could end", took, lease)
	}
	if j := testutil.Receive(t, rec.lost); j.Attempt != 1 {
		t.Errorf("lease lost for attempt %d, want 1", j.Attempt)
	}
}

// storeErrorsIgnored is a recorder that expects store errors.
type storeErrorsIgnored struct{ *recorder }

func (storeErrorsIgnored) StoreError(string, error) {}

// TestPoolDrain: a drain (a reload) stops claiming at once, hands back the
// jobs claimed ahead, and lets the running handler finish past the
// shutdown grace with its lease extended, so no other pool starts it
// again; Done closes once its result is recorded. A Stop during a drain
// applies the grace to what is left and hands it back.
func TestPoolDrain(t *testing.T) {
	const lease = 300 * time.Millisecond
	tests := []struct {
		name string
		stop bool // Stop during the drain, as when Caddy exits
	}{
		{"finishes in the background", false},
		{"stop during the drain hands back", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := setup(t, nil)
			rec := newRecorder(t, 10)
			release := make(chan struct{})
			a := newPool(t, queue.PoolConfig{
				Store: s, Workers: 1, ClaimAhead: 1, Lease: lease, ShutdownGrace: 10 * time.Millisecond,
				Observer: rec, PollInterval: time.Hour,
				Handler: queue.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
					select {
					case <-release:
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				}),
			})
			slow := enqueue(t, s, "slow", "t")
			ahead := enqueue(t, s, "ahead", "t")
			start(t, a)
			if j := testutil.Receive(t, rec.started); j.ID != slow {
				t.Fatalf("started job %d, want %d", j.ID, slow)
			}
			testutil.Eventually(t, func() bool { return getJob(t, s, ahead).Status == queue.StatusRunning },
				func() string { return "the second job was not claimed ahead" })

			a.Drain()
			testutil.Eventually(t, func() bool { return getJob(t, s, ahead).Status == queue.StatusPending },
				func() string { return "the job claimed ahead was not handed back" })
			// Several leases later the slow job is still a's: its lease
			// is extended, so another pool cannot claim it.
			until := getJob(t, s, slow).LeaseUntil
			testutil.Eventually(t, func() bool { return getJob(t, s, slow).LeaseUntil.After(until.Add(2 * lease)) },
				func() string { return "the draining pool does not extend its lease" })
			jobs, err := s.Claim(t.Context(), queue.ClaimParams{Owner: "b", Limit: 10, Lease: lease})
			if err != nil {
				t.Fatal(err)
			}
			if len(jobs) != 1 || jobs[0].ID != ahead {
				t.Fatalf("another pool claimed %d jobs, want only the handed-back one", len(jobs))
			}
			select {
			case <-a.Done():
				t.Fatal("Done before the running handler returned")
			default:
			}

			if tt.stop {
				ctx, cancel := context.WithTimeout(t.Context(), waitFor)
				defer cancel()
				if err := a.Stop(ctx); err != nil {
					t.Fatal(err)
				}
				if j := testutil.Receive(t, rec.handedBack); j.ID != slow {
					t.Errorf("handed back job %d, want %d", j.ID, slow)
				}
				if j := getJob(t, s, slow); j.Status != queue.StatusPending || j.Attempts != 0 {
					t.Errorf("slow job %s with %d attempts, want pending, uncharged", j.Status, j.Attempts)
				}
				return
			}
			close(release)
			testutil.Receive(t, a.Done())
			if f := rec.nextFinished(t); f.job.ID != slow || !f.recorded || f.c.Status != queue.StatusDone {
				t.Errorf("finished job %d recorded %v %s, want %d recorded done", f.job.ID, f.recorded, f.c.Status, slow)
			}
			if j := getJob(t, s, slow); j.Status != queue.StatusDone || j.Attempts != 1 {
				t.Errorf("slow job %s with %d attempts, want done after 1", j.Status, j.Attempts)
			}
		})
	}
}
