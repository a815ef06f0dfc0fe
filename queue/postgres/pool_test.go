package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
)

// TestTwoInstances runs a worker pool on each of two stores sharing one
// queue, as two Caddy instances would, and enqueues through one of them
// only. Every job runs exactly once, never in both at the same time, and
// the second instance, whose poll interval is far longer than the test,
// takes its share through LISTEN/NOTIFY alone.
func TestTwoInstances(t *testing.T) {
	a, b := pair(t)
	const events = 300
	var (
		mu      sync.Mutex
		runs    = map[int64]int{}
		running = map[int64]bool{}
		by      = map[string]int{}
		fault   []string
		all     = make(chan struct{})
	)
	handler := func(name string) queue.Handler {
		return queue.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
			mu.Lock()
			if running[job.ID] {
				fault = append(fault, fmt.Sprintf("job %d running twice at once", job.ID))
			}
			running[job.ID] = true
			mu.Unlock()
			// Some work, so the first pool cannot take everything alone.
			select {
			case <-time.After(2 * time.Millisecond):
			case <-ctx.Done():
			}
			mu.Lock()
			running[job.ID] = false
			runs[job.ID]++
			by[name]++
			if len(runs) == events && by["a"]+by["b"] == events {
				close(all)
			}
			mu.Unlock()
			return nil
		})
	}
	for _, in := range []struct {
		name  string
		store *Store
	}{{"a", a}, {"b", b}} {
		p, err := queue.NewPool(queue.PoolConfig{
			Store: in.store, Handler: handler(in.name), Workers: 4,
			Lease: time.Minute, PollInterval: time.Hour, ShutdownGrace: time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := p.Stop(ctx); err != nil {
				t.Errorf("stop pool %s: %v", in.name, err)
			}
		})
	}
	for i := range events {
		if _, err := a.Enqueue(t.Context(), ev(fmt.Sprint("e", i), "mail")); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-all:
	case <-time.After(time.Minute):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%d of %d jobs run after a minute (a %d, b %d)", len(runs), events, by["a"], by["b"])
	}
	mu.Lock()
	defer mu.Unlock()
	for _, f := range fault {
		t.Error(f)
	}
	for id, n := range runs {
		if n != 1 {
			t.Errorf("job %d ran %d times", id, n)
		}
	}
	if by["b"] == 0 {
		t.Errorf("the second instance ran no job: NOTIFY did not wake it")
	}
	t.Logf("jobs run: a %d, b %d", by["a"], by["b"])
}

// TestPoolDrainsBacklog works a backlog with no producers, the state after
// any outage, with 32 workers and a lease of 500ms, so that the leases of
// held jobs are extended many times while Finish works through the
// results: every job runs exactly once, and no store call fails. (Before
// the pool bounded the jobs it holds and the fenced writes locked rows in
// one order, this test failed every time: extensions and Finish calls
// deadlocked, and 2,871 of the 8,000 jobs ran twice once their leases
// ran out.) BenchmarkWork/drain measures the same at 50,000 jobs.
func TestPoolDrainsBacklog(t *testing.T) {
	const jobs = 8000
	dsn := testutil.PostgresDSN(t)
	s := openStore(t, Config{DSN: dsn, Schema: testSchema(t, dsn), MaxConns: 40})
	var wg sync.WaitGroup
	var next atomic.Int64
	for p := range 16 {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > jobs {
					return
				}
				if _, err := s.Enqueue(t.Context(), ev(fmt.Sprint("p", p, "-", i), "mail")); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	h := &drainObserver{all: make(chan struct{}), want: jobs}
	var mu sync.Mutex
	runs := map[int64]int{}
	p, err := queue.NewPool(queue.PoolConfig{
		Store: s, Workers: 32, Lease: 500 * time.Millisecond, Observer: h, ShutdownGrace: time.Second,
		Handler: queue.HandlerFunc(func(_ context.Context, job *queue.Job) error {
			mu.Lock()
			runs[job.ID]++
			mu.Unlock()
			return nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Stop(ctx); err != nil {
			t.Errorf("stop pool: %v", err)
		}
	})
	select {
	case <-h.all:
	case <-time.After(2 * time.Minute):
		t.Fatalf("%d of %d jobs recorded after 2 minutes", h.done.Load(), jobs)
	}
	t.Logf("%d jobs drained in %s (%.0f jobs/s)", jobs, time.Since(started).Round(time.Millisecond), jobs/time.Since(started).Seconds())
	h.mu.Lock()
	for _, err := range h.errs {
		t.Errorf("store error: %v", err)
	}
	h.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	twice := 0
	for _, n := range runs {
		if n > 1 {
			twice++
		}
	}
	if twice > 0 || len(runs) != jobs {
		t.Errorf("%d jobs ran, %d of them more than once; want %d, each once", len(runs), twice, jobs)
	}
}

// drainObserver counts recorded completions and keeps store errors.
type drainObserver struct {
	queue.NopObserver
	mu   sync.Mutex
	errs []error
	done atomic.Int64
	want int64
	all  chan struct{}
}

func (o *drainObserver) StoreError(_ string, err error) {
	o.mu.Lock()
	o.errs = append(o.errs, err)
	o.mu.Unlock()
}

func (o *drainObserver) JobFinished(_ *queue.Job, _ queue.Completion, recorded bool, _ error) {
	if recorded && o.done.Add(1) == o.want {
		close(o.all)
	}
}
