package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/pullside"
	"github.com/caddywebhook/caddywebhook/queue"
)

// An event that no --forward-to route takes and no default gets is held:
// the listener keeps its claim, extending the lease, and hands it back,
// uncharged, when it stops. Handing it back at once would not do: it would
// be due at once, and this listener, asking for the oldest due jobs,
// would claim it again and again, a loop that charges nothing and does
// nothing. Held, it waits in the queue's "running" count for the
// listener's restart with a route for it; in the meantime no other
// consumer of the target gets it either, which is why every listener of
// one target should have the same routes, or a default. A held claim
// costs no worker: the pool never sees the job.
//
// maxHeld bounds what one listener holds. Past it the listener claims
// nothing more, routed or not, and says so: all the target's events wait
// in the queue, not in the listener's memory, until it is restarted. A
// variable only so that a test can reach it with a few events.
var maxHeld = maxLeases

// heldClaim is one held job.
type heldClaim struct {
	claim queue.Claimed
	job   ClaimedJob // without its payload
}

// holdState is the listener's held claims, and the goroutine that
// extends their leases.
type holdState struct {
	mu      sync.Mutex
	claims  []heldClaim
	full    bool          // maxHeld reached: claims stop
	lease   time.Duration // the server's lease, for the extension's pace
	started bool
	quit    chan struct{} // closed by releaseHeld: the extending goroutine ends
	done    chan struct{} // closed when the extending goroutine ends
}

// unrouted takes the jobs of a claim that no destination takes out of
// jobs, holds them, and returns the rest; past maxHeld it hands them back.
func (l *listener) unrouted(jobs []ClaimedJob, lease time.Duration) []ClaimedJob {
	kept := jobs[:0:0]
	var back []queue.Claimed
	for _, j := range jobs {
		if l.destinationFor(j.EventType) != nil {
			kept = append(kept, j)
			continue
		}
		if !l.hold(j, lease) {
			back = append(back, queue.Claimed{ID: j.ID, Fence: j.Fence})
		}
	}
	if len(back) > 0 {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(l.stop), handBackTimeout)
		defer cancel()
		_ = l.handBack(ctx, back)
	}
	return kept
}

// hold keeps the claim of j, which no destination takes, and prints its
// line; false when the listener holds maxHeld already.
func (l *listener) hold(j ClaimedJob, lease time.Duration) bool {
	h := &l.held
	h.mu.Lock()
	if len(h.claims) >= maxHeld {
		first := !h.full
		h.full = true
		h.mu.Unlock()
		if first {
			l.logf("holding %d events of %s that no --forward-to route takes: claiming no more until listen restarts with a route or a default for them",
				maxHeld, l.cfg.Target)
		}
		return false
	}
	j.Payload = nil
	h.claims = append(h.claims, heldClaim{claim: queue.Claimed{ID: j.ID, Fence: j.Fence}, job: j})
	h.lease = lease
	if !h.started {
		h.started = true
		h.quit, h.done = make(chan struct{}), make(chan struct{})
		go l.extendHeld()
	}
	h.mu.Unlock()
	l.line(&queue.Job{Source: j.Source, Target: j.Target, EventType: j.EventType, DeliveryID: j.DeliveryID}, "held", 0,
		fmt.Sprintf("no --forward-to route takes event type %q and there is no default: held until listen stops, then handed back uncharged; "+
			"restart listen with a route or a default for it", j.EventType))
	return true
}

// errHoldFull is the claim's error while the listener, holding maxHeld
// claims, stops.
var errHoldFull = errors.New("listen: holding the most events no route takes; claiming no more")

// holdFull returns, while the listener holds maxHeld claims, a channel
// closed when it stops (releaseHeld); nil otherwise.
func (l *listener) holdFull() <-chan struct{} {
	l.held.mu.Lock()
	defer l.held.mu.Unlock()
	if !l.held.full {
		return nil
	}
	return l.held.quit
}

// extendHeld extends the held leases every third of the lease until
// releaseHeld; a claim the server no longer holds is dropped from the
// hold with a line, as the pool's lost leases are.
func (l *listener) extendHeld() {
	defer close(l.held.done)
	for {
		l.held.mu.Lock()
		pace, quit := l.held.lease/3, l.held.quit
		l.held.mu.Unlock()
		t := time.NewTimer(pace)
		select {
		case <-quit:
			t.Stop()
			return
		case <-t.C:
		}
		l.held.mu.Lock()
		claims := make([]queue.Claimed, len(l.held.claims))
		for i, c := range l.held.claims {
			claims[i] = c.claim
		}
		l.held.mu.Unlock()
		for chunk := range slices.Chunk(claims, maxLeases) {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(l.stop), handBackTimeout)
			resp, err := l.api.extend(ctx, chunk)
			cancel()
			if err != nil {
				// The next round tries again, within the lease.
				continue
			}
			for _, id := range resp.Lost {
				l.dropHeld(id)
			}
		}
	}
}

// dropHeld forgets the held claim of job id, whose lease was lost.
func (l *listener) dropHeld(id int64) {
	l.held.mu.Lock()
	i := slices.IndexFunc(l.held.claims, func(c heldClaim) bool { return c.claim.ID == id })
	if i < 0 {
		l.held.mu.Unlock()
		return
	}
	c := l.held.claims[i]
	l.held.claims = slices.Delete(l.held.claims, i, i+1)
	l.held.full = false
	l.held.mu.Unlock()
	l.line(&queue.Job{Source: c.job.Source, Target: c.job.Target, EventType: c.job.EventType, DeliveryID: c.job.DeliveryID},
		"lease lost", 0, "it was held: the server may hand it to another consumer")
}

// releaseHeld hands every held claim back, uncharged, once the extending
// goroutine has ended; the stop's line counts them.
func (l *listener) releaseHeld(ctx context.Context) {
	l.held.mu.Lock()
	quit, done := l.held.quit, l.held.done
	l.held.started = true // no extending goroutine from now on
	l.held.mu.Unlock()
	if quit != nil {
		close(quit)
		<-done
	}
	l.held.mu.Lock()
	claims := make([]queue.Claimed, len(l.held.claims))
	for i, c := range l.held.claims {
		claims[i] = c.claim
	}
	l.held.claims = nil
	l.held.mu.Unlock()
	if len(claims) > 0 {
		_ = l.handBack(ctx, claims)
	}
}

// handBack answers handed_back for claims, in requests of at most
// maxLeases, and counts them for the stop's line while the listener stops.
func (l *listener) handBack(ctx context.Context, claims []queue.Claimed) error {
	var failed error
	for chunk := range slices.Chunk(claims, maxLeases) {
		acks := make([]Ack, len(chunk))
		for i, c := range chunk {
			acks[i] = Ack{ID: c.ID, Fence: c.Fence, Outcome: string(pullside.AckHandedBack)}
		}
		hctx, cancel := context.WithTimeout(ctx, handBackTimeout)
		_, err := l.api.ack(hctx, acks)
		cancel()
		l.mu.Lock()
		if l.stopping {
			if err != nil {
				l.unhanded += len(chunk)
				l.handErr = err
			} else {
				l.handed += len(chunk)
			}
		}
		l.mu.Unlock()
		if err != nil {
			failed = err
		}
	}
	return failed
}
