package queue

import (
	"context"
	"fmt"
	"runtime"
	"time"
)

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
	failures := 0
	var lastClaim time.Time // when the last claim that came back short was sent
	for ctx.Err() == nil {
		if more && p.room() > 0 {
			if d := time.Until(lastClaim.Add(claimGather)); d > 0 {
				timer.Reset(d)
				select {
				case <-ctx.Done():
					return
				case <-timer.C:
				}
			}
			sent := time.Now()
			_, full, err := p.claim(ctx)
			if !full {
				lastClaim = sent
			}
			if err != nil && ctx.Err() == nil {
				p.obs.StoreError("claim", err)
			}
			if err != nil {
				// A store that fails (or answers too late to use) is
				// asked again after a backoff that no wake-up cuts
				// short: each failed claim may have held a connection
				// for the store's whole timeout.
				failures++
				timer.Reset(claimBackoff(failures, p.poll))
				select {
				case <-ctx.Done():
					return
				case <-timer.C:
				}
				continue
			}
			failures = 0
			// A full batch suggests more is waiting; a short one means the
			// queue is drained, or the flow control holds the rest back,
			// until something wakes us.
			more = full
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
			p.flowWake = time.Time{}
			p.mu.Unlock()
		}
	}
}

// claimGather spaces the claims of a pool that finds little work: a claim
// that came back short (all there was) is followed by the next one no
// sooner than this, so at low rates the jobs that arrive meanwhile share
// one claim, one statement and one commit (on PostgreSQL, 1.9–2.7 jobs a
// claim at 1,000 jobs/s without it). A claim that came back full is
// followed at once: a backlog is claimed as fast as workers free up.
const claimGather = 5 * time.Millisecond

// claimBackoff is the wait after the failures-th failed claim in a row:
// 50ms, doubling, at most the poll interval (and at least 50ms).
func claimBackoff(failures int, poll time.Duration) time.Duration {
	d := 50 * time.Millisecond << min(failures-1, 10)
	return max(min(d, poll), 50*time.Millisecond)
}

// wait returns how long the loop may sleep: the poll interval, or less if a
// retry this pool scheduled is due sooner, or the flow control lets a route
// go sooner.
func (p *Pool) wait() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.poll
	for _, t := range [...]time.Time{p.nextRetry, p.flowWake} {
		if !t.IsZero() {
			d = min(d, t.Sub(p.now()))
		}
	}
	return max(d, 0)
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
// the free places in the buffer, Workers + ClaimAhead − busy − buffered,
// less the results beyond finishChunk that wait for their Finish (or are
// in one). So the pool holds at most its workers' and buffer's jobs and
// one Finish's worth of results. Without that bound a store whose Finish
// falls behind (a backlog on PostgreSQL) let the pool claim on as every
// handler returned: 35,000–84,000 jobs leased at once, extensions of all
// of them in one statement, and half the backlog run twice once their
// leases ran out. (A bound of one pool's worth of results, twice the
// workers in all, kept the claims waiting for each Finish: 0.76× River's
// drain with 32 workers in one pair, against 1.23× over six this way.)
func (p *Pool) room() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.workers + p.ahead - p.busy - len(p.buffered) - max(p.finishing-finishChunk, 0)
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

// claimRoutes returns the routes the next claim may read: Routes without
// the paused ones. With nothing paused it is Routes itself, no copy.
func (p *Pool) claimRoutes() []Route {
	if p.paused == nil {
		return p.routes
	}
	for i, r := range p.routes {
		if p.paused(r) {
			// An empty, non-nil list claims nothing (ClaimParams.Routes).
			out := make([]Route, i, len(p.routes))
			copy(out, p.routes[:i])
			for _, r := range p.routes[i+1:] {
				if !p.paused(r) {
					out = append(out, r)
				}
			}
			return out
		}
	}
	return p.routes
}

