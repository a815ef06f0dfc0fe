package queue

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
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

// Observer receives the pool's events, for metrics and logs: the queue
// package logs nothing itself. Methods are called from many goroutines at
// once and must not block. Every JobStarted is followed by exactly one
// JobFinished or JobHandedBack for that job. A job claimed ahead, waiting
// for a worker, has no events until it starts: if its lease is lost first it
// gets LeaseLost only, and if Stop hands it back first it gets none. Embed
// NopObserver to implement only some methods and stay compatible when
// methods are added.
type Observer interface {
	// JobStarted is called before the handler runs.
	JobStarted(job *Job)
	// JobFinished is called once the handler has returned err and c has been
	// sent to the store. recorded is false when nothing was written: the
	// lease was lost (reported by LeaseLost too, and then Finish is not
	// called at all), the fence in Finish rejected c, or Finish failed
	// (reported by StoreError too). c.Error holds err's text.
	JobFinished(job *Job, c Completion, recorded bool, err error)
	// JobHandedBack is called when the pool stopped while the handler ran
	// and the job went back to pending without a charged attempt. Jobs
	// claimed ahead and not yet started are handed back too, but not
	// reported: no delivery was attempted.
	JobHandedBack(job *Job)
	// LeaseLost is called when the pool can no longer prove it holds the
	// job's lease while its handler runs; the handler's ctx is cancelled.
	// It is also called for a job claimed ahead whose lease is lost before
	// it started: that job is dropped, never started, and no JobFinished
	// follows.
	LeaseLost(job *Job)
	// StoreError is called when a store operation fails; op is one of
	// "claim", "extend leases", "finish", "hand back".
	StoreError(op string, err error)
}

// NopObserver implements Observer with methods that do nothing.
type NopObserver struct{}

// JobStarted does nothing.
func (NopObserver) JobStarted(*Job) {}

// JobFinished does nothing.
func (NopObserver) JobFinished(*Job, Completion, bool, error) {}

// JobHandedBack does nothing.
func (NopObserver) JobHandedBack(*Job) {}

// LeaseLost does nothing.
func (NopObserver) LeaseLost(*Job) {}

// StoreError does nothing.
func (NopObserver) StoreError(string, error) {}

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
	// within Lease. Default: 1m.
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
	// processes share a queue. Default: 0, no buffer.
	ClaimAhead int
	// Routes, when not nil, limits claims to these (source, target) pairs;
	// see ClaimParams.Routes. Default: nil, any job.
	Routes []Route
	// Observer receives events for metrics and logs. Default: NopObserver.
	Observer Observer
	// Now is the clock for timestamps written to the store (claims, leases,
	// run_at, history). Default: time.Now.
	Now func() time.Time
}

