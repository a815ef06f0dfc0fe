package queue

import (
	"context"
	"time"
)

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

// isStopping reports whether Stop has begun.
func (p *Pool) isStopping() bool {
	select {
	case <-p.stopping:
		return true
	default:
		return false
	}
}
