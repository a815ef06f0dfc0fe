package queue

import (
	"cmp"
	"context"
	"slices"
	"time"
)

// extendLoop extends the leases of running and buffered jobs every Lease/3,
// so a lease survives two failed extensions before it runs out; a run
// whose lease could not be extended is cancelled before that (see fence).
// An extension that fails is tried again sooner, after Lease/12, doubling
// up to the next tick.
func (p *Pool) extendLoop(ctx context.Context) {
	t := time.NewTicker(p.lease / 3)
	defer t.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	wait := p.lease / 12
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-retry.C:
		}
		if err := p.extendOnce(ctx); err != nil {
			retry.Reset(wait)
			wait = min(2*wait, p.lease/3)
			continue
		}
		retry.Stop()
		wait = p.lease / 12
	}
}

// extendChunk bounds the claims one ExtendLeases call extends, so that no
// statement holds many row locks or runs long, however many jobs the pool
// holds.
const extendChunk = 256

// extendOnce extends the leases of all claims this pool holds, running,
// buffered or waiting for their Finish, in chunks of extendChunk in job id
// order (the order in which the stores' fenced writes take their row
// locks, so an extension and a Finish never wait for each other in a
// cycle). It cancels the handlers of running jobs it has lost, drops lost
// jobs from the buffer, and marks lost the results waiting for a Finish
// that keeps failing. When the store fails, the chunks not extended stay
// as they were: each run's fence timer cancels it before its lease can
// end; it returns the first error.
func (p *Pool) extendOnce(ctx context.Context) error {
	p.mu.Lock()
	runs := make([]*run, 0, len(p.running))
	for _, r := range p.running {
		if !r.lost && !r.abandoned {
			runs = append(runs, r)
		}
	}
	p.mu.Unlock()
	slices.SortFunc(runs, func(a, b *run) int { return cmp.Compare(a.job.ID, b.job.ID) })
	var first error
	for chunk := range slices.Chunk(runs, extendChunk) {
		if err := p.extendChunk(ctx, chunk); err != nil {
			if ctx.Err() == nil {
				p.obs.StoreError("extend leases", err)
			}
			first = cmp.Or(first, err)
		}
	}
	return first
}

// extendChunk extends the leases of runs in one ExtendLeases call.
func (p *Pool) extendChunk(ctx context.Context, runs []*run) error {
	claims := make([]Claimed, len(runs))
	for i, r := range runs {
		claims[i] = r.job.Claimed()
	}
	sent := time.Now()
	lostIDs, err := p.store.ExtendLeases(ctx, ExtendParams{
		Owner:  p.owner,
		Claims: claims,
		Lease:  p.lease,
		Now:    p.storeNow(),
	})
	if err != nil {
		return err
	}
	lostSet := make(map[int64]bool, len(lostIDs))
	for _, id := range lostIDs {
		lostSet[id] = true
	}

	var lost []*run
	p.mu.Lock()
	for _, r := range runs {
		switch {
		case p.running[r.job.ID] != r:
			// Finished meanwhile, or replaced by a new claim of the job.
		case lostSet[r.job.ID]:
			if p.loseLocked(r) {
				lost = append(lost, r)
			} else if r.handled {
				// A result waiting for its Finish: the claim is gone,
				// so a retry would record nothing.
				r.lost = true
			}
		default:
			p.armLocked(r, sent.Add(p.lease))
		}
	}
	p.mu.Unlock()
	p.reportLost(lost)
	return nil
}

// armLocked records that r's lease ends no earlier than deadline and sets
// r's fence timer to cancel the run Pool.margin before it. p.mu is held.
func (p *Pool) armLocked(r *run, deadline time.Time) {
	r.deadline = deadline
	wait := time.Until(deadline) - p.margin
	if r.fence == nil {
		r.fence = time.AfterFunc(wait, func() { p.fence(r) })
		return
	}
	r.fence.Reset(wait)
}

// fence is self-fencing: it cancels r, whose lease was not extended in
// time, before the lease can end and another worker take the job. A run
// whose handler has returned is left to the fence in Finish.
func (p *Pool) fence(r *run) {
	p.mu.Lock()
	if p.running[r.job.ID] != r || time.Until(r.deadline) > p.margin {
		// Gone, or extended while this timer fired.
		p.mu.Unlock()
		return
	}
	lost := p.loseLocked(r)
	p.mu.Unlock()
	if lost {
		p.reportLost([]*run{r})
	}
}

// loseLocked marks r's lease lost, unless its handler has returned (the
// fence in Finish settles that one) or it is already lost or handed back,
// and drops it from the buffer if it was not started. It reports whether r
// was newly lost: the caller then reports it with reportLost. p.mu is held.
func (p *Pool) loseLocked(r *run) bool {
	if r.handled || r.lost || r.abandoned {
		return false
	}
	r.lost = true
	if r.fence != nil {
		r.fence.Stop()
	}
	if r.waiting {
		p.dropBufferedLocked(r)
		p.signalFreed() // the buffer has room
	}
	return true
}

// reportLost cancels the handlers of lost runs and tells the observer.
func (p *Pool) reportLost(lost []*run) {
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
	p.removeLocked(r)
}

// removeLocked removes r from running, unless a newer claim of its job
// took its place, stops its fence timer and releases its place in the flow
// control. p.mu is held.
func (p *Pool) removeLocked(r *run) {
	if r.fence != nil {
		r.fence.Stop()
	}
	if r.held {
		r.held = false
		p.flow.Released(r.job)
	}
	if p.running[r.job.ID] == r {
		delete(p.running, r.job.ID)
	}
}
