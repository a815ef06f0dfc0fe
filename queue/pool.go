package queue

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Handler delivers one job. A nil error means done; an error wrapped with
// Permanent parks the job as dead at once; one wrapped with RetryAfter waits
// at least that long before the next attempt; any other error is transient
// and retried with backoff. A panic is recovered and counts as a transient
// error (a *PanicError).
//
// ctx is cancelled when the pool loses the job's lease (another worker may
// now hold it, and this attempt's result will not be recorded) or when the
// pool stops and the shutdown grace has run out (the job is handed back
// without being charged an attempt, unless the handler still returns nil).
type Handler interface {
	Handle(ctx context.Context, job *Job) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, job *Job) error

// Handle calls f(ctx, job).
func (f HandlerFunc) Handle(ctx context.Context, job *Job) error { return f(ctx, job) }

// Default PoolConfig settings.
const (
	DefaultWorkers       = 4
	DefaultLease         = time.Minute
	DefaultPollInterval  = time.Second
	DefaultShutdownGrace = 10 * time.Second
)

// PoolConfig configures a Pool. Zero fields take their defaults.
type PoolConfig struct {
	// Store holds the jobs. Required.
	Store Store
	// Handler delivers each job. Required.
	Handler Handler
	// Workers is the number of jobs handled at once. Default: 4.
	Workers int
	// Lease is how long a claimed job stays ours without news from us; the
	// pool extends the leases of running jobs every Lease/3, so a handler
	// may run longer than Lease, and a pool that dies gives its jobs up
	// within Lease. A pool that cannot extend a lease (the store fails, or
	// the process was paused) cancels the handler a quarter of the lease
	// before the lease can run out, so that no other worker ever starts
	// the job while this one still runs it; for the same reason a job
	// whose claim was answered that late (the lease counted from when the
	// claim was sent) is handed back without starting. Default: 1m.
	Lease time.Duration
	// PollInterval bounds how long ready work can wait when nothing wakes
	// the pool: work committed by another process, or a scheduled retry the
	// pool did not record itself. Enqueue, replay and hand-back in this
	// process wake the pool at once through Store.Ready. Default: 1s.
	PollInterval time.Duration
	// MaxAttempts is the attempt after which a failing job is parked as
	// dead. Default: 12.
	MaxAttempts int
	// Retry spaces the attempts of a failing job. Default: Backoff{}
	// (2s doubling, jittered, capped at 15m).
	Retry RetryPolicy
	// PolicyFor, when not nil, gives the retry policy and attempt budget of
	// one job, so that a target can have its own: the pool calls it after
	// each failed attempt, and a nil RetryPolicy or a maxAttempts of 0 it
	// returns keeps Retry or MaxAttempts. It must be fast and safe for
	// concurrent use. Default: nil, every job has Retry and MaxAttempts.
	PolicyFor func(job *Job) (retry RetryPolicy, maxAttempts int)
	// MaxRetryAfter caps a wait requested through RetryAfter. Default: 1h.
	MaxRetryAfter time.Duration
	// ShutdownGrace is how long Stop lets running handlers finish before it
	// cancels them and hands their jobs back. Default: 10s.
	ShutdownGrace time.Duration
	// Owner is the lease owner written on claimed jobs; it must be unique
	// per pool, so two pools (the old and new config during a Caddy reload)
	// never mistake each other's leases for their own. Default: 16 random
	// hex digits.
	Owner string
	// ClaimAhead is how many claimed jobs the pool may hold in a buffer
	// besides those its workers run, at most Workers, so that a worker that
	// finishes starts its next job at once instead of waiting for a claim's
	// commit. A buffered job waits behind the running ones, leased: while
	// every worker is busy with a slow delivery, another process sharing
	// the store cannot take it. Use it where the pool is the store's only
	// consumer (one Caddy on its own SQLite file), not where several
	// processes share a queue. It is ignored when Flow is set: a buffered
	// job would start later than its claim, after a circuit opened or
	// past a rate's moment. Default: 0, no buffer.
	ClaimAhead int
	// Routes, when not nil, limits claims to these (source, target) pairs;
	// see ClaimParams.Routes. Default: nil, any job.
	Routes []Route
	// Paused, when not nil, is asked before each claim about each of
	// Routes: the claim leaves out a route it reports paused, so a paused
	// route's jobs are neither charged an attempt nor read by the claim
	// (see PauseStore). It needs Routes, must be fast and safe for
	// concurrent use. With Flow, the flow control answers for pauses
	// instead (FlowConfig.Paused). Default: nil, nothing paused.
	Paused func(Route) bool

	// Flow, when not nil, shapes delivery per route: the pool asks it
	// before each claim which routes it may claim and how many jobs of
	// each (ClaimParams.Routes and Quotas), so that every claimed job can
	// start at once, and tells it of each claim, result and release. Routes
	// is then ignored: the plan names the routes. Default: nil, every
	// route of Routes is claimed as fast as workers free up.
	Flow FlowControl
	// Observer receives events for metrics and logs. Default: NopObserver.
	Observer Observer
	// Now is the clock for timestamps written to the store (claims, leases,
	// run_at, history). Default: time.Now, and then the store times leases
	// with its own clock (the database server's, for PostgreSQL). The
	// pool's self-fencing always measures the lease on this process's
	// monotonic clock.
	Now func() time.Time
}

