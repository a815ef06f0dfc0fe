package queue

import "context"

// finishing is a completion waiting in the batch.
type finishing struct {
	r   *run
	c   Completion
	err error
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
			p.removeLocked(f.r)
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