// Pool runs a Handler over the jobs of a Store with a fixed number of
// workers. It may claim ahead (PoolConfig.ClaimAhead): besides the jobs its
// workers run, it then holds claimed jobs in a buffer, so a worker that
// finishes starts the next job at once instead of waiting for a claim's
// commit. One Claim call
// fills the idle workers and the buffer; one ExtendLeases call extends the
// leases of running and buffered jobs alike; completions are finished in
// batches. Several pools may share a store, in one process or several:
// leases and the fence in Finish keep each job in one worker at a time.
//
// A Pool is started once; after Stop it cannot be restarted.
type Pool struct {
	store   Store
	handler Handler
	decider Decider
	obs     Observer
	now     func() time.Time
	owner   string
	workers int
	ahead   int // ClaimAhead: the buffer's capacity
	lease   time.Duration
	poll    time.Duration
	grace   time.Duration
	routes  []Route

	mu        sync.Mutex
	busy      int            // handlers running
	running   map[int64]*run // claimed and neither finished nor handed back, buffered too
	buffered  []*run         // claimed ahead, not started, oldest first; at most ahead
	nextRetry time.Time      // earliest retry this pool scheduled, zero if none
	finQ      []finishing    // completions waiting for the next Finish
	flushing  bool           // a worker is sending finQ

	freed chan struct{} // a worker became idle or a job left running; buffered 1
	wg    sync.WaitGroup

	life     sync.Mutex
	started  bool
	stopping chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

// run is one claimed job. Its flags are guarded by Pool.mu.
type run struct {
	job        *Job
	ctx        context.Context // the handler's, cancelled by cancel
	cancel     context.CancelFunc
	wctx       context.Context // never cancelled: the bookkeeping writes
	leaseUntil time.Time
	waiting    bool // claimed ahead, in Pool.buffered, not started
	handled    bool // the handler has returned
	lost       bool // the lease is gone; record nothing
	shutdown   bool // cancelled by Stop after the grace
	abandoned  bool // handed back by Stop while the handler still ran
}

// finishing is a completion waiting in the batch.
type finishing struct {
	r   *run
	c   Completion
	err error
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
		obs:      cfg.Observer,
		now:      cfg.Now,
		owner:    owner,
		workers:  workers,
		ahead:    min(cfg.ClaimAhead, workers),
		lease:    cmp.Or(cfg.Lease, DefaultLease),
		poll:     cmp.Or(cfg.PollInterval, DefaultPollInterval),
		grace:    cmp.Or(cfg.ShutdownGrace, DefaultShutdownGrace),
		routes:   cfg.Routes,
		running:  make(map[int64]*run),
		freed:    make(chan struct{}, 1),
		stopping: make(chan struct{}),
		done:     make(chan struct{}),
	}
	if p.decider.Retry == nil {
		p.decider.Retry = Backoff{}
	}
	if p.obs == nil {
		p.obs = NopObserver{}
	}
	if p.now == nil {
		p.now = time.Now
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
		<-p.stopping
		unwatch()
		cancelLoop()
		<-loopDone // no claim after this
		p.drain(base)
		// Leases are extended until the last handler has returned, so a
		// handler in its grace period keeps its job.
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

// loop claims work whenever a worker or the buffer has room and work may be
// ready. It claims as soon as there is room, one claim in flight at a time,
// rather than waiting for the buffer to drain to some mark: each claim then
// takes what finished while the last was committing, so claims grow with
// the commit's latency by themselves, and no worker waits for a claim that
// was held back. (Refilling the buffer by halves measured 0.50–0.68 of a
// plain client's rate on slow32, against 0.61–0.81 this way, in
// alternating runs.)
func (p *Pool) loop(ctx context.Context) {
	timer := time.NewTimer(p.poll)
	defer timer.Stop()
	more := true // work may be ready: claim as soon as there is room
	for ctx.Err() == nil {
		if more && p.room() > 0 {
			n, limit, err := p.claim(ctx)
			if err != nil && ctx.Err() == nil {
				p.obs.StoreError("claim", err)
			}
			// A full batch suggests more is waiting; a short one means the
			// queue is drained until something wakes us.
			more = err == nil && n == limit
			if more {
				p.settle()
				continue
			}
		}
		timer.Reset(p.wait())
		select {
		case <-ctx.Done():
			return
		case <-p.store.Ready():
			more = true
		case <-p.freed:
		case <-timer.C:
			more = true
			p.mu.Lock()
			if !p.nextRetry.IsZero() && !p.now().Before(p.nextRetry) {
				p.nextRetry = time.Time{}
			}
			p.mu.Unlock()
		}
	}
}

// wait returns how long the loop may sleep: the poll interval, or less if a
// retry this pool scheduled is due sooner.
func (p *Pool) wait() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nextRetry.IsZero() {
		return p.poll
	}
	return max(min(p.poll, p.nextRetry.Sub(p.now())), 0)
}

// settle yields to the handlers just started while they keep making room,
// a few times at most. Quick handlers return at once, and the next claim
// then takes their places too: without it, one claim in flight while the
// rest return splits the pool into two half-size claims, each costing a
// commit.
func (p *Pool) settle() {
	room := p.room()
	for range 8 {
		runtime.Gosched()
		now := p.room()
		if now == room {
			return
		}
		room = now
	}
}

// room returns how many jobs the next claim may take: the idle workers and
// the free places in the buffer, Workers + ClaimAhead − busy − buffered.
func (p *Pool) room() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.workers + p.ahead - p.busy - len(p.buffered)
}

// signalFreed wakes the loop (or the drain) without blocking.
func (p *Pool) signalFreed() {
	select {
	case p.freed <- struct{}{}:
	default:
	}
}

// runOnce claims as many ready jobs as the pool has room for, in one Claim
// call, starts a handler for each up to the idle workers and buffers the
// rest. It returns the number claimed.
func (p *Pool) runOnce(ctx context.Context) (int, error) {
	n, _, err := p.claim(ctx)
	return n, err
}