// Pool runs a Handler over the jobs of a Store with a fixed number of
// workers. It may claim ahead (PoolConfig.ClaimAhead): besides the jobs its
// workers run, it then holds claimed jobs in a buffer, so a worker that
// finishes starts the next job at once instead of waiting for a claim's
// commit. One Claim call fills the idle workers and the buffer; one
// ExtendLeases call extends the leases of running and buffered jobs alike;
// completions are finished in batches, a failed Finish tried again until
// it is recorded. A pool holds at most its workers' and buffer's jobs and
// one Finish chunk (finishChunk) of results waiting for their Finish, so a
// store whose Finish falls behind slows the claims instead of piling up
// leases. Several pools may share a store, in one process or several:
// leases and the fence in Finish keep each job in one worker at a time.
//
// A Pool is started once; after Stop it cannot be restarted.
type Pool struct {
	store   Store
	handler Handler
	decider Decider
	policy  func(*Job) (RetryPolicy, int) // PoolConfig.PolicyFor
	obs     Observer
	now     func() time.Time
	owner   string
	workers int
	ahead   int // ClaimAhead: the buffer's capacity
	lease   time.Duration
	poll    time.Duration
	grace   time.Duration
	margin  time.Duration // self-fencing: a run is cancelled this long before its lease can end
	routes  []Route
	paused  func(Route) bool // PoolConfig.Paused
	flow    FlowControl
	// storeClock is set when no Now was configured: claims and extensions
	// then let the store time leases with its own clock.
	storeClock bool

	mu         sync.Mutex
	busy       int            // handlers running
	running    map[int64]*run // claimed and neither finished nor handed back, buffered too
	buffered   []*run         // claimed ahead, not started, oldest first; at most ahead
	nextRetry  time.Time      // earliest retry this pool scheduled, zero if none
	flowWake   time.Time      // when the flow control holds routes back until, zero if none
	finQ       []finishing    // completions waiting for the next Finish
	finishing  int            // completions in finQ or in a Finish call: handled, not yet recorded
	flushing   bool           // a worker is sending finQ
	lastFinish time.Time      // when the last Finish was sent (see gatherLocked)

	freed chan struct{}  // a worker became idle or a job left running; buffered 1
	wg    sync.WaitGroup // runs started and not yet returned from work
	// giveUp is closed when Stop's grace has run out: a Finish that keeps
	// failing stops being retried then (see flush).
	giveUp     chan struct{}
	giveUpOnce sync.Once
	// handoff passes a run to a worker goroutine waiting for its next one
	// (unbuffered); retire, closed once the last run has returned, ends
	// those waiting; goroutines counts them all.
	handoff    chan *run
	retire     chan struct{}
	goroutines sync.WaitGroup
	reuse      atomic.Bool // set by Start: its shutdown closes retire

	life      sync.Mutex
	started   bool
	stopping  chan struct{}
	stopOnce  sync.Once
	draining  chan struct{}
	drainOnce sync.Once
	done      chan struct{}
}

