package postgres

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

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
