package queue

import (
	"context"
	"runtime/debug"
	"time"
)

// startLocked runs r's handler on a worker goroutine waiting for its next
// run, or on a new one if none is waiting. p.mu is held.
func (p *Pool) startLocked(r *run) {
	r.waiting = false
	r.started = true
	p.busy++
	p.wg.Add(1)
	select {
	case p.handoff <- r:
	default:
		p.goroutines.Add(1)
		go p.worker(r)
	}
}

// worker runs r, then each run handed to it, until the pool retires its
// goroutines. A goroutine per run started each with a small stack, which
// every delivery then grew by copying (net/http's client runs deep): 2.3–2.9 %
// of Caddy's CPU under load (docs/BENCHMARKS-LOG.md). A goroutine that stays
// keeps the stack it grew, until a collection finds it waiting and shrinks
// it. A pool that was never started (a test's runOnce) has no shutdown
// to retire them, and its goroutines end with their run.
func (p *Pool) worker(r *run) {
	defer p.goroutines.Done()
	for {
		p.work(r)
		if !p.reuse.Load() {
			return
		}
		select {
		case r = <-p.handoff:
		case <-p.retire:
			return
		}
	}
}

// work runs one job's handler, starts the next buffered job in its place,
// and records the result.
func (p *Pool) work(r *run) {
	defer p.wg.Done()
	if r.prev != nil {
		// An older run of this job, lost to this claim, is still
		// returning: never two runs of one job at once.
		<-r.prev.returned
		r.prev = nil
	}
	if !p.mayStart(r) {
		return
	}
	p.obs.JobStarted(r.job)
	started := p.now()
	p.mu.Lock()
	r.startedAt = started
	p.mu.Unlock()
	err := p.call(r.ctx, r.job)
	r.cancel()
	close(r.returned)
	wctx := r.wctx

	p.mu.Lock()
	p.busy--
	r.handled = true
	lost, shutdown, abandoned := r.lost, r.shutdown, r.abandoned
	if lost {
		p.removeLocked(r)
	}
	record := !lost && !abandoned && !(shutdown && err != nil)
	if record {
		// From here until its Finish commits the run counts against the
		// pool's room: its job is still leased, and extended, by this pool.
		p.finishing++
	}
	p.startNextLocked()
	p.mu.Unlock()
	p.signalFreed()

	if p.flow != nil && record {
		p.flow.Delivered(r.job, err, p.now())
	}
	switch {
	case abandoned:
		// Stop already handed the job back and reported it.
	case lost:
		p.obs.JobFinished(r.job, p.complete(r.job, err, started), false, err)
	case shutdown && err != nil:
		// The error is most likely the cancellation itself: the stop's
		// fault, not the job's. The run is handed back uncharged, and its
		// history shows it with its real start and duration.
		if _, err := p.store.Finish(wctx, []Completion{p.handedBack(r.job, started, r.job.Code)}); err != nil {
			p.obs.StoreError("hand back", err)
		}
		p.forget(r)
		p.obs.JobHandedBack(r.job)
	default:
		p.finish(wctx, finishing{r: r, c: p.complete(r.job, err, started), err: err})
	}
}

// startNextLocked starts the oldest buffered job on the worker that just
// became free: the next job starts before this one's result is committed,
// so the worker never waits for a commit between jobs. Once Stop has
// begun, buffered jobs are handed back instead. p.mu is held.
func (p *Pool) startNextLocked() {
	if len(p.buffered) > 0 && !p.isQuitting() {
		next := p.buffered[0]
		p.buffered[0] = nil
		p.buffered = p.buffered[1:]
		p.startLocked(next)
	}
}

// mayStart reports whether r, handed to a worker, may run. It may not once
// its lease is lost, or when the lease is within the cancelling margin of
// its end (the claim's answer came late, or this process was paused
// between the claim and the start, or the older run it waited for took
// long to return): then another worker may already run the job, or soon
// will. Such a run is never started: it is handed back, uncharged, unless
// the lease is known lost, and reported lost.
func (p *Pool) mayStart(r *run) bool {
	p.mu.Lock()
	if !r.lost && time.Until(r.deadline) > p.margin {
		p.mu.Unlock()
		return true
	}
	newlyLost := p.loseLocked(r)
	r.handled = true
	p.busy--
	p.removeLocked(r)
	p.startNextLocked()
	p.mu.Unlock()
	r.cancel()
	close(r.returned)
	p.signalFreed()
	if newlyLost {
		// The fence timer had not fired yet: the claim may still be ours.
		if err := p.store.HandBack(r.wctx, p.owner, []Claimed{r.job.Claimed()}); err != nil {
			p.obs.StoreError("hand back", err)
		}
		p.obs.LeaseLost(r.job)
	}
	return false
}

// handedBack is the completion of a run of job, begun at started, that a
// stop cut short: pending, due now, its attempt given back. code is what
// the target reported, if its handler has returned.
func (p *Pool) handedBack(job *Job, started time.Time, code Code) Completion {
	now := p.now()
	return Completion{
		JobID: job.ID, Owner: p.owner, Fence: job.Fence,
		Status: StatusPending, RunAt: now, HandedBack: true,
		Error:   "handed back: the stop cut the delivery short; not charged",
		Started: started, Duration: now.Sub(started), Code: code,
	}
}

// complete decides the completion of an attempt that started at started,
// under the job's own policy where PolicyFor gives one.
func (p *Pool) complete(job *Job, err error, started time.Time) Completion {
	now := p.now()
	d := p.decider
	if p.policy != nil && err != nil {
		retry, maxAttempts := p.policy(job)
		if retry != nil {
			d.Retry = retry
		}
		if maxAttempts > 0 {
			d.MaxAttempts = maxAttempts
		}
	}
	c := d.Decide(job, err, now)
	c.Started = started
	c.Duration = now.Sub(started)
	c.Code = job.Code
	return c
}

// call runs the handler, turning a panic into a *PanicError. A job whose
// event could not be read (Job.ReadErr) never reaches the handler: its
// attempt fails permanently with that error, so nothing is sent on as
// garbage, and a replay delivers it once its key is back.
func (p *Pool) call(ctx context.Context, job *Job) (err error) {
	if job.ReadErr != nil {
		return Permanent(job.ReadErr)
	}
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
	p.removeLocked(r)
	p.mu.Unlock()
	p.signalFreed()
}