// run is one claim of a job. Its flags and its deadline are guarded by
// Pool.mu. Pool.running holds at most one run per job: a claim of a job
// the pool still runs (its lease ran out during a pause) loses the older
// run first.
type run struct {
	job    *Job
	ctx    context.Context // the handler's, cancelled by cancel
	cancel context.CancelFunc
	wctx   context.Context // never cancelled: the bookkeeping writes
	// deadline is the earliest the lease can end, on this process's
	// monotonic clock: the lease's length from just before the claim or
	// the last extension was sent. fence cancels the run at deadline
	// minus Pool.margin unless an extension moved it.
	deadline  time.Time
	fence     *time.Timer
	prev      *run          // an older run of the job, to return before this one starts
	returned  chan struct{} // closed when the handler has returned
	waiting   bool          // claimed ahead, in Pool.buffered, not started
	started   bool          // a worker runs (or ran) it
	startedAt time.Time     // when its handler began, on the pool's clock
	handled   bool          // the handler has returned
	lost      bool          // the lease is gone; record nothing
	shutdown  bool          // cancelled by Stop after the grace
	abandoned bool          // handed back by Stop while the handler still ran
	held      bool          // counted by the flow control until released
}

// NewPool checks cfg, fills in its defaults and returns a pool that is not
// yet running.
func NewPool(cfg PoolConfig) (*Pool, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("new pool: Store is required")
	case cfg.Handler == nil:
		return nil, errors.New("new pool: Handler is required")
	case cfg.Workers < 0:
		return nil, fmt.Errorf("new pool: Workers is %d, must not be negative", cfg.Workers)
	case cfg.Lease < 0:
		return nil, fmt.Errorf("new pool: Lease is %s, must not be negative", cfg.Lease)
	case cfg.Lease > 0 && cfg.Lease < 3*time.Millisecond:
		return nil, fmt.Errorf("new pool: Lease is %s, must be at least 3ms", cfg.Lease)
	case cfg.PollInterval < 0:
		return nil, fmt.Errorf("new pool: PollInterval is %s, must not be negative", cfg.PollInterval)
	case cfg.MaxAttempts < 0:
		return nil, fmt.Errorf("new pool: MaxAttempts is %d, must not be negative", cfg.MaxAttempts)
	case cfg.MaxRetryAfter < 0:
		return nil, fmt.Errorf("new pool: MaxRetryAfter is %s, must not be negative", cfg.MaxRetryAfter)
	case cfg.ShutdownGrace < 0:
		return nil, fmt.Errorf("new pool: ShutdownGrace is %s, must not be negative", cfg.ShutdownGrace)
	case cfg.ClaimAhead < 0:
		return nil, fmt.Errorf("new pool: ClaimAhead is %d, must not be negative", cfg.ClaimAhead)
	case cfg.Paused != nil && cfg.Routes == nil:
		return nil, errors.New("new pool: Paused needs Routes, the routes it may leave out")
	}
	owner := cfg.Owner
	if owner == "" {
		var b [8]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		owner = hex.EncodeToString(b[:])
	}
	workers := cmp.Or(cfg.Workers, DefaultWorkers)
	p := &Pool{
		store:   cfg.Store,
		handler: cfg.Handler,
		decider: Decider{
			MaxAttempts:   cmp.Or(cfg.MaxAttempts, DefaultMaxAttempts),
			Retry:         cfg.Retry,
			MaxRetryAfter: cmp.Or(cfg.MaxRetryAfter, DefaultMaxRetryAfter),
		},
		policy:   cfg.PolicyFor,
		obs:      cfg.Observer,
		now:      cfg.Now,
		owner:    owner,
		workers:  workers,
		ahead:    min(cfg.ClaimAhead, workers),
		lease:    cmp.Or(cfg.Lease, DefaultLease),
		poll:     cmp.Or(cfg.PollInterval, DefaultPollInterval),
		grace:    cmp.Or(cfg.ShutdownGrace, DefaultShutdownGrace),
		routes:   cfg.Routes,
		paused:   cfg.Paused,
		flow:     cfg.Flow,
		running:  make(map[int64]*run),
		freed:    make(chan struct{}, 1),
		stopping: make(chan struct{}),
		draining: make(chan struct{}),
		done:     make(chan struct{}),
		handoff:  make(chan *run),
		retire:   make(chan struct{}),
		giveUp:   make(chan struct{}),
	}
	p.margin = p.lease / 4
	if p.flow != nil {
		p.ahead = 0
	}
	if p.decider.Retry == nil {
		p.decider.Retry = Backoff{}
	}
	if p.obs == nil {
		p.obs = NopObserver{}
	}
	if p.now == nil {
		p.now = time.Now
		p.storeClock = true
	}
	return p, nil
}