func (p *Pool) claim(ctx context.Context) (claimed, limit int, err error) {
	limit = p.room()
	if limit <= 0 {
		return 0, 0, nil
	}
	// The claim is not cancelled with ctx: a claim that committed after its
	// caller gave up would leave jobs leased to nobody until the lease ends.
	// Jobs that arrive after ctx ended are handed back below instead.
	wctx := context.WithoutCancel(ctx)
	jobs, err := p.store.Claim(wctx, ClaimParams{
		Owner:  p.owner,
		Limit:  limit,
		Lease:  p.lease,
		Now:    p.now(),
		Routes: p.routes,
	})
	if err != nil {
		return 0, limit, fmt.Errorf("claim jobs: %w", err)
	}
	if len(jobs) == 0 {
		return 0, limit, nil
	}
	if ctx.Err() != nil {
		ids := make([]int64, len(jobs))
		for i, job := range jobs {
			ids[i] = job.ID
		}
		if err := p.store.HandBack(wctx, p.owner, ids); err != nil {
			p.obs.StoreError("hand back", err)
		}
		return 0, limit, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, job := range jobs {
		hctx, cancel := context.WithCancel(wctx)
		r := &run{job: job, ctx: hctx, cancel: cancel, wctx: wctx, leaseUntil: job.LeaseUntil}
		p.running[job.ID] = r
		if p.busy < p.workers {
			p.startLocked(r)
		} else {
			r.waiting = true
			p.buffered = append(p.buffered, r)
		}
	}
	return len(jobs), limit, nil
}

// startLocked runs r's handler in a new worker goroutine. p.mu is held.
func (p *Pool) startLocked(r *run) {
	r.waiting = false
	p.busy++
	p.wg.Add(1)
	go p.work(r)
}

// work runs one job's handler, starts the next buffered job in its place,
// and records the result.
func (p *Pool) work(r *run) {
	defer p.wg.Done()
	p.obs.JobStarted(r.job)
	started := p.now()
	err := p.call(r.ctx, r.job)
	r.cancel()
	wctx := r.wctx

	p.mu.Lock()
	p.busy--
	r.handled = true
	lost, shutdown, abandoned := r.lost, r.shutdown, r.abandoned
	if lost {
		delete(p.running, r.job.ID)
	}
	// The next job starts before this one's result is committed: the
	// worker never waits for a commit between jobs. Once Stop has begun,
	// buffered jobs are handed back instead.
	if len(p.buffered) > 0 && !p.isStopping() {
		next := p.buffered[0]
		p.buffered[0] = nil
		p.buffered = p.buffered[1:]
		p.startLocked(next)
	}
	p.mu.Unlock()
	p.signalFreed()

	switch {
	case abandoned:
		// Stop already handed the job back and reported it.
	case lost:
		p.obs.JobFinished(r.job, p.complete(r.job, err, started), false, err)
	case shutdown && err != nil:
		// The error is most likely the cancellation itself: the stop's
		// fault, not the job's.
		if err := p.store.HandBack(wctx, p.owner, []int64{r.job.ID}); err != nil {
			p.obs.StoreError("hand back", err)
		}
		p.forget(r)
		p.obs.JobHandedBack(r.job)
	default:
		p.finish(wctx, finishing{r: r, c: p.complete(r.job, err, started), err: err})
	}
}

// isStopping reports whether Stop has begun.
func (p *Pool) isStopping() bool {
	select {
	case <-p.stopping:
		return true
	default:
		return false
	}
}

// takeBuffered removes the jobs claimed ahead from the buffer and from
// running, and returns their ids.
func (p *Pool) takeBuffered() []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.buffered) == 0 {
		return nil
	}
	ids := make([]int64, len(p.buffered))
	for i, r := range p.buffered {
		ids[i] = r.job.ID
		r.waiting = false
		r.cancel()
		delete(p.running, r.job.ID)
	}
	p.buffered = nil
	return ids
}

// dropBufferedLocked removes r, claimed ahead, from the buffer and from
// running. p.mu is held.
func (p *Pool) dropBufferedLocked(r *run) {
	for i, b := range p.buffered {
		if b == r {
			p.buffered = append(p.buffered[:i], p.buffered[i+1:]...)
			break
		}
	}
	r.waiting = false
	delete(p.running, r.job.ID)
}

// complete decides the completion of an attempt that started at started.
func (p *Pool) complete(job *Job, err error, started time.Time) Completion {
	now := p.now()
	c := p.decider.Decide(job, err, now)
	c.Started = started
	c.Duration = now.Sub(started)
	return c
}

// call runs the handler, turning a panic into a *PanicError.
func (p *Pool) call(ctx context.Context, job *Job) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return p.handler.Handle(ctx, job)
}

// forget removes a job that is no longer ours.
func (p *Pool) forget(r *run) {
	p.mu.Lock()
	delete(p.running, r.job.ID)
	p.mu.Unlock()
	p.signalFreed()
}

