package queue_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
)

// TestPoolLeaseExtension drives the clock by hand: a job whose lease was
// extended is not taken over after its first lease would have ended; once the
// extension stops, a second pool takes it over, and the first pool's late
// handler is cancelled and recorded nowhere.
func TestPoolLeaseExtension(t *testing.T) {
	tests := []struct {
		name string
		// extend: the first pool learns of the loss from ExtendLeases and
		// cancels its handler; otherwise its finish hits the fence.
		extend bool
	}{
		{"loss found by extension", true},
		{"loss found by the finish fence", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			s := setup(t, clk.Now)
			releaseA, releaseB := make(chan struct{}), make(chan struct{})
			ctxErrA := make(chan error, 1)
			recA, recB := newRecorder(t, 10), newRecorder(t, 10)
			a := newPool(t, queue.PoolConfig{
				Store: s, Lease: time.Minute, Now: clk.Now, Observer: recA,
				Handler: queue.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
					select {
					case <-releaseA:
					case <-ctx.Done():
					}
					ctxErrA <- ctx.Err()
					return nil // claims success either way: must not count after a loss
				}),
			})
			b := newPool(t, queue.PoolConfig{
				Store: s, Lease: time.Minute, Now: clk.Now, Observer: recB,
				Handler: queue.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
					<-releaseB
					return nil
				}),
			})
			id := enqueue(t, s, "evt", "t")
			claimedAt := clk.Now()
			runOnce(t, a, 1)
			testutil.Receive(t, recA.started)

			// Extended 50s in, the lease now runs to 1m50s.
			clk.Advance(50 * time.Second)
			a.ExtendOnce(t.Context())
			clk.Advance(30 * time.Second)
			runOnce(t, b, 0) // 1m20s: past the first lease, not taken over
			j := getJob(t, s, id)
			if j.LeaseOwner != a.Owner() || !j.LeaseUntil.Equal(claimedAt.Add(50*time.Second+time.Minute)) {
				t.Fatalf("after extension: owner %q until %s, want %q until %s", j.LeaseOwner, j.LeaseUntil, a.Owner(), claimedAt.Add(110*time.Second))
			}

			// No extension for over a minute: the lease ends and b takes over.
			clk.Advance(31 * time.Second)
			runOnce(t, b, 1)
			testutil.Receive(t, recB.started)
			if tt.extend {
				a.ExtendOnce(t.Context())
				if lost := testutil.Receive(t, recA.lost); lost.ID != id {
					t.Fatalf("lease lost for job %d, want %d", lost.ID, id)
				}
				if err := testutil.Receive(t, ctxErrA); !errors.Is(err, context.Canceled) {
					t.Fatalf("a's handler ctx error = %v, want canceled", err)
				}
			} else {
				close(releaseA)
				if err := testutil.Receive(t, ctxErrA); err != nil {
					t.Fatalf("a's handler ctx error = %v, want nil", err)
				}
			}
			if f := recA.nextFinished(t); f.recorded {
				t.Fatalf("a's completion after losing the lease was recorded: %+v", f.c)
			}
			j = getJob(t, s, id)
			if j.Status != queue.StatusRunning || j.LeaseOwner != b.Owner() || j.Attempts != 2 {
				t.Fatalf("after a's late result: %s under %q with %d attempts, want running under b with 2", j.Status, j.LeaseOwner, j.Attempts)
			}

			close(releaseB)
			if f := recB.nextFinished(t); !f.recorded || f.c.Status != queue.StatusDone {
				t.Fatalf("b's completion: recorded %v status %s, want recorded done", f.recorded, f.c.Status)
			}
			if j := getJob(t, s, id); j.Status != queue.StatusDone {
				t.Fatalf("status %s, want done", j.Status)
			}
		})
	}
}

