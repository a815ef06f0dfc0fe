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

// TestPoolShutdown covers Stop with a handler running: one that ignores the
// stop until its context is cancelled is handed back uncharged; one that ends
// within the grace is recorded.
func TestPoolShutdown(t *testing.T) {
	tests := []struct {
		name     string
		grace    time.Duration
		finishes bool // the handler finishes on its own once Stop has begun
		status   queue.Status
		attempts int
	}{
		{"past the grace: handed back", 50 * time.Millisecond, false, queue.StatusPending, 0},
		{"within the grace: recorded", waitFor, true, queue.StatusDone, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := setup(t, nil)
			rec := newRecorder(t, 10)
			release := make(chan struct{})
			ctxErr := make(chan error, 1)
			p := newPool(t, queue.PoolConfig{
				Store: s, ShutdownGrace: tt.grace, Observer: rec,
				Handler: queue.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
					select {
					case <-release:
					case <-ctx.Done():
					}
					ctxErr <- ctx.Err()
					return ctx.Err()
				}),
			})
			id := enqueue(t, s, "evt", "t")
			start(t, p)
			testutil.Receive(t, rec.started)

			stopped := make(chan error, 1)
			go func() { stopped <- p.Stop(context.WithoutCancel(t.Context())) }()
			<-p.Stopping()
			if tt.finishes {
				close(release)
			}
			if err := testutil.Receive(t, stopped); err != nil {
				t.Fatalf("Stop = %v", err)
			}
			err := testutil.Receive(t, ctxErr)
			if tt.finishes {
				if err != nil {
					t.Errorf("handler ctx error = %v, want nil within the grace", err)
				}
				if f := rec.nextFinished(t); !f.recorded || f.c.Status != queue.StatusDone {
					t.Errorf("completion recorded %v %s, want recorded done", f.recorded, f.c.Status)
				}
			} else {
				if !errors.Is(err, context.Canceled) {
					t.Errorf("handler ctx error = %v, want canceled after the grace", err)
				}
				if job := testutil.Receive(t, rec.handedBack); job.ID != id {
					t.Errorf("handed back job %d, want %d", job.ID, id)
				}
				select {
				case f := <-rec.finished:
					t.Errorf("handed-back job also finished: %+v", f.c)
				default:
				}
			}
			j := getJob(t, s, id)
			if j.Status != tt.status || j.Attempts != tt.attempts || j.LeaseOwner != "" {
				t.Fatalf("job: %s, %d attempts, owner %q; want %s, %d attempts, no owner", j.Status, j.Attempts, j.LeaseOwner, tt.status, tt.attempts)
			}
		})
	}
}

