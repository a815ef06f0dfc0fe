package queue

import (
	"context"
	"time"
)

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