// TestPoolExtendsWhileRunning uses the real clock and the pool's own
// extension timer: a handler that works for four lease lengths keeps its job,
// while a second pool polls every 10ms for jobs whose lease ran out.
func TestPoolExtendsWhileRunning(t *testing.T) {
	const lease = 150 * time.Millisecond
	s := setup(t, nil)
	recA := newRecorder(t, 10)
	a := newPool(t, queue.PoolConfig{
		Store: s, Lease: lease, Observer: recA,
		Handler: queue.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
			// The work itself: four leases long.
			select {
			case <-time.After(4 * lease):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}),
	})
	b := newPool(t, queue.PoolConfig{
		Store: s, Lease: lease, PollInterval: 10 * time.Millisecond,
		Handler: queue.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
			t.Errorf("second pool took over job %d", job.ID)
			return nil
		}),
	})
	id := enqueue(t, s, "evt", "t")
	start(t, a)
	testutil.Receive(t, recA.started)
	start(t, b)
	f := recA.nextFinished(t)
	if !f.recorded || f.c.Status != queue.StatusDone || f.err != nil {
		t.Fatalf("completion: recorded %v, %s, err %v; want recorded done", f.recorded, f.c.Status, f.err)
	}
	if j := getJob(t, s, id); j.Status != queue.StatusDone || j.Attempts != 1 {
		t.Fatalf("job: %s with %d attempts, want done with 1", j.Status, j.Attempts)
	}
}

// TestPoolExtendsBufferedLeases drives the clock by hand: the lease of a job
// claimed ahead is extended with the running ones, so a second pool cannot
// take it after its first lease would have ended; once the extension stops
// and the second pool takes it, the first pool drops it from its buffer,
// reports the loss and never starts it.
func TestPoolExtendsBufferedLeases(t *testing.T) {
	clk := newClock()
	s := setup(t, clk.Now)
	releaseA := make(chan struct{})
	var handledA sync.Map // job id -> struct{}
	recA, recB := newRecorder(t, 10), newRecorder(t, 10)
	a := newPool(t, queue.PoolConfig{
		Store: s, Workers: 1, ClaimAhead: 1, Lease: time.Minute, Now: clk.Now, Observer: recA,
		Handler: queue.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
			handledA.Store(job.ID, struct{}{})
			<-releaseA
			return nil
		}),
	})
	// b may only claim the second job, so that the first stays a's.
	b := newPool(t, queue.PoolConfig{
		Store: s, Workers: 1, Lease: time.Minute, Now: clk.Now, Observer: recB,
		Routes:  []queue.Route{{Source: "src", Target: "second"}},
		Handler: queue.HandlerFunc(func(context.Context, *queue.Job) error { return nil }),
	})
	first := enqueue(t, s, "first", "first")
	second := enqueue(t, s, "second", "second")
	claimedAt := clk.Now()
	runOnce(t, a, 2) // one running, one buffered
	if job := testutil.Receive(t, recA.started); job.ID != first {
		t.Fatalf("a started job %d, want %d", job.ID, first)
	}

	clk.Advance(50 * time.Second)
	a.ExtendOnce(t.Context())
	clk.Advance(30 * time.Second)
	runOnce(t, b, 0) // 1m20s: past the first lease, not taken over
	j := getJob(t, s, second)
	if j.Status != queue.StatusRunning || j.LeaseOwner != a.Owner() || !j.LeaseUntil.Equal(claimedAt.Add(110*time.Second)) {
		t.Fatalf("buffered job after extension: %s under %q until %s, want running under %q until %s", j.Status, j.LeaseOwner, j.LeaseUntil, a.Owner(), claimedAt.Add(110*time.Second))
	}

	clk.Advance(31 * time.Second)
	runOnce(t, b, 1)
	if f := recB.nextFinished(t); !f.recorded || f.c.Status != queue.StatusDone || f.job.ID != second {
		t.Fatalf("b: job %d recorded %v %s, want job %d recorded done", f.job.ID, f.recorded, f.c.Status, second)
	}
	a.ExtendOnce(t.Context()) // finds the buffered job lost, the running one kept
	if job := testutil.Receive(t, recA.lost); job.ID != second {
		t.Fatalf("a lost job %d, want %d", job.ID, second)
	}
	close(releaseA)
	if f := recA.nextFinished(t); !f.recorded || f.c.Status != queue.StatusDone || f.job.ID != first {
		t.Fatalf("a: job %d recorded %v %s, want job %d recorded done", f.job.ID, f.recorded, f.c.Status, first)
	}
	// a's worker would have started the buffered job before recording the
	// first one's completion.
	if _, ok := handledA.Load(second); ok || len(recA.started) > 0 || len(recA.finished) > 0 {
		t.Fatalf("a started the job it had lost (handled %v, %d started, %d finished)", ok, len(recA.started), len(recA.finished))
	}
	if j := getJob(t, s, second); j.Status != queue.StatusDone || j.Attempts != 2 {
		t.Fatalf("job %d: %s with %d attempts, want done with 2 (a's claim, b's)", second, j.Status, j.Attempts)
	}
}
