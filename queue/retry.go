package queue

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"time"
)

// RetryPolicy says how long to wait before the next attempt of a job that
// failed with a transient error.
type RetryPolicy interface {
	// NextRetry returns the wait after attempt attempts (1 after the first).
	NextRetry(attempt int) time.Duration
}

// Backoff is the default RetryPolicy: exponential backoff with jitter. The
// ceiling for attempt n is Base·2^(n-1), capped at Max, and the wait is drawn
// uniformly between half the ceiling and the ceiling, so a hundred jobs that
// failed together in an outage do not all retry in the same second.
type Backoff struct {
	// Base is the ceiling after the first attempt. Default: 2s.
	Base time.Duration
	// Max caps the ceiling. Default: 15m.
	Max time.Duration
	// Rand returns a number in [0, 1); tests inject a fixed one.
	// Default: math/rand/v2's Float64.
	Rand func() float64
}

// Default Backoff settings.
const (
	DefaultBackoffBase = 2 * time.Second
	DefaultBackoffMax  = 15 * time.Minute
)

// NextRetry implements RetryPolicy.
func (b Backoff) NextRetry(attempt int) time.Duration {
	base := cmp.Or(b.Base, DefaultBackoffBase)
	ceiling := cmp.Or(b.Max, DefaultBackoffMax)
	random := b.Rand
	if random == nil {
		random = rand.Float64
	}
	// Double until the cap instead of shifting by attempt-1, which would
	// overflow for large attempt counts.
	d := base
	for i := 1; i < attempt && d < ceiling; i++ {
		d *= 2
	}
	d = min(d, ceiling)
	half := d / 2
	return half + time.Duration(random()*float64(d-half))
}

// Default decision settings, shared by Decider and PoolConfig.
const (
	DefaultMaxAttempts   = 12
	DefaultMaxRetryAfter = time.Hour
)

// Decider turns the result of one attempt into the Completion that Finish
// records. The zero value uses the defaults.
type Decider struct {
	// MaxAttempts is the number of attempts after which a failing job is
	// parked as dead. With the default Backoff, the 11 waits between 12
	// attempts add up to between about 24 and 47 minutes: an upstream down for
	// longer needs a replay, or a larger MaxAttempts. Default: 12.
	MaxAttempts int
	// Retry spaces transient failures. Default: Backoff{}.
	Retry RetryPolicy
	// MaxRetryAfter caps a wait requested through RetryAfter, so an upstream
	// cannot park a job for a week with one header. Default: 1h.
	MaxRetryAfter time.Duration
}

// Decide returns the completion of job's current attempt, which ended with
// err at now: done for nil; dead for a Permanent error or when the attempt
// budget is spent; otherwise pending, due after the longer of the backoff and
// the requested Retry-After (capped by MaxRetryAfter). Started and Duration
// are left for the caller.
func (d Decider) Decide(job *Job, err error, now time.Time) Completion {
	c := Completion{JobID: job.ID, Owner: job.LeaseOwner, Fence: job.Fence, Now: now}
	// The budget and the backoff start again at a replay.
	attempt := job.Attempt - job.ReplayBase
	switch {
	case err == nil:
		c.Status = StatusDone
		return c
	case IsPermanent(err):
		c.Status = StatusDead
	case attempt >= cmp.Or(d.MaxAttempts, DefaultMaxAttempts):
		c.Status = StatusDead
	default:
		c.Status = StatusPending
		retry := d.Retry
		if retry == nil {
			retry = Backoff{}
		}
		wait := retry.NextRetry(max(attempt, 1))
		if after, ok := RetryAfterOf(err); ok {
			wait = max(wait, min(after, cmp.Or(d.MaxRetryAfter, DefaultMaxRetryAfter)))
		}
		c.RunAt = now.Add(wait)
	}
	c.Error = err.Error()
	return c
}

// PanicError is the error a handler's recovered panic becomes. It is
// transient: the job is retried, and a handler that panics every time ends
// dead after MaxAttempts like any other failure.
type PanicError struct {
	Value any    // what the handler panicked with
	Stack []byte // the handler goroutine's stack, for logs; not stored with the job
}

// Error returns the panic value's text, without the stack.
func (p *PanicError) Error() string { return fmt.Sprintf("handler panic: %v", p.Value) }
