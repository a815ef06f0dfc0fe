package queue_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

// TestPoolWorkerGoroutines checks that a started pool runs its jobs on
// goroutines that stay for the next job, and that Stop ends them all. A
// goroutine per job started each with a small stack, which every delivery
// grew again by copying.
func TestPoolWorkerGoroutines(t *testing.T) {
	tests := []struct {
		name    string
		workers int
		jobs    int
	}{
		{name: "one worker", workers: 1, jobs: 20},
		{name: "four workers", workers: 4, jobs: 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := setup(t, nil)
			var mu sync.Mutex
			seen := map[string]int{}
			rec := newRecorder(t, tt.jobs)
			p := newPool(t, queue.PoolConfig{Store: s, Workers: tt.workers, Observer: rec, PollInterval: 10 * time.Millisecond,
				Handler: queue.HandlerFunc(func(context.Context, *queue.Job) error {
					mu.Lock()
					seen[goroutineID()]++
					mu.Unlock()
					return nil
				})})
			start(t, p)
			for i := range tt.jobs {
				enqueue(t, s, fmt.Sprintf("d%d", i), "t")
			}
			for range tt.jobs {
				rec.nextFinished(t)
			}
			mu.Lock()
			ran := len(seen)
			mu.Unlock()
			// A worker's goroutine may still be recording a result when
			// the next job starts, so a few more than the workers run.
			if most := tt.workers * 3; ran > most {
				t.Errorf("%d jobs ran on %d goroutines, want at most %d", tt.jobs, ran, most)
			}
			if n := poolWorkers(); n == 0 {
				t.Error("no worker goroutine waits for the next job while the pool runs")
			}
			ctx, cancel := context.WithTimeout(t.Context(), waitFor)
			defer cancel()
			if err := p.Stop(ctx); err != nil {
				t.Fatalf("stop: %v", err)
			}
			if n := poolWorkers(); n != 0 {
				t.Errorf("%d worker goroutines left after Stop, want 0", n)
			}
		})
	}
}

// goroutineID returns the id of the calling goroutine, from the first line
// of its stack ("goroutine 18 [running]:").
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := strings.Cut(strings.TrimPrefix(string(buf), "goroutine "), " ")
	return id
}

// poolWorkers counts the goroutines of this process in Pool.worker.
func poolWorkers() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "queue.(*Pool).worker(") {
			n++
		}
	}
	return n
}

