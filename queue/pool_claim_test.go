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

// TestPoolStaleClaimNeverStarts: a claim whose answer reaches the pool
// after the lease it grants has run out (a stalled network or database,
// a pause) is never started, though another pool has meanwhile taken the
// job and runs it: the job runs once, in that pool. The late claim is
// handed back (a no-op under the fence: the job is the other pool's now)
// and reported lost. A claim answered in time starts as always.
func TestPoolStaleClaimNeverStarts(t *testing.T) {
	const lease = 300 * time.Millisecond
	tests := []struct {
		name  string
		delay bool // hold A's claim's answer until B runs the job
	}{
		{name: "answered in time", delay: false},
		{name: "answered after the lease", delay: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inner := setup(t, nil)
			var runsA, runsB atomic.Int32
			bStarted := make(chan struct{})
			release := make(chan struct{})
			b := newPool(t, queue.PoolConfig{
				Store: inner, Lease: lease,
				Handler: queue.HandlerFunc(func(context.Context, *queue.Job) error {
					runsB.Add(1)
					close(bStarted)
					<-release
					return nil
				}),
			})
			s := &hookedStore{Store: inner}
			if tt.delay {
				s.afterClaim = func() {
					// A's claim committed; its answer is held past the
					// lease, until B has claimed the job and runs it.
					<-time.After(lease)
					runOnce(t, b, 1)
					testutil.Receive(t, bStarted)
				}
			}
			recA := newRecorder(t, 10)
			a := newPool(t, queue.PoolConfig{
				Store: s, Lease: lease, Observer: recA,
				Handler: queue.HandlerFunc(func(context.Context, *queue.Job) error {
					runsA.Add(1)
					return nil
				}),
			})
			id := enqueue(t, s, "evt", "t")
			n, err := a.RunOnce(t.Context())
			if !tt.delay {
				if err != nil || n != 1 {
					t.Fatalf("RunOnce = %d, %v; want 1 job started", n, err)
				}
				if f := recA.nextFinished(t); !f.recorded || runsA.Load() != 1 {
					t.Fatalf("in-time claim: recorded %v after %d runs, want recorded after 1", f.recorded, runsA.Load())
				}
				return
			}
			if err == nil || n != 0 {
				t.Fatalf("RunOnce = %d, %v; want 0 jobs started and the late answer reported", n, err)
			}
			t.Logf("RunOnce: %v", err)
			if lost := testutil.Receive(t, recA.lost); lost.ID != id {
				t.Errorf("lease lost reported for job %d, want %d", lost.ID, id)
			}
			close(release)
			testutil.Eventually(t, func() bool { return getJob(t, inner, id).Status == queue.StatusDone },
				func() string { return "the job done by B" })
			if a, b := runsA.Load(), runsB.Load(); a != 0 || b != 1 {
				t.Errorf("runs: A %d, B %d; want the job run by B alone, once", a, b)
			}
			if j := getJob(t, inner, id); j.Attempts != 2 {
				t.Errorf("job: %d attempts, want 2 (A's claim, charged, and B's)", j.Attempts)
			}
		})
	}
}

// TestPoolWakesOnEnqueue: with an hour's poll interval, only the store's
// ready signal can get an enqueued job handled promptly.
func TestPoolWakesOnEnqueue(t *testing.T) {
	s := setup(t, nil)
	handled := make(chan int64, 2)
	p := newPool(t, queue.PoolConfig{
		Store:        s,
		PollInterval: time.Hour,
		Handler: queue.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
			handled <- job.ID
			return nil
		}),
	})
	start(t, p)
	// The first job may be found by the pool's first claim; the second
	// arrives while the pool idles.
	for _, name := range []string{"first", "second"} {
		id := enqueue(t, s, name, "t")
		if got := testutil.Receive(t, handled); got != id {
			t.Fatalf("handled job %d, want %d", got, id)
		}
	}
}