// TestPoolStopDeadlineHandsBackStuckHandler: a handler that ignores its
// context keeps Stop waiting only until Stop's own deadline; its job is
// handed back and its late result is not recorded.
func TestPoolStopDeadlineHandsBackStuckHandler(t *testing.T) {
	s := setup(t, nil)
	rec := newRecorder(t, 10)
	release := make(chan struct{})
	p, err := queue.NewPool(queue.PoolConfig{
		Store: s, ShutdownGrace: 10 * time.Millisecond, Observer: rec,
		Handler: queue.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
			<-release // ignores ctx
			return nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	id := enqueue(t, s, "evt", "t")
	start(t, p)
	testutil.Receive(t, rec.started)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if err := p.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop = %v, want deadline exceeded", err)
	}
	testutil.Receive(t, rec.handedBack)
	if j := getJob(t, s, id); j.Status != queue.StatusPending || j.Attempts != 0 {
		t.Fatalf("job: %s with %d attempts, want pending with 0", j.Status, j.Attempts)
	}
	close(release)
	if err := p.Stop(context.WithoutCancel(t.Context())); err != nil {
		t.Fatalf("Stop after the handler returned = %v", err)
	}
	if j := getJob(t, s, id); j.Status != queue.StatusPending {
		t.Fatalf("late result recorded: job %s, want pending", j.Status)
	}
}

// TestPoolReload mimics a Caddy reload: a second pool starts on the same
// store before the first stops. Every job is handled once; the one job the
// old pool could not finish within its grace is handed back uncharged and
// handled by the new pool.
func TestPoolReload(t *testing.T) {
	jobs := 600
	if raceEnabled {
		jobs = 200
	}
	s := setup(t, nil)
	var calls sync.Map // job id -> *atomic.Int32
	handle := func(ctx context.Context, job *queue.Job) error {
		v, _ := calls.LoadOrStore(job.ID, new(atomic.Int32))
		v.(*atomic.Int32).Add(1)
		return nil
	}
	recA, recB := newRecorder(t, 2*jobs), newRecorder(t, 2*jobs)
	a := newPool(t, queue.PoolConfig{
		Store: s, Workers: 8, ShutdownGrace: 50 * time.Millisecond, Observer: recA,
		Handler: queue.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
			if job.Target == "slow" {
				<-ctx.Done() // outlives the grace
				return ctx.Err()
			}
			return handle(ctx, job)
		}),
	})
	b := newPool(t, queue.PoolConfig{Store: s, Workers: 8, Observer: recB, Handler: queue.HandlerFunc(handle)})

	enqueueRange := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := s.Enqueue(t.Context(), queue.Event{Source: "src", DeliveryID: fmt.Sprint(i), Payload: []byte("{}"), Targets: []string{"t"}}); err != nil {
				t.Fatalf("enqueue %d: %v", i, err)
			}
		}
	}
	slow := enqueue(t, s, "slow", "slow")
	enqueueRange(0, jobs/2)
	start(t, a)
	for range 50 {
		if f := recA.nextFinished(t); !f.recorded {
			t.Fatalf("a: job %d not recorded", f.job.ID)
		}
	}
	start(t, b)
	if err := a.Stop(t.Context()); err != nil {
		t.Fatalf("stop a: %v", err)
	}
	if job := testutil.Receive(t, recA.handedBack); job.ID != slow {
		t.Fatalf("a handed back job %d, want the slow job %d", job.ID, slow)
	}
	enqueueRange(jobs/2, jobs)

	// a's completions are all reported by the time Stop returns.
	doneA := 50
	for len(recA.finished) > 0 {
		if f := <-recA.finished; f.recorded && f.c.Status == queue.StatusDone {
			doneA++
		}
	}
	doneB := 0
	for doneA+doneB < jobs+1 {
		f := recB.nextFinished(t)
		if !f.recorded || f.c.Status != queue.StatusDone {
			t.Fatalf("b: job %d recorded %v %s", f.job.ID, f.recorded, f.c.Status)
		}
		doneB++
	}
	if doneB == 0 {
		t.Error("the new pool handled nothing")
	}
	n := 0
	calls.Range(func(k, v any) bool {
		n++
		if c := v.(*atomic.Int32).Load(); c != 1 {
			t.Errorf("job %d handled %d times", k, c)
		}
		return true
	})
	if n != jobs+1 {
		t.Errorf("%d jobs handled, want %d", n, jobs+1)
	}
	if j := getJob(t, s, slow); j.Status != queue.StatusDone || j.Attempts != 1 {
		t.Errorf("slow job: %s with %d attempts, want done with 1 (the hand-back uncharged)", j.Status, j.Attempts)
	}
}