// Owner returns the lease owner this pool writes on the jobs it claims.
func (p *Pool) Owner() string { return p.owner }

// Start runs the pool in the background until Stop is called or ctx is
// cancelled; either begins the same graceful shutdown. The pool keeps ctx's
// values but not its cancellation for its own work, through
// context.WithoutCancel, so handlers and bookkeeping writes are cancelled by
// the pool's rules (lease loss, the end of the grace), not by ctx.
func (p *Pool) Start(ctx context.Context) error {
	p.life.Lock()
	defer p.life.Unlock()
	if p.started {
		return errors.New("start pool: already started")
	}
	p.started = true
	p.reuse.Store(true)

	base := context.WithoutCancel(ctx)
	loopCtx, cancelLoop := context.WithCancel(base)
	leaseCtx, cancelLease := context.WithCancel(base)
	unwatch := context.AfterFunc(ctx, p.beginStop)
	loopDone := make(chan struct{})
	leaseDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		p.loop(loopCtx)
	}()
	go func() {
		defer close(leaseDone)
		p.extendLoop(leaseCtx)
	}()
	go func() {
		select {
		case <-p.stopping:
		case <-p.draining:
		}
		cancelLoop()
		<-loopDone // no claim after this
		p.drain(base)
		close(p.retire) // every run has returned
		p.goroutines.Wait()
		unwatch()
		// Leases are extended until the last handler has returned, so a
		// handler in its grace period, or draining, keeps its job.
		cancelLease()
		<-leaseDone
		close(p.done)
	}()
	return nil
}

// Stop stops claiming, hands the jobs claimed ahead back to pending at once,
// lets running handlers finish for ShutdownGrace, then cancels them and hands
// their jobs back to pending as well, none of them charged an attempt, and
// waits for every goroutine of the pool. If ctx ends first, Stop hands back
// the jobs whose handlers are still running (their results will not be
// recorded) and returns ctx's error. Stop is idempotent, and harmless on a
// pool that was never started.
func (p *Pool) Stop(ctx context.Context) error {
	p.life.Lock()
	started := p.started
	p.life.Unlock()
	if !started {
		return nil
	}
	p.beginStop()
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
	}
	p.abandon(context.WithoutCancel(ctx))
	return fmt.Errorf("stop pool: %w", context.Cause(ctx))
}

func (p *Pool) beginStop() { p.stopOnce.Do(func() { close(p.stopping) }) }

// Drain stops claiming at once, hands the jobs claimed ahead back to
// pending, uncharged, and lets the running handlers finish however long
// they take, their leases extended meanwhile and their results recorded;
// it returns at once, and Done is closed when the last handler's result is
// recorded. This is a reload's stop: the deliveries of the old config end
// in the background, neither cut short nor started again by the new
// config's pool. A Stop during the drain (the process exits) gives the
// handlers still running ShutdownGrace, then hands their jobs back, as a
// Stop does. Drain is idempotent; it does nothing on a pool that was never
// started.
func (p *Pool) Drain() {
	p.life.Lock()
	started := p.started
	p.life.Unlock()
	if started {
		p.drainOnce.Do(func() { close(p.draining) })
	}
}

// Done is closed when the pool has stopped, or has drained: every handler
// has returned and its result is recorded or its job handed back.
func (p *Pool) Done() <-chan struct{} { return p.done }

// storeNow is the time claims and extensions pass as their Now: zero when
// the pool uses the default clock, so the store times leases itself.
func (p *Pool) storeNow() time.Time {
	if p.storeClock {
		return time.Time{}
	}
	return p.now()
}
