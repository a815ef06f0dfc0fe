package queue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
)

// TestPoolFinishFailureRetried: when Finish fails (a full disk, a lost
// database), the pool keeps the result and tries again, the job still
// leased to it: it is recorded once the store answers, and never
// delivered a second time, even once its first lease would have run out.
func TestPoolFinishFailureRetried(t *testing.T) {
	clk := newClock()
	finishErr := errors.New("disk full")
	var failing atomic.Bool
	failing.Store(true)
	s := &hookedStore{Store: setup(t, clk.Now), finishError: func() error {
		if failing.Load() {
			return finishErr
		}
		return nil
	}}
	storeErrs := make(chan error, 100)
	obs := &storeErrorObserver{recorder: newRecorder(t, 10), errs: storeErrs}
	var runs atomic.Int32
	a := newPool(t, queue.PoolConfig{
		Store: s, Lease: time.Minute, Now: clk.Now, Observer: obs,
		Handler: queue.HandlerFunc(func(context.Context, *queue.Job) error { runs.Add(1); return nil }),
	})
	b := newPool(t, queue.PoolConfig{
		Store: s, Lease: time.Minute, Now: clk.Now, Observer: newRecorder(t, 10),
		Handler: queue.HandlerFunc(func(context.Context, *queue.Job) error {
			t.Error("the job ran again in another pool")
			return nil
		}),
	})
	id := enqueue(t, s, "evt", "t")
	runOnce(t, a, 1)
	for range 2 { // the first Finish and its first retry
		if err := testutil.Receive(t, storeErrs); !errors.Is(err, finishErr) {
			t.Fatalf("store error = %v, want %v", err, finishErr)
		}
	}
	if j := getJob(t, s, id); j.Status != queue.StatusRunning {
		t.Fatalf("job while Finish fails: %s, want still running under its lease", j.Status)
	}
	failing.Store(false)
	if f := obs.nextFinished(t); !f.recorded || f.c.Status != queue.StatusDone {
		t.Fatalf("completion: recorded %v %s, want recorded done once Finish works", f.recorded, f.c.Status)
	}
	clk.Advance(2 * time.Minute)
	runOnce(t, b, 0)
	if j := getJob(t, s, id); j.Status != queue.StatusDone || j.Attempts != 1 || runs.Load() != 1 {
		t.Fatalf("job: %s with %d attempts, %d runs; want done with 1 attempt, run once", j.Status, j.Attempts, runs.Load())
	}
}

// TestPoolFinishGivesUpAfterGrace: a Finish that fails for good is retried
// until Stop's grace runs out, then the result is dropped (reported
// unrecorded) and Stop returns; the job keeps its lease, to run again once
// it ends.
func TestPoolFinishGivesUpAfterGrace(t *testing.T) {
	finishErr := errors.New("database gone")
	s := &hookedStore{Store: setup(t, nil), finishError: func() error { return finishErr }}
	obs := &storeErrorObserver{recorder: newRecorder(t, 10), errs: make(chan error, 1000)}
	p := newPool(t, queue.PoolConfig{
		Store: s, Observer: obs, ShutdownGrace: 100 * time.Millisecond,
		Handler: queue.HandlerFunc(func(context.Context, *queue.Job) error { return nil }),
	})
	id := enqueue(t, s, "evt", "t")
	start(t, p)
	testutil.Receive(t, obs.errs) // the first Finish failed
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	if err := p.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if f := obs.nextFinished(t); f.recorded {
		t.Fatalf("completion reported recorded although every Finish failed")
	}
	if j := getJob(t, s, id); j.Status != queue.StatusRunning {
		t.Fatalf("job: %s, want running: leased until its lease ends", j.Status)
	}
}