// TestPoolStopHandsBackBuffered: the jobs a pool claimed ahead are handed
// back as soon as the stop begins, while a running handler still has its
// grace: uncharged, never started, not reported, and through a context that
// keeps the pool's values but not its cancellation.
func TestPoolStopHandsBackBuffered(t *testing.T) {
	tests := []struct {
		name    string
		workers int
		cancel  bool // stop by cancelling Start's context instead of Stop
	}{
		{"Stop, one worker", 1, false},
		{"Start's context cancelled, three workers", 3, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			type handBack struct {
				ids   []int64
				err   error
				value any
			}
			handedBack := make(chan handBack, 1)
			s := &hookedStore{Store: setup(t, nil), afterHandBack: func(ctx context.Context, claims []queue.Claimed) {
				ids := make([]int64, len(claims))
				for i, c := range claims {
					ids[i] = c.ID
				}
				handedBack <- handBack{ids, ctx.Err(), ctx.Value(ctxKey{})}
			}}
			rec := newRecorder(t, 10)
			release := make(chan struct{})
			var calls sync.Map // job id -> struct{}
			p := newPool(t, queue.PoolConfig{
				Store: s, Workers: tt.workers, ClaimAhead: tt.workers, ShutdownGrace: waitFor, Observer: rec,
				PollInterval: time.Hour,
				Handler: queue.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
					calls.Store(job.ID, struct{}{})
					<-release // the grace is long: only release ends it
					return nil
				}),
			})
			// 2×Workers jobs, all claimed by the pool's first claim: one per
			// worker, the rest buffered.
			ids := make([]int64, 2*tt.workers)
			for i := range ids {
				ids[i] = enqueue(t, s, fmt.Sprint("evt-", i), "t")
			}
			ctx, cancel := context.WithCancel(context.WithValue(t.Context(), ctxKey{}, "pool"))
			defer cancel()
			if err := p.Start(ctx); err != nil {
				t.Fatalf("start pool: %v", err)
			}
			started := map[int64]bool{}
			for range tt.workers {
				started[testutil.Receive(t, rec.started).ID] = true
			}
			var buffered []int64
			for _, id := range ids {
				if started[id] {
					continue
				}
				buffered = append(buffered, id)
				if j := getJob(t, s, id); j.Status != queue.StatusRunning || j.LeaseOwner != p.Owner() {
					t.Fatalf("job %d before the stop: %s under %q, want running under the pool (claimed ahead)", id, j.Status, j.LeaseOwner)
				}
			}

			stopped := make(chan error, 1)
			if tt.cancel {
				cancel()
				go func() { <-p.Stopping(); stopped <- p.Stop(context.WithoutCancel(t.Context())) }()
			} else {
				go func() { stopped <- p.Stop(context.WithoutCancel(t.Context())) }()
			}
			// The handlers still run: the hand-back came before the grace.
			hb := testutil.Receive(t, handedBack)
			if fmt.Sprint(hb.ids) != fmt.Sprint(buffered) || hb.err != nil || hb.value != "pool" {
				t.Fatalf("hand back of %v, ctx error %v, value %v; want %v, nil, the pool's value", hb.ids, hb.err, hb.value, buffered)
			}
			for _, id := range buffered {
				if j := getJob(t, s, id); j.Status != queue.StatusPending || j.Attempts != 0 || j.LeaseOwner != "" {
					t.Fatalf("buffered job %d: %s, %d attempts, owner %q; want pending, 0 attempts, no owner", id, j.Status, j.Attempts, j.LeaseOwner)
				}
			}
			close(release)
			if err := testutil.Receive(t, stopped); err != nil {
				t.Fatalf("Stop = %v", err)
			}
			for range tt.workers {
				if f := rec.nextFinished(t); !f.recorded || f.c.Status != queue.StatusDone || !started[f.job.ID] {
					t.Fatalf("completion of job %d: recorded %v %s; want a started job recorded done", f.job.ID, f.recorded, f.c.Status)
				}
			}
			if len(rec.started) > 0 || len(rec.handedBack) > 0 || len(rec.finished) > 0 {
				t.Fatalf("after the stop: %d more started, %d handed back, %d finished; want none", len(rec.started), len(rec.handedBack), len(rec.finished))
			}
			for _, id := range buffered {
				if _, ok := calls.Load(id); ok {
					t.Errorf("buffered job %d was handled", id)
				}
				if j := getJob(t, s, id); j.Status != queue.StatusPending || j.Attempts != 0 {
					t.Errorf("buffered job %d after the stop: %s, %d attempts; want pending, 0", id, j.Status, j.Attempts)
				}
			}
		})
	}
}
