package caddywebhook

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/pullside"
	"github.com/caddywebhook/caddywebhook/queue"
)

// Pull targets. The jobs of a target that implements PullTarget are never
// claimed by the app's pool: consumers claim them over HTTP, through a
// webhook_consumer handler, with the pool's own semantics (a lease, a fence
// per claim, the attempt counted at claim, hand-back uncharged, the
// target's backoff and attempt budget, dead letters). Everything else a
// route has holds for them unchanged: events, filters, ordering keys,
// pauses, replay, resend, stats and notifications. The pool's claims never
// name their routes, so while no consumer asks they cost the claim path
// nothing, like the routes of a paused target.

// PullTarget is a Target whose jobs consumers claim (webhook.targets.pull).
// Its Deliver is never called by the pool.
type PullTarget interface {
	Target
	// PulledByConsumers marks the target; it does nothing.
	PulledByConsumers()
}

// pullOwner is the lease owner of the claims that consumers of target make:
// the same in every process that shares the store, so that any of them can
// extend or answer for a claim made through another. The fence token tells
// one consumer's claim from another's.
func pullOwner(target string) string { return "pull:" + target }

// Errors of the pull side. The consumer endpoint needs neither by name: it
// answers any error of App.Pull with 503, and asks Has before a claim.
var (
	// errNoPullTarget: the running config has no pull target of that name.
	errNoPullTarget = errors.New("no pull target of that name in the running config")
	// errNotRunning: the webhook app is not running (it stopped, or a
	// reload replaced it); the consumer should ask again.
	errNotRunning = errors.New("webhook app not running")
)

// pullSide hands out the jobs of one running config's pull targets to
// consumers: the pullside.Side the consumer endpoint gets through
// pullside.Of, at request time, since a reload replaces it.
type pullSide struct {
	store    queue.Store
	lease    time.Duration
	poll     time.Duration
	routes   map[string][]queue.Route // the routes of each pull target
	deciders map[queue.Route]queue.Decider
	shapers  map[queue.Route]jobShaper // the routes whose jobs a transform reshapes
	paused   func(queue.Route) bool
	obs      queue.Observer
	redact   *redactor   // takes the config's secrets out of attempts' errors, as the pool's handler does
	wakers   *pullWakers // the shared store's: the consumers waiting for jobs
	now      func() time.Time
	stopped  chan struct{} // closed when the app stops
	stopOnce sync.Once
}