// TestPoolManyWorkers runs thousands of jobs through 16 workers, some failing
// once: each job must end done exactly once and never run in two workers at
// once, and the handler calls must add up.
func TestPoolManyWorkers(t *testing.T) {
	// The race detector slows the pure-Go SQLite about fortyfold.
	events := 2000
	if raceEnabled {
		events = 500
	}
	const targetsPer = 2
	jobs := events * targetsPer
	s := setup(t, nil)

	var inFlight, calls sync.Map // job id -> *atomic.Int32
	var totalCalls, failures atomic.Int64
	counter := func(m *sync.Map, id int64) *atomic.Int32 {
		v, _ := m.LoadOrStore(id, new(atomic.Int32))
		return v.(*atomic.Int32)
	}
	rec := newRecorder(t, 2*jobs)
	p := newPool(t, queue.PoolConfig{
		Store:   s,
		Workers: 16,
		Retry:   fixedRetry(0),
		Handler: queue.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
			running := counter(&inFlight, job.ID)
			if n := running.Add(1); n != 1 {
				t.Errorf("job %d runs in %d workers at once", job.ID, n)
			}
			defer running.Add(-1)
			counter(&calls, job.ID).Add(1)
			totalCalls.Add(1)
			if job.ID%7 == 0 && job.Attempt == 1 {
				failures.Add(1)
				return errors.New("first attempt fails")
			}
			return nil
		}),
		Observer: rec,
	})
	start(t, p)

	// Enqueue from several producers while the pool runs.
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < events; i += 8 {
				_, err := s.Enqueue(t.Context(), queue.Event{
					Source:     "src",
					DeliveryID: fmt.Sprintf("evt-%d", i),
					Payload:    []byte("{}"),
					Targets:    []string{"a", "b"},
				})
				if err != nil {
					t.Errorf("enqueue %d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()

	done := map[int64]int{}
	for len(done) < jobs {
		f := rec.nextFinished(t)
		if !f.recorded {
			t.Fatalf("job %d: completion %s not recorded", f.job.ID, f.c.Status)
		}
		if f.c.Status == queue.StatusDone {
			done[f.job.ID]++
		}
	}
	for id, n := range done {
		if n != 1 {
			t.Errorf("job %d finished done %d times", id, n)
		}
	}
	if got, want := totalCalls.Load(), int64(jobs)+failures.Load(); got != want {
		t.Errorf("handler calls = %d, want %d jobs + %d retries", got, jobs, failures.Load())
	}
	if failures.Load() == 0 {
		t.Error("no job failed once; the retry path was not exercised")
	}
	calls.Range(func(k, v any) bool {
		id, n := k.(int64), v.(*atomic.Int32).Load()
		if want := int32(1 + btoi(id%7 == 0)); n != want {
			t.Errorf("job %d handled %d times, want %d", id, n, want)
		}
		return true
	})

	st, err := s.Stats(t.Context(), time.Now())
	if err != nil {
		t.Fatalf("stats: %v", err)
	}
	var doneRows int64
	for _, c := range st.Counts {
		if c.Status != queue.StatusDone {
			t.Errorf("stats: %d jobs %s for %s/%s, want all done", c.Jobs, c.Status, c.Source, c.Target)
		}
		doneRows += c.Jobs
	}
	if doneRows != int64(jobs) {
		t.Errorf("stats: %d done jobs, want %d", doneRows, jobs)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestPoolFailures runs a job through a pool that keeps failing it.
func TestPoolFailures(t *testing.T) {
	tests := []struct {
		name     string
		handler  func() error
		attempts int
		lastErr  string
	}{
		{"panics every time: dead after MaxAttempts", func() error { panic("nil map write") }, 3, "handler panic: nil map write"},
		{"permanent: dead at once", func() error { return queue.Permanent(errors.New("400 bad request")) }, 1, "400 bad request"},
		{"transient every time: dead after MaxAttempts", func() error { return errors.New("503") }, 3, "503"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := setup(t, nil)
			rec := newRecorder(t, 10)
			var calls atomic.Int32
			p := newPool(t, queue.PoolConfig{
				Store: s, MaxAttempts: 3, Observer: rec,
				// Retries due soon, and a poll interval of an hour: the
				// pool must wake for its own scheduled retries.
				Retry: fixedRetry(20 * time.Millisecond), PollInterval: time.Hour,
				Handler: queue.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
					calls.Add(1)
					return tt.handler()
				}),
			})
			id := enqueue(t, s, "evt", "t")
			start(t, p)
			for i := 1; ; i++ {
				f := rec.nextFinished(t)
				if !f.recorded {
					t.Fatalf("attempt %d not recorded", i)
				}
				if f.c.Status == queue.StatusDead {
					break
				}
				if i >= tt.attempts {
					t.Fatalf("attempt %d: %s, want dead", i, f.c.Status)
				}
			}
			j := getJob(t, s, id)
			if j.Status != queue.StatusDead || j.Attempts != tt.attempts || int(calls.Load()) != tt.attempts {
				t.Fatalf("job: %s after %d attempts, %d calls; want dead after %d", j.Status, j.Attempts, calls.Load(), tt.attempts)
			}
			if !strings.Contains(j.LastError, tt.lastErr) {
				t.Fatalf("last error %q, want it to contain %q", j.LastError, tt.lastErr)
			}
		})
	}
}

// TestPoolRetryAfter: a Retry-After longer than the backoff sets run_at, and
// the job is not claimed before it.
func TestPoolRetryAfter(t *testing.T) {
	clk := newClock()
	s := setup(t, clk.Now)
	rec := newRecorder(t, 10)
	p := newPool(t, queue.PoolConfig{
		Store: s, Now: clk.Now, Observer: rec, Retry: fixedRetry(time.Second),
		Handler: queue.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
			if job.Attempt == 1 {
				return queue.RetryAfter(errors.New("429 too many requests"), 10*time.Minute)
			}
			return nil
		}),
	})
	id := enqueue(t, s, "evt", "t")
	failedAt := clk.Now()
	runOnce(t, p, 1)
	if f := rec.nextFinished(t); !f.recorded || f.c.Status != queue.StatusPending {
		t.Fatalf("first attempt: recorded %v %s, want recorded pending", f.recorded, f.c.Status)
	}
	if j := getJob(t, s, id); j.RunAt.Before(failedAt.Add(10 * time.Minute)) {
		t.Fatalf("run_at %s, want ≥ %s", j.RunAt, failedAt.Add(10*time.Minute))
	}
	clk.Advance(10*time.Minute - time.Second)
	runOnce(t, p, 0)
	clk.Advance(time.Second)
	runOnce(t, p, 1)
	if f := rec.nextFinished(t); !f.recorded || f.c.Status != queue.StatusDone {
		t.Fatalf("second attempt: recorded %v %s, want recorded done", f.recorded, f.c.Status)
	}
}

