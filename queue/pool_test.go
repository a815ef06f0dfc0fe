package queue_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/sqlite"
)

// waitFor bounds every wait on a channel, as it bounds testutil.Receive:
// generous, because the machine is shared, and never reached when the code
// works.
const waitFor = testutil.WaitTimeout

// clock is a settable clock shared by a store and its pools.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock {
	return &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// setup opens a store on a fresh file. now is nil for the real clock.
// synchronous=normal keeps the tests light on the shared disk; durability is
// the store's own suite's concern.
func setup(t *testing.T, now func() time.Time) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), sqlite.Config{
		Path:        filepath.Join(t.TempDir(), "queue.db"),
		Synchronous: "normal",
		Now:         now,
	})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return s
}

// enqueue stores one event for target and returns its job's id.
func enqueue(t *testing.T, s queue.Store, delivery, target string) int64 {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	res, err := s.Enqueue(ctx, queue.Event{
		Source:     "src",
		DeliveryID: delivery,
		EventType:  "test",
		Payload:    []byte(`{"n":1}`),
		Targets:    []string{target},
	})
	if err != nil {
		t.Fatalf("enqueue %s: %v", delivery, err)
	}
	if res.Jobs != 1 {
		t.Fatalf("enqueue %s: %d jobs, want 1", delivery, res.Jobs)
	}
	page, err := s.ListJobs(ctx, queue.ListParams{Filter: queue.Filter{Source: "src", Target: target}, Limit: 1})
	if err != nil || len(page.Jobs) != 1 || page.Jobs[0].EventID != res.EventID {
		t.Fatalf("find job of %s: %v, %+v", delivery, err, page)
	}
	return page.Jobs[0].ID
}

// getJob returns the stored job id.
func getJob(t *testing.T, s queue.Store, id int64) queue.JobDetail {
	t.Helper()
	j, err := s.GetJob(context.WithoutCancel(t.Context()), id)
	if err != nil {
		t.Fatalf("get job %d: %v", id, err)
	}
	return j
}

// finished is one JobFinished call.
type finished struct {
	job      *queue.Job
	c        queue.Completion
	recorded bool
	err      error
}

// recorder is an Observer that forwards every event to a channel and fails
// the test on a store error.
type recorder struct {
	t          *testing.T
	started    chan *queue.Job
	finished   chan finished
	handedBack chan *queue.Job
	lost       chan *queue.Job
}

func newRecorder(t *testing.T, capacity int) *recorder {
	return &recorder{
		t:          t,
		started:    make(chan *queue.Job, capacity),
		finished:   make(chan finished, capacity),
		handedBack: make(chan *queue.Job, capacity),
		lost:       make(chan *queue.Job, capacity),
	}
}

func (r *recorder) JobStarted(job *queue.Job) { r.started <- job }
func (r *recorder) JobFinished(job *queue.Job, c queue.Completion, recorded bool, err error) {
	r.finished <- finished{job, c, recorded, err}
}
func (r *recorder) JobHandedBack(job *queue.Job)    { r.handedBack <- job }
func (r *recorder) LeaseLost(job *queue.Job)        { r.lost <- job }
func (r *recorder) StoreError(op string, err error) { r.t.Errorf("store error in %s: %v", op, err) }
func (r *recorder) nextFinished(t *testing.T) finished {
	t.Helper()
	return testutil.Receive(t, r.finished)
}

// newPool builds a pool whose Stop runs at cleanup.
func newPool(t *testing.T, cfg queue.PoolConfig) *queue.Pool {
	t.Helper()
	p, err := queue.NewPool(cfg)
	if err != nil {
		t.Fatalf("new pool: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), waitFor)
		defer cancel()
		if err := p.Stop(ctx); err != nil {
			t.Errorf("stop pool: %v", err)
		}
	})
	return p
}

func start(t *testing.T, p *queue.Pool) {
	t.Helper()
	if err := p.Start(t.Context()); err != nil {
		t.Fatalf("start pool: %v", err)
	}
}

func runOnce(t *testing.T, p *queue.Pool, want int) {
	t.Helper()
	n, err := p.RunOnce(t.Context())
	if err != nil {
		t.Fatalf("runOnce: %v", err)
	}
	if n != want {
		t.Fatalf("runOnce claimed %d jobs, want %d", n, want)
	}
}