// pullSideOf returns the pull side of app, a running *App, or
// errNotRunning.
func pullSideOf(app any) (pullside.Side, error) {
	a, ok := app.(*App)
	if !ok {
		return nil, errNotRunning
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.live == nil || a.live.pull == nil {
		return nil, errNotRunning
	}
	return a.live.pull, nil
}

// wrappedTarget is a Target that wraps another, as a content rule's
// transform wraps the target it reshapes jobs for: a wrapped pull target
// is still a pull target.
type wrappedTarget interface {
	Target
	unwrapTarget() Target
}

// jobShaper is a wrapper that reshapes a job as its Deliver would before
// the target it wraps sees it (a transform): a consumer is handed the job
// so reshaped. An error is permanent: the same stored job fails the same
// way every time.
type jobShaper interface {
	shapeJob(job *queue.Job) (*queue.Job, error)
}

// isPull reports whether t is a pull target, or wraps one.
func isPull(t Target) bool {
	for t != nil {
		if _, ok := t.(PullTarget); ok {
			return true
		}
		w, ok := t.(wrappedTarget)
		if !ok {
			return false
		}
		t = w.unwrapTarget()
	}
	return false
}

// pullRoutes splits routes into those of pull targets, by target, and the
// rest, which the pool claims.
func pullRoutes(routes []queue.Route, targets map[queue.Route]Target) (pulled map[string][]queue.Route, pooled []queue.Route) {
	pulled = make(map[string][]queue.Route)
	for _, r := range routes {
		if isPull(targets[r]) {
			pulled[r.Target] = append(pulled[r.Target], r)
			continue
		}
		pooled = append(pooled, r)
	}
	return pulled, pooled
}

// newPull builds the pull side of a starting app over the routes of its
// pull targets, by target, leaving out the routes paused reports.
func (a *App) newPull(d *delivery, routes map[string][]queue.Route, paused func(queue.Route) bool) *pullSide {
	base := queue.Decider{MaxAttempts: a.MaxAttempts, MaxRetryAfter: time.Duration(a.MaxRetryAfter)}
	if a.Backoff != nil {
		base.Retry = queue.Backoff{Base: time.Duration(a.Backoff.Base), Max: time.Duration(a.Backoff.Max)}
	}
	deciders := make(map[queue.Route]queue.Decider)
	shapers := make(map[queue.Route]jobShaper)
	for _, rs := range routes {
		for _, r := range rs {
			if s, ok := d.targets[r].(jobShaper); ok {
				shapers[r] = s
			}
			dec := base
			if d.policyFor != nil {
				retry, maxAttempts := d.policyFor(&queue.Job{Source: r.Source, Target: r.Target})
				if retry != nil {
					dec.Retry = retry
				}
				if maxAttempts != 0 {
					dec.MaxAttempts = maxAttempts
				}
			}
			deciders[r] = dec
		}
	}
	p := &pullSide{
		store:    d.store,
		lease:    time.Duration(a.Lease),
		poll:     time.Duration(a.PollInterval),
		routes:   routes,
		deciders: deciders,
		shapers:  shapers,
		paused:   paused,
		obs:      d.obs,
		redact:   d.redact,
		now:      time.Now,
		stopped:  make(chan struct{}),
		wakers:   &d.store.wakers,
	}
	if p.lease == 0 {
		p.lease = queue.DefaultLease
	}
	if p.poll == 0 {
		p.poll = queue.DefaultPollInterval
	}
	return p
}

// stop ends the pull side: waiting claims answer at once.
func (p *pullSide) stop() { p.stopOnce.Do(func() { close(p.stopped) }) }

// Lease is how long a consumer's claim holds without an extension: the
// app's lease.
func (p *pullSide) Lease() time.Duration { return p.lease }

// PollInterval is how often a waiting claim asks the store again when
// nothing in this process signalled new work: work enqueued by another
// instance sharing the store, or a retry come due.
func (p *pullSide) PollInterval() time.Duration { return p.poll }

// Targets returns the names of the pull targets of the running config.
func (p *pullSide) Targets() []string { return slices.Sorted(maps.Keys(p.routes)) }

// Has reports whether target is a pull target of the running config.
func (p *pullSide) Has(target string) bool { _, ok := p.routes[target]; return ok }

// Stopped is closed when the app stops or a reload replaces it.
func (p *pullSide) Stopped() <-chan struct{} { return p.stopped }

// Ready returns a channel that is closed when jobs of target may have
// become claimable in this process: an event enqueued for it, a replay, a
// resend, a hand-back. Take it before a claim that finds nothing, then
// wait on it, the poll interval, or Stopped.
func (p *pullSide) Ready(target string) <-chan struct{} {
	return p.wakers.wait(target)
}

// Claim leases up to limit claimable jobs of target to its consumers, for
// the app's lease, counting an attempt on each. The routes of target that
// are paused are left out.
func (p *pullSide) Claim(ctx context.Context, target string, limit int) ([]*queue.Job, error) {
	routes, ok := p.routes[target]
	if !ok {
		return nil, errNoPullTarget
	}
	if p.paused != nil {
		routes = slices.DeleteFunc(slices.Clone(routes), p.paused)
	}
	if len(routes) == 0 {
		return nil, nil
	}
	// Not cancelled with the request: a claim that committed after the
	// consumer went away is handed back below rather than left leased to
	// nobody until its lease runs out.
	wctx := context.WithoutCancel(ctx)
	jobs, err := p.store.Claim(wctx, queue.ClaimParams{
		Owner:  pullOwner(target),
		Limit:  limit,
		Lease:  p.lease,
		Routes: routes,
	})
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	if ctx.Err() != nil && len(jobs) > 0 {
		cs := make([]queue.Claimed, len(jobs))
		for i, j := range jobs {
			cs[i] = j.Claimed()
		}
		if err := p.store.HandBack(wctx, pullOwner(target), cs); err != nil {
			p.obs.StoreError("hand back", err)
		}
		return nil, ctx.Err()
	}
	for _, j := range jobs {
		p.obs.JobStarted(j)
	}
	if len(p.shapers) > 0 || slices.ContainsFunc(jobs, unreadable) {
		return p.shape(ctx, jobs)
	}
	return jobs, nil
}

// unreadable reports whether j's event could not be read (Job.ReadErr):
// a key its value is sealed under is not listed.
func unreadable(j *queue.Job) bool { return j.ReadErr != nil }

// shape reshapes the claimed jobs of the routes with a transform. A job
// whose transform fails goes dead at once with the error, as it would on
// its way to any other target, and is not handed out; so does a job whose
// event could not be read, which the pool would never deliver either.
func (p *pullSide) shape(ctx context.Context, jobs []*queue.Job) ([]*queue.Job, error) {
	out := jobs[:0:0]
	var failed []*queue.Job
	var cs []queue.Completion
	var errs []error
	now := p.now()
	for _, j := range jobs {
		route := queue.Route{Source: j.Source, Target: j.Target}
		s, ok := p.shapers[route]
		var err error
		switch {
		case j.ReadErr != nil:
			err = j.ReadErr
		case !ok:
			out = append(out, j)
			continue
		default:
			var shaped *queue.Job
			if shaped, err = s.shapeJob(j); err == nil {
				out = append(out, shaped)
				continue
			}
		}
		err = p.redact.error(queue.Permanent(err))
		c := p.deciders[route].Decide(j, err, now)
		c.Started = now
		failed, cs, errs = append(failed, j), append(cs, c), append(errs, err)
	}
	if len(cs) > 0 {
		recorded, err := p.store.Finish(context.WithoutCancel(ctx), cs)
		if err != nil {
			p.obs.StoreError("finish", err)
			return out, nil // their leases run out; the next claim tries again
		}
		for i, j := range failed {
			p.obs.JobFinished(j, cs[i], recorded[i], errs[i])
		}
	}
	return out, nil
}

// held reads the claims still held of the pull targets in allowed, by id.
// A claim of another target is left out as if it were not held: a
// consumer learns nothing of the jobs it may not consume.
func (p *pullSide) held(ctx context.Context, allowed []string, claims []queue.Claimed) (map[int64]*queue.Job, error) {
	jobs, err := p.store.Held(ctx, claims)
	if err != nil {
		return nil, fmt.Errorf("read claims: %w", err)
	}
	out := make(map[int64]*queue.Job, len(jobs))
	for _, j := range jobs {
		if p.Has(j.Target) && slices.Contains(allowed, j.Target) && j.LeaseOwner == pullOwner(j.Target) {
			out[j.ID] = j
		}
	}
	return out, nil
}

// Extend moves the leases of the claims still held, of the pull targets in
// allowed, to the app's lease from now, and returns the ids it could not
// extend: those claims are lost, and the consumer must stop working on
// them.
func (p *pullSide) Extend(ctx context.Context, allowed []string, claims []queue.Claimed) (lost []int64, err error) {
	held, err := p.held(ctx, allowed, claims)
	if err != nil {
		return nil, err
	}
	byTarget := make(map[string][]queue.Claimed)
	for _, c := range claims {
		j, ok := held[c.ID]
		if !ok || j.Fence != c.Fence {
			lost = append(lost, c.ID)
			continue
		}
		byTarget[j.Target] = append(byTarget[j.Target], c)
	}
	for _, target := range slices.Sorted(maps.Keys(byTarget)) {
		l, err := p.store.ExtendLeases(ctx, queue.ExtendParams{Owner: pullOwner(target), Claims: byTarget[target], Lease: p.lease})
		if err != nil {
			return nil, fmt.Errorf("extend leases: %w", err)
		}
		lost = append(lost, l...)
	}
	return lost, nil
}

// ackError is the attempt's error a consumer's answer stands for: nil
// when done, transient (with the wait it asked for) for a retry, permanent
// when dead.
func ackError(a pullside.Ack) error {
	msg := cmp.Or(a.Error, "consumer answered "+string(a.Outcome))
	switch a.Outcome {
	case pullside.AckRetry:
		if a.RetryAfter > 0 {
			return queue.RetryAfter(errors.New(msg), a.RetryAfter)
		}
		return errors.New(msg)
	case pullside.AckDead:
		return queue.Permanent(errors.New(msg))
	}
	return nil
}

// Answer records the answers of a consumer allowed the pull targets in
// allowed, each fenced as the pool's own Finish and HandBack are: an
// answer for a claim no longer held changes nothing. Results are in the
// order of acks.
func (p *pullSide) Answer(ctx context.Context, allowed []string, acks []pullside.Ack) ([]pullside.AckReply, error) {
	claims := make([]queue.Claimed, len(acks))
	for i, a := range acks {
		claims[i] = a.Claim
	}
	held, err := p.held(ctx, allowed, claims)
	if err != nil {
		return nil, err
	}
	results := make([]pullside.AckReply, len(acks))
	var cs []queue.Completion
	var finished []int // indexes into acks of cs
	var errs []error   // the attempts' errors, for the observer
	handBack := make(map[string][]int)
	now := p.now()
	for i, a := range acks {
		results[i].ID = a.Claim.ID
		j, ok := held[a.Claim.ID]
		if !ok || j.Fence != a.Claim.Fence {
			continue
		}
		if a.Outcome == pullside.AckHandedBack {
			if a.Duration <= 0 {
				// Never reached the consumer's app: no history.
				handBack[j.Target] = append(handBack[j.Target], i)
				continue
			}
			// A delivery the consumer's stop cut short: its app may
			// have seen it, so the history keeps it, uncharged.
			d := a.Duration
			cs = append(cs, queue.Completion{
				JobID: j.ID, Owner: j.LeaseOwner, Fence: j.Fence, Now: now,
				Status: queue.StatusPending, RunAt: now, HandedBack: true,
				Error:   "handed back: the consumer's stop cut the delivery short; not charged",
				Started: now.Add(-d), Duration: d,
			})
			finished = append(finished, i)
			errs = append(errs, nil)
			continue
		}
		attemptErr := p.redact.error(ackError(a))
		c := p.deciders[queue.Route{Source: j.Source, Target: j.Target}].Decide(j, attemptErr, now)
		c.Started, c.Duration = now.Add(-max(a.Duration, 0)), max(a.Duration, 0)
		cs = append(cs, c)
		finished = append(finished, i)
		errs = append(errs, attemptErr)
	}
	if len(cs) > 0 {
		recorded, err := p.store.Finish(ctx, cs)
		if err != nil {
			p.obs.StoreError("finish", err)
			return nil, fmt.Errorf("finish jobs: %w", err)
		}
		// A job done or dead may let the next of its ordering key go.
		woken := make(map[string]bool)
		for k, i := range finished {
			j := held[acks[i].Claim.ID]
			if cs[k].HandedBack {
				if recorded[k] {
					p.obs.JobHandedBack(j)
					results[i].Recorded, results[i].Status = true, queue.StatusPending
				}
				continue
			}
			if recorded[k] && cs[k].Status != queue.StatusPending && !woken[j.Target] {
				woken[j.Target] = true
				p.wakers.wake(j.Target)
			}
			p.obs.JobFinished(j, cs[k], recorded[k], errs[k])
			if recorded[k] {
				results[i].Recorded, results[i].Status = true, cs[k].Status
				if cs[k].Status == queue.StatusPending {
					results[i].RunAt = cs[k].RunAt
				}
			}
		}
	}
	for _, target := range slices.Sorted(maps.Keys(handBack)) {
		idx := handBack[target]
		cs := make([]queue.Claimed, len(idx))
		for k, i := range idx {
			cs[k] = acks[i].Claim
		}
		if err := p.store.HandBack(ctx, pullOwner(target), cs); err != nil {
			p.obs.StoreError("hand back", err)
			return nil, fmt.Errorf("hand back jobs: %w", err)
		}
		for _, i := range idx {
			p.obs.JobHandedBack(held[acks[i].Claim.ID])
			results[i].Recorded, results[i].Status = true, queue.StatusPending
		}
	}
	return results, nil
}