// TestPoolRecordsCode: what the handler reports in Job.Code reaches the
// attempt's history, for a delivered attempt as for a failed one.
func TestPoolRecordsCode(t *testing.T) {
	tests := []struct {
		name string
		code queue.Code
		err  error
	}{
		{"delivered, 200", queue.CodeOf(200), nil},
		{"exit 0", queue.CodeOf(0), nil},
		{"failed, 503", queue.CodeOf(503), queue.Permanent(errors.New("upstream answered 503"))},
		{"no answer", queue.Code{}, queue.Permanent(errors.New("connection refused"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := setup(t, nil)
			rec := newRecorder(t, 10)
			p := newPool(t, queue.PoolConfig{
				Store: s, Observer: rec,
				Handler: queue.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
					job.Code = tt.code
					return tt.err
				}),
			})
			id := enqueue(t, s, "evt", "t")
			runOnce(t, p, 1)
			if f := rec.nextFinished(t); !f.recorded || f.c.Code != tt.code {
				t.Fatalf("completion: recorded %v, code %v; want recorded, %v", f.recorded, f.c.Code, tt.code)
			}
			if h := getJob(t, s, id).History; len(h) != 1 || h[0].Code != tt.code {
				t.Errorf("history %+v, want one attempt with code %v", h, tt.code)
			}
		})
	}
}

// TestPoolPolicyFor: a job whose route has its own policy goes dead after
// its own attempt budget and waits its own backoff, while another job of
// the same event keeps the pool's.
func TestPoolPolicyFor(t *testing.T) {
	clk := newClock()
	s := setup(t, clk.Now)
	rec := newRecorder(t, 20)
	p := newPool(t, queue.PoolConfig{
		Store: s, Now: clk.Now, Observer: rec, Workers: 2,
		MaxAttempts: 4, Retry: fixedRetry(time.Second),
		PolicyFor: func(job *queue.Job) (queue.RetryPolicy, int) {
			if job.Target == "tight" {
				return fixedRetry(time.Minute), 2
			}
			return nil, 0
		},
		Handler: queue.HandlerFunc(func(context.Context, *queue.Job) error { return errors.New("503") }),
	})
	if _, err := s.Enqueue(t.Context(), queue.Event{
		Source: "src", DeliveryID: "evt", Payload: []byte(`{}`), Targets: []string{"tight", "loose"},
	}); err != nil {
		t.Fatalf("enqueue: %v", err)
	}

	// status[target] after each round; a round advances the clock past
	// both backoffs, so every pending job is due again.
	want := []map[string]queue.Status{
		{"tight": queue.StatusPending, "loose": queue.StatusPending},
		{"tight": queue.StatusDead, "loose": queue.StatusPending},
		{"loose": queue.StatusPending},
		{"loose": queue.StatusDead},
	}
	for round, statuses := range want {
		start := clk.Now()
		runOnce(t, p, len(statuses))
		for range statuses {
			f := rec.nextFinished(t)
			if !f.recorded {
				t.Fatalf("round %d, %s: not recorded", round+1, f.job.Target)
			}
			if f.c.Status != statuses[f.job.Target] {
				t.Fatalf("round %d, %s: %s after attempt %d, want %s", round+1, f.job.Target, f.c.Status, f.job.Attempt, statuses[f.job.Target])
			}
			wait := map[string]time.Duration{"tight": time.Minute, "loose": time.Second}[f.job.Target]
			if f.c.Status == queue.StatusPending && !f.c.RunAt.Equal(start.Add(wait)) {
				t.Fatalf("round %d, %s: next attempt at %s, want %s", round+1, f.job.Target, f.c.RunAt, start.Add(wait))
			}
		}
		clk.Advance(time.Minute)
	}
}
