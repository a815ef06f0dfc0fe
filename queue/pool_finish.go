package queue

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"
)

// finishing is a completion waiting in the batch.
type finishing struct {
	r   *run
	c   Completion
	err error
}

// finishChunk bounds the completions one Finish call records: however far
// Finish falls behind, no statement holds more row locks than this, nor
// runs for long. (One Finish of 6,897 rows on PostgreSQL took seconds and
// deadlocked against a lease extension of the same rows in another order.)
const finishChunk = 256

// At low rates each completion would be a Finish of its own: one
// statement and one commit a job (on PostgreSQL 2.2 jobs a Finish at 1,000
// jobs/s). So a Finish is sent at most every finishGather, unless a pool's
// worth of completions (workers + buffer, at most finishGatherMax) waits:
// the completions of those few milliseconds share it. The wait counts
// from when the last Finish was sent, so a pool that keeps its Finish busy
// (a backlog) sends each batch as soon as the last one returns.
const (
	finishGather    = 5 * time.Millisecond
	finishGatherMax = 32
)

// Retries of a Finish that failed: the first after finishRetryMin,
// doubling up to finishRetryMax.
const (
	finishRetryMin = 50 * time.Millisecond
	finishRetryMax = 5 * time.Second
)

// finish queues f for the next Finish call. The first worker to find no
// Finish in flight sends the queue and keeps sending whatever arrived
// meanwhile: completions that arrive together share one call, and a lone
// one waits at most finishGather for company (gatherLocked). The caller
// counted f in p.finishing.
func (p *Pool) finish(ctx context.Context, f finishing) {
	p.mu.Lock()
	p.finQ = append(p.finQ, f)
	if p.flushing {
		p.mu.Unlock()
		return
	}
	p.flushing = true
	p.mu.Unlock()
	p.flush(ctx)
}

// flush sends the queued completions in chunks of at most finishChunk, in
// job id order (the order every fenced write of the stores takes its row
// locks in), until none is left. A Finish that fails is retried with
// backoff, its runs kept and their leases extended meanwhile: a result
// that is dropped leaves its job leased, to run again once the lease ends,
// a second delivery of a job that succeeded. A run whose lease is lost
// meanwhile (an extension found its claim gone) is dropped unrecorded, as
// are all of them once Stop's grace has run out or the store is closed.
func (p *Pool) flush(ctx context.Context) {
	wait := finishRetryMin
	for {
		p.mu.Lock()
		if len(p.finQ) == 0 {
			p.flushing = false
			p.mu.Unlock()
			return
		}
		if d := p.gatherLocked(); d > 0 {
			p.mu.Unlock()
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-p.giveUp:
				t.Stop()
			}
			p.mu.Lock()
		}
		batch := p.takeFinishLocked()
		p.lastFinish = time.Now()
		p.mu.Unlock()

		cs := make([]Completion, len(batch))
		for i, f := range batch {
			cs[i] = f.c
		}
		recorded, err := p.store.Finish(ctx, cs)
		if err != nil {
			p.obs.StoreError("finish", err)
			// A closed store answers no retry: the process is going.
			if !errors.Is(err, ErrClosed) && p.retryFinish(batch, wait) {
				wait = min(2*wait, finishRetryMax)
				continue
			}
			recorded = nil
		} else {
			wait = finishRetryMin
		}
		p.mu.Lock()
		for i, f := range batch {
			p.finishing--
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

// gatherLocked returns how long the next Finish should wait for more
// completions: until finishGather after the last one was sent, unless a
// pool's worth already waits or the pool is stopping. p.mu is held.
func (p *Pool) gatherLocked() time.Duration {
	if len(p.finQ) >= min(p.workers+p.ahead, finishGatherMax) || p.isQuitting() {
		return 0
	}
	return time.Until(p.lastFinish.Add(finishGather))
}

// takeFinishLocked removes up to finishChunk completions from the queue,
// oldest first, and returns them in job id order. p.mu is held.
func (p *Pool) takeFinishLocked() []finishing {
	n := min(len(p.finQ), finishChunk)
	batch := slices.Clone(p.finQ[:n])
	clear(p.finQ[:n])
	p.finQ = p.finQ[n:]
	if len(p.finQ) == 0 {
		p.finQ = nil
	}
	slices.SortFunc(batch, func(a, b finishing) int { return cmp.Compare(a.c.JobID, b.c.JobID) })
	return batch
}

// retryFinish puts a batch whose Finish failed back at the head of the
// queue, less the runs whose lease is known lost (they are reported
// unrecorded at once), and waits before the next try. It reports false,
// and puts nothing back, once Stop's grace has run out: the batch is then
// dropped.
func (p *Pool) retryFinish(batch []finishing, wait time.Duration) bool {
	select {
	case <-p.giveUp:
		return false
	default:
	}
	var lost []finishing
	p.mu.Lock()
	keep := batch[:0:0]
	for _, f := range batch {
		if f.r.lost {
			p.finishing--
			p.removeLocked(f.r)
			lost = append(lost, f)
			continue
		}
		keep = append(keep, f)
	}
	p.finQ = append(keep, p.finQ...)
	p.mu.Unlock()
	if len(lost) > 0 {
		p.signalFreed()
	}
	for _, f := range lost {
		p.obs.JobFinished(f.r.job, f.c, false, f.err)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.giveUp:
	}
	return true
}

// stopRetrying ends the retries of failing Finish calls; their results are
// dropped.
func (p *Pool) stopRetrying() { p.giveUpOnce.Do(func() { close(p.giveUp) }) }
