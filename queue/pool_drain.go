package queue

import (
	"context"
	"time"
)

// drain hands back the buffered jobs at once, waits for running handlers
// for the grace period once Stop has begun (for as long as they take before
// that, while the pool drains), then cancels them, and waits for every
// worker goroutine to record or hand back its job. ctx carries the
// hand-back.
func (p *Pool) drain(ctx context.Context) {
	p.handBackBuffered(ctx)
	var grace <-chan time.Time
	stopping := p.stopping
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
		case <-stopping:
			// A Stop, at once or during a drain: the grace starts now.
			stopping = nil
			t := time.NewTimer(p.grace)
			defer t.Stop()
			grace = t.C
		case <-grace:
			// Results whose Finish keeps failing are dropped now: their
			// jobs run again once their leases end.
			p.stopRetrying()
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
	claims := p.takeBuffered()
	if len(claims) == 0 {
		return
	}
	p.signalFreed()
	if err := p.store.HandBack(ctx, p.owner, claims); err != nil {
		p.obs.StoreError("hand back", err)
	}
}

// takeBuffered removes the jobs claimed ahead from the buffer and from
// running, and returns their claims.
func (p *Pool) takeBuffered() []Claimed {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.buffered) == 0 {
		return nil
	}
	claims := make([]Claimed, len(p.buffered))
	for i, r := range p.buffered {
		claims[i] = r.job.Claimed()
		r.waiting = false
		r.cancel()
		p.removeLocked(r)
	}
	p.buffered = nil
	return claims
}

// abandon hands back the jobs whose handlers ignore their cancelled context
// past Stop's deadline. Their results will not be recorded: after the hand
// back the fence rejects them.
func (p *Pool) abandon(ctx context.Context) {
	p.stopRetrying()
	var jobs []*Job
	var claims []Claimed // not begun yet: no history
	var cut []Completion // begun: recorded as handed back
	p.mu.Lock()
	for _, r := range p.running {
		// Buffered jobs are the drain's: it hands them back, with the
		// pool's context, as soon as the loop has ended.
		if !r.handled && !r.abandoned && !r.lost && !r.waiting {
			r.abandoned = true
			r.cancel()
			p.removeLocked(r)
			jobs = append(jobs, r.job)
			if r.startedAt.IsZero() {
				claims = append(claims, r.job.Claimed())
			} else {
				// Its handler still runs: what it reports is not ours
				// to read.
				cut = append(cut, p.handedBack(r.job, r.startedAt, Code{}))
			}
		}
	}
	p.mu.Unlock()
	if len(jobs) == 0 {
		return
	}
	p.signalFreed()
	if len(claims) > 0 {
		if err := p.store.HandBack(ctx, p.owner, claims); err != nil {
			p.obs.StoreError("hand back", err)
		}
	}
	if len(cut) > 0 {
		if _, err := p.store.Finish(ctx, cut); err != nil {
			p.obs.StoreError("hand back", err)
		}
	}
	for _, job := range jobs {
		p.obs.JobHandedBack(job)
	}
}

// isQuitting reports whether Stop or Drain has begun.
func (p *Pool) isQuitting() bool {
	select {
	case <-p.stopping:
		return true
	case <-p.draining:
		return true
	default:
		return false
	}
}
