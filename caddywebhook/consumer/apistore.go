package consumer

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/pullside"
	"github.com/caddywebhook/caddywebhook/queue"
)

// apiStore is the consumer API of a remote Caddy as the queue.Store a
// listener's pool runs over. The pool calls five methods of a Store, and
// each is a request of the API: Claim is POST …/claim (a long poll),
// ExtendLeases …/extend, Finish and HandBack …/ack, and Ready is the
// listener's own signal to claim again. The rest of queue.Store (enqueue,
// replay, stats, …) is the server's, and the embedded nil Store leaves it
// unimplemented: the pool never calls it.
//
// The pool's claims, extensions and answers carry its owner and lease;
// the server leases to the pull target whatever they say, for its own
// lease, which the pool was made with (a change replaces the pool).
type apiStore struct {
	queue.Store // nil: the pool calls none of the other methods
	l           *listener
	lease       time.Duration
	wait        time.Duration
	ready       chan struct{} // buffered 1
	// first are the jobs of the listener's first claim, which told the
	// lease: the pool's first claim takes them.
	first []ClaimedJob
	retry time.Duration // the wait before the next claim after failures, 0 after a success
}

func newAPIStore(l *listener, lease time.Duration) *apiStore {
	return &apiStore{l: l, lease: lease, wait: l.claimWait(lease), ready: make(chan struct{}, 1)}
}

// Ready implements queue.Store: after every claim, so the pool claims
// again at once while it has room; the claim itself waits on the server.
func (s *apiStore) Ready() <-chan struct{} { return s.ready }

func (s *apiStore) wake() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Claim implements queue.Store: one long poll, made only while the local
// app listens. It is not the pool's context that ends it but the
// listener's stop: the server hands back a claim whose request went away.
// After a failure it waits (doubling, jittered) before it returns, so the
// next claim is not at once; a failure no retry can help ends the listener.
func (s *apiStore) Claim(_ context.Context, p queue.ClaimParams) ([]*queue.Job, error) {
	l := s.l
	ctx := l.stop
	if s.first != nil {
		resp := ClaimResponse{Jobs: s.first}
		s.first = nil
		s.wake()
		return s.jobs(resp, p.Owner), nil
	}
	if quit := l.holdFull(); quit != nil {
		// Claimed now, a job no route takes could go nowhere (hold.go):
		// no claim until the listener stops.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-quit:
			return nil, errHoldFull
		}
	}
	if !l.waitForApp(ctx) {
		return nil, ctx.Err()
	}
	resp, err := l.api.claim(ctx, l.cfg.Target, p.Limit, s.wait)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		if isFatal(err) {
			l.fail(fmt.Errorf("listen: claim: %w", err))
			return nil, err
		}
		l.cannotClaim(err)
		s.retry = min(max(s.retry*2, retryMin), retryMax)
		sleep(ctx, jitter(s.retry))
		s.wake()
		return nil, err
	}
	s.retry = 0
	l.claimed()
	s.wake()
	if lease := time.Duration(resp.LeaseMS) * time.Millisecond; lease > 0 && lease != s.lease {
		// The pool would time these leases wrongly: back they go, and a
		// pool with the new lease claims them again.
		claims := make([]queue.Claimed, len(resp.Jobs))
		for i, j := range resp.Jobs {
			claims[i] = queue.Claimed{ID: j.ID, Fence: j.Fence}
		}
		_ = s.HandBack(context.WithoutCancel(ctx), "", claims)
		l.leaseChanged(lease)
		return nil, nil
	}
	return s.jobs(resp, p.Owner), nil
}

// jobs are the claimed jobs of resp as the pool's, less those no
// destination takes, which the listener holds (hold.go).
func (s *apiStore) jobs(resp ClaimResponse, owner string) []*queue.Job {
	resp.Jobs = s.l.unrouted(resp.Jobs, s.lease)
	jobs := make([]*queue.Job, len(resp.Jobs))
	for i, j := range resp.Jobs {
		jobs[i] = &queue.Job{
			ID: j.ID, Source: j.Source, DeliveryID: j.DeliveryID, EventType: j.EventType, Target: j.Target,
			Headers: j.Headers, Payload: j.Payload, Attempt: j.Attempt, Replays: j.Replays, Fence: j.Fence,
			LeaseOwner: owner, LeaseUntil: j.LeaseUntil, CreatedAt: j.CreatedAt,
		}
	}
	return jobs
}

