package queue_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
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

func (r *recorder) JobHandedBack(job *queue.Job) { r.handedBack <- job }

func (r *recorder) LeaseLost(job *queue.Job) { r.lost <- job }

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

// hookedStore is the real store with a hook run after a write: the tests
// use it to cancel a claim's caller at the worst moment, or to fail a Finish
// that did reach the database as if its commit had failed.
type hookedStore struct {
	*sqlite.Store
	beforeClaim   func()
	afterClaim    func()
	beforeFinish  func(cs []queue.Completion)
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
	if s.beforeFinish != nil {
		s.beforeFinish(cs)
	}
	if s.finishError != nil {
		if err := s.finishError(); err != nil {
			return nil, err
		}
	}
	return s.Store.Finish(ctx, cs)
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
