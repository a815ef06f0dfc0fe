package queue_test

import (
	"context"
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