// ExtendLeases implements queue.Store, in requests of at most maxLeases,
// the server's cap. A failed request fails the whole extension: the pool
// then moves no lease, and its fences cancel the deliveries in time if
// failures go on.
func (s *apiStore) ExtendLeases(ctx context.Context, p queue.ExtendParams) ([]int64, error) {
	var lost []int64
	for chunk := range slices.Chunk(p.Claims, maxLeases) {
		resp, err := s.l.api.extend(ctx, chunk)
		if err != nil {
			return nil, err
		}
		lost = append(lost, resp.Lost...)
		if lease := time.Duration(resp.LeaseMS) * time.Millisecond; lease > 0 && lease < s.lease {
			s.l.leaseChanged(lease)
		}
	}
	return lost, nil
}

// ackTimeout bounds one ack request.
const ackTimeout = 30 * time.Second

// Finish implements queue.Store: the completions the pool decided become
// answers (delivered, retry with the wait the app asked for, dead, and
// handed_back for a job the app refused or a stop cut short), sent in requests of at most
// maxLeases, again after network errors until the leases they answer for
// can have ended. The server's replies are kept for the delivery lines.
func (s *apiStore) Finish(_ context.Context, cs []queue.Completion) ([]bool, error) {
	l := s.l
	acks := make([]Ack, len(cs))
	l.mu.Lock()
	for i, c := range cs {
		a := Ack{ID: c.JobID, Fence: c.Fence, Duration: c.Duration.String()}
		switch st := l.claims[queue.Claimed{ID: c.JobID, Fence: c.Fence}]; {
		case st != nil && st.refused:
			// The app never saw it: no duration, so the server keeps
			// no history of it.
			a.Outcome, a.Duration = string(pullside.AckHandedBack), ""
		case c.HandedBack:
			// The stop cut the request short: the app may have seen it,
			// and the server's history keeps it, with its duration.
			a.Outcome = string(pullside.AckHandedBack)
		case c.Status == queue.StatusDone:
			a.Outcome = string(pullside.AckDelivered)
		case c.Status == queue.StatusDead:
			a.Outcome, a.Error = string(pullside.AckDead), c.Error
		default:
			a.Outcome, a.Error = string(pullside.AckRetry), c.Error
			if wait := c.RunAt.Sub(c.Now); wait > 0 {
				a.RetryAfter = wait.String()
			}
		}
		acks[i] = a
	}
	l.mu.Unlock()
	recorded := make([]bool, len(cs))
	deadline := time.Now().Add(s.lease)
	for start := 0; start < len(acks); start += maxLeases {
		chunk := acks[start:min(start+maxLeases, len(acks))]
		resp, err := s.ack(chunk, deadline)
		if err != nil {
			for _, a := range chunk {
				l.logf("cannot answer for job %d: %v", a.ID, redactURL(err))
			}
			return recorded, err
		}
		l.mu.Lock()
		for k, r := range resp.Results {
			recorded[start+k] = r.Recorded
			if st := l.claims[queue.Claimed{ID: chunk[k].ID, Fence: chunk[k].Fence}]; st != nil {
				st.reply = &r
			}
		}
		l.mu.Unlock()
	}
	return recorded, nil
}

// ack sends one ack request, again after network errors and 5xx while the
// next try would come before deadline and the listener runs.
func (s *apiStore) ack(acks []Ack, deadline time.Time) (AckResponse, error) {
	retry := retryMin
	for {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(s.l.stop), ackTimeout)
		resp, err := s.l.api.ack(ctx, acks)
		cancel()
		if err == nil && len(resp.Results) != len(acks) {
			err = fmt.Errorf("ack: %d answers for %d results", len(resp.Results), len(acks))
		}
		if err == nil || isFatal(err) || time.Now().Add(retry).After(deadline) {
			return resp, err
		}
		if !sleep(s.l.stop, jitter(retry)) {
			return resp, err
		}
		retry = min(retry*2, retryMax)
	}
}

// HandBack implements queue.Store: each claim answered handed_back, in
// requests of at most maxLeases. The stop's hand-backs are counted for
// its line.
func (s *apiStore) HandBack(ctx context.Context, _ string, claims []queue.Claimed) error {
	return s.l.handBack(ctx, claims)
}

// Interface guards
var (
	_ queue.Store    = (*apiStore)(nil)
	_ queue.Observer = (*listener)(nil)
)