// finish queues f for the next Finish call. The first worker to find no
// Finish in flight sends the queue and keeps sending whatever arrived
// meanwhile: completions that arrive together share one call, and a lone
// completion is sent at once.
func (p *Pool) finish(ctx context.Context, f finishing) {
	p.mu.Lock()
	p.finQ = append(p.finQ, f)
	if p.flushing {
		p.mu.Unlock()
		return
	}
	p.flushing = true
	p.mu.Unlock()

	for {
		p.mu.Lock()
		batch := p.finQ
		p.finQ = nil
		if len(batch) == 0 {
			p.flushing = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()

		cs := make([]Completion, len(batch))
		for i, f := range batch {
			cs[i] = f.c
		}
		recorded, err := p.store.Finish(ctx, cs)
		if err != nil {
			p.obs.StoreError("finish", err)
			recorded = nil
		}
		p.mu.Lock()
		for i, f := range batch {
			delete(p.running, f.r.job.ID)
			if i < len(recorded) && recorded[i] && f.c.Status == StatusPending &&
				(p.nextRetry.IsZero() || f.c.RunAt.Before(p.nextRetry)) {
				p.nextRetry = f.c.RunAt
			}
		}
		p.mu.Unlock()
		p.signalFreed()
		for i, f := range batch {
			p.obs.JobFinished(f.r.job, f.c, i < len(recorded) && recorded[i], f.err)
		}
	}
}

// extendLoop extends the leases of running and buffered jobs every Lease/3,
// so a lease survives two failed extensions before it runs out.
func (p *Pool) extendLoop(ctx context.Context) {
	t := time.NewTicker(p.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.extendOnce(ctx)
		}
	}
}

// extendOnce extends the leases of all jobs this pool holds, running or
// buffered, in one call; it cancels the handlers of running jobs it has lost
// and drops lost jobs from the buffer.
func (p *Pool) extendOnce(ctx context.Context) {
	p.mu.Lock()
	ids := make([]int64, 0, len(p.running))
	for id, r := range p.running {
		if !r.lost && !r.abandoned {
			ids = append(ids, id)
		}
	}
	p.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	now := p.now()
	until := now.Add(p.lease)
	lostIDs, err := p.store.ExtendLeases(ctx, p.owner, ids, until)
	if err != nil && ctx.Err() != nil {
		return // the pool is stopping; the handlers are done
	}
	lostSet := make(map[int64]bool, len(lostIDs))
	for _, id := range lostIDs {
		lostSet[id] = true
	}

	var lost []*run
	dropped := false
	p.mu.Lock()
	for _, id := range ids {
		r := p.running[id]
		if r == nil {
			continue // finished meanwhile
		}
		var gone bool
		if err != nil {
			// While the store fails, a lease that has run out may already
			// belong to another pool: stop the handler rather than run the
			// job twice at once.
			gone = !now.Before(r.leaseUntil)
		} else {
			gone = lostSet[id]
			if !gone {
				r.leaseUntil = until
			}
		}
		// A job whose handler has returned is settled by the fence in
		// Finish; only a running handler needs stopping, and a buffered
		// job must not start.
		if gone && !r.handled && !r.lost {
			r.lost = true
			if r.waiting {
				p.dropBufferedLocked(r)
				dropped = true
			}
			lost = append(lost, r)
		}
	}
	p.mu.Unlock()
	if dropped {
		p.signalFreed() // the buffer has room
	}
	if err != nil {
		p.obs.StoreError("extend leases", err)
	}
	for _, r := range lost {
		r.cancel()
		p.obs.LeaseLost(r.job)
	}
}

// drain hands back the buffered jobs at once, waits for running handlers for
// the grace period, then cancels them, and waits for every worker goroutine
// to record or hand back its job. ctx carries the hand-back.
func (p *Pool) drain(ctx context.Context) {
	p.handBackBuffered(ctx)
	grace := time.NewTimer(p.grace)
	defer grace.Stop()
wait:
	for {
		p.mu.Lock()
		n := len(p.running)
		p.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-p.freed:
		case <-grace.C:
			p.mu.Lock()
			for _, r := range p.running {
				if !r.handled {
					r.shutdown = true
					r.cancel()
				}
			}
			p.mu.Unlock()
			break wait
		}
	}
	p.wg.Wait()
}

// handBackBuffered hands the jobs claimed ahead back to pending, uncharged.
// They never started, so the observer hears nothing of them.
func (p *Pool) handBackBuffered(ctx context.Context) {
	ids := p.takeBuffered()
	if len(ids) == 0 {
		return
	}
	p.signalFreed()
	if err := p.store.HandBack(ctx, p.owner, ids); err != nil {
		p.obs.StoreError("hand back", err)
	}
}

// abandon hands back the jobs whose handlers ignore their cancelled context
// past Stop's deadline. Their results will not be recorded: after the hand
// back the fence rejects them.
func (p *Pool) abandon(ctx context.Context) {
	var jobs []*Job
	var ids []int64
	p.mu.Lock()
	for id, r := range p.running {
		// Buffered jobs are the drain's: it hands them back, with the
		// pool's context, as soon as the loop has ended.
		if !r.handled && !r.abandoned && !r.lost && !r.waiting {
			r.abandoned = true
			r.cancel()
			delete(p.running, id)
			jobs = append(jobs, r.job)
			ids = append(ids, id)
		}
	}
	p.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	p.signalFreed()
	if err := p.store.HandBack(ctx, p.owner, ids); err != nil {
		p.obs.StoreError("hand back", err)
	}
	for _, job := range jobs {
		p.obs.JobHandedBack(job)
	}
}