func TestNewPoolValidates(t *testing.T) {
	s := setup(t, nil)
	h := queue.HandlerFunc(func(context.Context, *queue.Job) error { return nil })
	tests := []struct {
		name  string
		cfg   queue.PoolConfig
		field string // named in the error; empty for a valid config
	}{
		{"defaults", queue.PoolConfig{Store: s, Handler: h}, ""},
		{"no store", queue.PoolConfig{Handler: h}, "Store"},
		{"no handler", queue.PoolConfig{Store: s}, "Handler"},
		{"negative workers", queue.PoolConfig{Store: s, Handler: h, Workers: -1}, "Workers"},
		{"negative lease", queue.PoolConfig{Store: s, Handler: h, Lease: -time.Second}, "Lease"},
		{"lease too short to extend", queue.PoolConfig{Store: s, Handler: h, Lease: time.Millisecond}, "Lease"},
		{"negative poll", queue.PoolConfig{Store: s, Handler: h, PollInterval: -1}, "PollInterval"},
		{"negative max attempts", queue.PoolConfig{Store: s, Handler: h, MaxAttempts: -1}, "MaxAttempts"},
		{"negative max retry-after", queue.PoolConfig{Store: s, Handler: h, MaxRetryAfter: -1}, "MaxRetryAfter"},
		{"negative grace", queue.PoolConfig{Store: s, Handler: h, ShutdownGrace: -1}, "ShutdownGrace"},
		{"negative claim ahead", queue.PoolConfig{Store: s, Handler: h, ClaimAhead: -1}, "ClaimAhead"},
		{"paused without routes", queue.PoolConfig{Store: s, Handler: h, Paused: func(queue.Route) bool { return true }}, "Routes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := queue.NewPool(tt.cfg)
			if tt.field == "" {
				if err != nil || p == nil {
					t.Fatalf("NewPool = %v, want a pool", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("NewPool error = %v, want one naming %s", err, tt.field)
			}
		})
	}
}

func TestPoolOwnersDiffer(t *testing.T) {
	s := setup(t, nil)
	h := queue.HandlerFunc(func(context.Context, *queue.Job) error { return nil })
	a := newPool(t, queue.PoolConfig{Store: s, Handler: h})
	b := newPool(t, queue.PoolConfig{Store: s, Handler: h})
	if a.Owner() == "" || a.Owner() == b.Owner() {
		t.Fatalf("owners %q and %q, want two distinct non-empty owners", a.Owner(), b.Owner())
	}
	c := newPool(t, queue.PoolConfig{Store: s, Handler: h, Owner: "caddy-1"})
	if c.Owner() != "caddy-1" {
		t.Fatalf("Owner() = %q, want the configured caddy-1", c.Owner())
	}
}

func TestPoolStopIsIdempotent(t *testing.T) {
	s := setup(t, nil)
	p := newPool(t, queue.PoolConfig{Store: s, Handler: queue.HandlerFunc(func(context.Context, *queue.Job) error { return nil })})
	if err := p.Stop(t.Context()); err != nil {
		t.Fatalf("Stop before Start = %v, want nil", err)
	}
	start(t, p)
	if err := p.Start(t.Context()); err == nil {
		t.Fatal("second Start = nil, want an error")
	}
	for i := range 2 {
		if err := p.Stop(t.Context()); err != nil {
			t.Fatalf("Stop #%d = %v, want nil", i+1, err)
		}
	}
}

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

// hookedStore is the real store with a hook run after a write: the tests
// use it to cancel a claim's caller at the worst moment, or to fail a Finish
// that did reach the database as if its commit had failed.
type hookedStore struct {
	*sqlite.Store
	beforeClaim   func()
	afterClaim    func()
	finishError   func() error // non-nil error: Finish writes nothing and fails
	extendError   func() error // non-nil error: ExtendLeases writes nothing and fails
	afterHandBack func(ctx context.Context, claims []queue.Claimed)
}

func (s *hookedStore) ExtendLeases(ctx context.Context, p queue.ExtendParams) ([]int64, error) {
	if s.extendError != nil {
		if err := s.extendError(); err != nil {
			return nil, err
		}
	}
	return s.Store.ExtendLeases(ctx, p)
}

func (s *hookedStore) Claim(ctx context.Context, p queue.ClaimParams) ([]*queue.Job, error) {
	if s.beforeClaim != nil {
		s.beforeClaim()
	}
	jobs, err := s.Store.Claim(ctx, p)
	if s.afterClaim != nil {
		s.afterClaim()
	}
	return jobs, err
}

func (s *hookedStore) HandBack(ctx context.Context, owner string, claims []queue.Claimed) error {
	err := s.Store.HandBack(ctx, owner, claims)
	if s.afterHandBack != nil {
		s.afterHandBack(ctx, claims)
	}
	return err
}

func (s *hookedStore) Finish(ctx context.Context, cs []queue.Completion) ([]bool, error) {
	if s.finishError != nil {
		if err := s.finishError(); err != nil {
			return nil, err
		}
	}
	return s.Store.Finish(ctx, cs)
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

// storeErrorObserver is a recorder that expects store errors and forwards
// them instead of failing the test.
type storeErrorObserver struct {
	*recorder
	errs chan error
}

func (o *storeErrorObserver) StoreError(op string, err error) { o.errs <- err }

// ctxKey marks the context a pool was started with.
type ctxKey struct{}

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