// TestPoolHeldBound: with a Finish that does not answer, the pool claims
// until it holds its workers' and buffer's jobs and 256 results waiting
// for their Finish (one Finish chunk), and then claims nothing more,
// however long it waits; once Finish answers, the rest drains, every job
// run once.
func TestPoolHeldBound(t *testing.T) {
	tests := []struct {
		name           string
		workers, ahead int
	}{
		{name: "four workers", workers: 4},
		{name: "four workers, four ahead", workers: 4, ahead: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const jobs = 300
			bound := tt.workers + tt.ahead + 256
			gate := make(chan struct{})
			s := &hookedStore{Store: setup(t, nil), finishError: func() error {
				<-gate
				return nil
			}}
			var mu sync.Mutex
			runs := map[int64]int{}
			total := 0
			all := make(chan struct{})
			rec := newRecorder(t, jobs)
			p := newPool(t, queue.PoolConfig{
				Store: s, Workers: tt.workers, ClaimAhead: tt.ahead, Observer: rec,
				PollInterval: 5 * time.Millisecond,
				Handler: queue.HandlerFunc(func(_ context.Context, job *queue.Job) error {
					mu.Lock()
					defer mu.Unlock()
					runs[job.ID]++
					if total++; total == jobs {
						close(all)
					}
					return nil
				}),
			})
			for i := range jobs {
				enqueue(t, s, fmt.Sprint("d", i), "t")
			}
			start(t, p)
			ran := func() int {
				mu.Lock()
				defer mu.Unlock()
				return total
			}
			testutil.Eventually(t, func() bool { return ran() >= bound },
				func() string { return fmt.Sprintf("%d handler calls, want %d", ran(), bound) })
			// The window in which a pool without the bound claims on: it
			// polls every 5ms, and every returning handler wakes it.
			<-time.After(200 * time.Millisecond)
			if n := ran(); n != bound {
				t.Errorf("%d handler calls while Finish hung, want %d (the bound)", n, bound)
			}
			st, err := s.Stats(t.Context(), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			leased := 0
			for _, c := range st.Counts {
				if c.Status == queue.StatusRunning {
					leased += int(c.Jobs)
				}
			}
			if leased != bound {
				t.Errorf("%d jobs leased while Finish hung, want %d", leased, bound)
			}
			close(gate)
			testutil.Receive(t, all)
			for range jobs {
				if f := rec.nextFinished(t); !f.recorded {
					t.Errorf("job %d: not recorded", f.job.ID)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for id, n := range runs {
				if n != 1 {
					t.Errorf("job %d ran %d times", id, n)
				}
			}
		})
	}
}

// TestPoolFinishChunks: results that pile up behind a slow Finish are
// recorded in calls of at most 256 completions, each in job id order (the
// order the stores take their row locks in), so no statement holds many
// locks or deadlocks with a lease extension; every result is recorded
// once.
func TestPoolFinishChunks(t *testing.T) {
	const jobs, workers, ahead, chunk = 400, 32, 32, 256
	gate := make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	recorded := map[int64]int{}
	s := &hookedStore{Store: setup(t, nil), beforeFinish: func(cs []queue.Completion) {
		<-gate
		mu.Lock()
		defer mu.Unlock()
		sizes = append(sizes, len(cs))
		for i, c := range cs {
			recorded[c.JobID]++
			if i > 0 && c.JobID <= cs[i-1].JobID {
				t.Errorf("Finish of %d: job %d after job %d, want job id order", len(cs), c.JobID, cs[i-1].JobID)
			}
		}
	}}
	var ran atomic.Int32
	rec := newRecorder(t, jobs)
	p := newPool(t, queue.PoolConfig{
		Store: s, Workers: workers, ClaimAhead: ahead, Observer: rec,
		PollInterval: 5 * time.Millisecond,
		Handler: queue.HandlerFunc(func(context.Context, *queue.Job) error {
			ran.Add(1)
			return nil
		}),
	})
	for i := range jobs {
		enqueue(t, s, fmt.Sprint("d", i), "t")
	}
	start(t, p)
	// The first Finish waits at the gate with the few results it found;
	// the held bound lets more than a chunk's worth pile up behind it.
	bound := workers + ahead + chunk
	testutil.Eventually(t, func() bool { return ran.Load() >= int32(bound) },
		func() string { return fmt.Sprintf("%d handler calls, want %d", ran.Load(), bound) })
	close(gate)
	for range jobs {
		if f := rec.nextFinished(t); !f.recorded {
			t.Errorf("job %d: not recorded", f.job.ID)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, n := range sizes {
		if n > chunk {
			t.Errorf("a Finish of %d completions, want at most %d (calls: %v)", n, chunk, sizes)
		}
	}
	for id, n := range recorded {
		if n != 1 {
			t.Errorf("job %d sent to Finish %d times", id, n)
		}
	}
	if len(recorded) != jobs {
		t.Errorf("%d jobs sent to Finish, want %d", len(recorded), jobs)
	}
}