// TestPoolPicksUpReplay: a replayed dead job is handled promptly by a
// running pool that would otherwise not poll for an hour.
func TestPoolPicksUpReplay(t *testing.T) {
	s := setup(t, nil)
	rec := newRecorder(t, 10)
	var calls atomic.Int32
	p := newPool(t, queue.PoolConfig{
		Store: s, PollInterval: time.Hour, Observer: rec,
		Handler: queue.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
			if calls.Add(1) == 1 {
				return queue.Permanent(errors.New("410 gone"))
			}
			return nil
		}),
	})
	id := enqueue(t, s, "evt", "t")
	start(t, p)
	if f := rec.nextFinished(t); f.c.Status != queue.StatusDead {
		t.Fatalf("first attempt: %s, want dead", f.c.Status)
	}
	if err := s.Replay(t.Context(), id); err != nil {
		t.Fatalf("replay: %v", err)
	}
	f := rec.nextFinished(t)
	if !f.recorded || f.c.Status != queue.StatusDone {
		t.Fatalf("after replay: recorded %v %s, want recorded done", f.recorded, f.c.Status)
	}
	if f.job.Attempt != 2 || f.job.Replays != 1 || f.job.ReplayBase != 1 {
		t.Errorf("replayed job ran as attempt %d (replays %d, base %d), want attempt 2 of replay 1: numbered on, with a fresh budget",
			f.job.Attempt, f.job.Replays, f.job.ReplayBase)
	}
	if j := getJob(t, s, id); j.Status != queue.StatusDone {
		t.Fatalf("job %s, want done", j.Status)
	}
}

// TestPoolClaimRacingStopHandsBack: jobs whose claim commits after the pool
// began to stop are handed back uncharged, never started and never left
// leased to a pool that is gone.
func TestPoolClaimRacingStopHandsBack(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s := &hookedStore{Store: setup(t, nil), afterClaim: cancel}
	p := newPool(t, queue.PoolConfig{
		Store: s,
		Handler: queue.HandlerFunc(func(context.Context, *queue.Job) error {
			t.Error("a job claimed after the stop was handled")
			return nil
		}),
	})
	id := enqueue(t, s, "evt", "t")
	n, err := p.RunOnce(ctx)
	if err != nil || n != 0 {
		t.Fatalf("RunOnce = %d, %v; want 0 jobs started", n, err)
	}
	j := getJob(t, s, id)
	if j.Status != queue.StatusPending || j.Attempts != 0 || j.LeaseOwner != "" {
		t.Fatalf("job: %s, %d attempts, owner %q; want pending, 0 attempts, no owner", j.Status, j.Attempts, j.LeaseOwner)
	}
}

// TestPoolStartsBufferedWithoutClaim: a worker that finishes starts the job
// claimed ahead at once. Every Claim after the first is held at the gate, so
// the second job can only start if the first claim brought it.
func TestPoolStartsBufferedWithoutClaim(t *testing.T) {
	var claims atomic.Int32
	gate := make(chan struct{})
	s := &hookedStore{Store: setup(t, nil), beforeClaim: func() {
		if claims.Add(1) > 1 {
			<-gate
		}
	}}
	rec := newRecorder(t, 10)
	releaseFirst := make(chan struct{})
	var first atomic.Int64
	p := newPool(t, queue.PoolConfig{
		Store: s, Workers: 1, ClaimAhead: 1, Observer: rec, PollInterval: time.Hour,
		Handler: queue.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
			if job.ID == first.Load() {
				<-releaseFirst
			}
			return nil
		}),
	})
	t.Cleanup(func() { close(gate) }) // runs before the pool's Stop
	first.Store(enqueue(t, s, "first", "t"))
	second := enqueue(t, s, "second", "t")
	start(t, p)
	if job := testutil.Receive(t, rec.started); job.ID != first.Load() {
		t.Fatalf("started job %d, want %d", job.ID, first.Load())
	}
	close(releaseFirst)
	if job := testutil.Receive(t, rec.started); job.ID != second {
		t.Fatalf("started job %d, want %d", job.ID, second)
	}
	for range 2 {
		if f := rec.nextFinished(t); !f.recorded || f.c.Status != queue.StatusDone {
			t.Fatalf("job %d: recorded %v %s, want recorded done", f.job.ID, f.recorded, f.c.Status)
		}
	}
	// Later claims may have begun, but none has returned a job.
	for _, id := range []int64{first.Load(), second} {
		if j := getJob(t, s, id); j.Status != queue.StatusDone || j.Attempts != 1 {
			t.Fatalf("job %d: %s with %d attempts, want done with 1", id, j.Status, j.Attempts)
		}
	}
}