// claim claims as many ready jobs as the pool has room for and the flow
// control allows, and reports how many it got and whether that is all it
// asked for.
func (p *Pool) claim(ctx context.Context) (claimed int, full bool, err error) {
	limit := p.room()
	if limit <= 0 {
		return 0, false, nil
	}
	routes, quotas := p.claimRoutes(), []int(nil)
	if p.flow != nil {
		if routes, quotas, limit = p.plan(limit); limit == 0 {
			return 0, false, nil
		}
	}
	// The claim is not cancelled with ctx: a claim that committed after its
	// caller gave up would leave jobs leased to nobody until the lease ends.
	// Jobs that arrive after ctx ended are handed back below instead.
	wctx := context.WithoutCancel(ctx)
	// The lease ends no earlier than its length after the claim was sent,
	// whichever clock the store times it with.
	sent := time.Now()
	jobs, err := p.store.Claim(wctx, ClaimParams{
		Owner:  p.owner,
		Limit:  limit,
		Lease:  p.lease,
		Now:    p.storeNow(),
		Routes: routes,
		Quotas: quotas,
	})
	if err != nil {
		return 0, false, fmt.Errorf("claim jobs: %w", err)
	}
	if len(jobs) == 0 {
		return 0, false, nil
	}
	// The lease ends no earlier than sent + Lease, and no run may start
	// within the cancelling margin of that: a claim answered later than
	// that (a stalled network or database, a pause of this process) is
	// handed back unstarted. By now another worker may have taken the job
	// once its lease ran out; starting it here would run it twice at once.
	deadline := sent.Add(p.lease)
	stale := time.Until(deadline) <= p.margin
	if p.flow != nil && !stale {
		now := p.now()
		for _, job := range jobs {
			p.flow.Claimed(job, now)
		}
	}
	if stale || ctx.Err() != nil {
		claims := make([]Claimed, len(jobs))
		for i, job := range jobs {
			claims[i] = job.Claimed()
		}
		if p.flow != nil && !stale {
			for _, job := range jobs {
				p.flow.Released(job)
			}
		}
		if err := p.store.HandBack(wctx, p.owner, claims); err != nil {
			p.obs.StoreError("hand back", err)
		}
		if !stale {
			return 0, false, nil
		}
		for _, job := range jobs {
			p.obs.LeaseLost(job)
		}
		return 0, false, fmt.Errorf("claim jobs: %w", &staleClaimError{after: time.Since(sent), lease: p.lease})
	}
	var lost []*run
	p.mu.Lock()
	for _, job := range jobs {
		hctx, cancel := context.WithCancel(wctx)
		r := &run{job: job, ctx: hctx, cancel: cancel, wctx: wctx, returned: make(chan struct{}), held: p.flow != nil}
		if old := p.running[job.ID]; old != nil {
			// We claimed a job we still hold: its lease ran out while
			// this process was paused, and the claim made the old run
			// stale. The pool never holds two runs of one job: the old
			// one is lost, and the new one starts only once the old
			// handler has returned.
			if p.loseLocked(old) {
				lost = append(lost, old)
			}
			if old.started && !old.handled {
				r.prev = old
			}
		}
		p.running[job.ID] = r
		p.armLocked(r, deadline)
		if p.busy < p.workers {
			p.startLocked(r)
		} else {
			r.waiting = true
			p.buffered = append(p.buffered, r)
		}
	}
	p.mu.Unlock()
	p.reportLost(lost)
	return len(jobs), len(jobs) == limit, nil
}

// plan asks the flow control which routes the next claim of at most limit
// jobs may take, and returns them, their quotas (nil when none binds) and
// the claim's limit, 0 when nothing may be claimed now.
func (p *Pool) plan(limit int) (routes []Route, quotas []int, n int) {
	plan, wake := p.flow.Plan(p.now())
	p.mu.Lock()
	p.flowWake = wake
	p.mu.Unlock()
	routes = make([]Route, len(plan))
	binds := false
	for i, rq := range plan {
		routes[i] = rq.Route
		n += min(rq.Quota, limit)
		binds = binds || rq.Quota < limit
	}
	if binds {
		quotas = make([]int, len(plan))
		for i, rq := range plan {
			quotas[i] = min(rq.Quota, limit)
		}
	}
	return routes, quotas, min(n, limit)
}

// staleClaimError reports a claim answered too late for its jobs to start:
// within the pool's cancelling margin of the lease's end, or past it.
type staleClaimError struct {
	after, lease time.Duration
}

func (e *staleClaimError) Error() string {
	return fmt.Sprintf("answered %s after it was sent, too close to the end of its %s lease to start; its jobs were handed back",
		e.after.Round(time.Millisecond), e.lease)
}
