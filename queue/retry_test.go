package queue_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

func TestBackoffBounds(t *testing.T) {
	tests := []struct {
		name    string
		b       queue.Backoff
		attempt int
		ceiling time.Duration // d: the wait must lie in [d/2, d]
	}{
		{"default/first attempt", queue.Backoff{}, 1, 2 * time.Second},
		{"default/second doubles", queue.Backoff{}, 2, 4 * time.Second},
		{"default/fifth", queue.Backoff{}, 5, 32 * time.Second},
		{"default/ninth", queue.Backoff{}, 9, 512 * time.Second},
		{"default/tenth hits the 15m cap", queue.Backoff{}, 10, 15 * time.Minute},
		{"default/huge attempt stays capped", queue.Backoff{}, 10_000, 15 * time.Minute},
		{"attempt 0 counts as the first", queue.Backoff{}, 0, 2 * time.Second},
		{"custom base and cap", queue.Backoff{Base: 100 * time.Millisecond, Max: time.Second}, 4, 800 * time.Millisecond},
		{"custom cap reached", queue.Backoff{Base: 100 * time.Millisecond, Max: time.Second}, 5, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, r := range []float64{0, 0.5, 0.999999} {
				b := tt.b
				b.Rand = func() float64 { return r }
				got := b.NextRetry(tt.attempt)
				if got < tt.ceiling/2 || got > tt.ceiling {
					t.Errorf("NextRetry(%d) with rand %v = %s, want in [%s, %s]", tt.attempt, r, got, tt.ceiling/2, tt.ceiling)
				}
			}
			// The extremes of the random draw reach the extremes of the range.
			b := tt.b
			b.Rand = func() float64 { return 0 }
			if got := b.NextRetry(tt.attempt); got != tt.ceiling/2 {
				t.Errorf("NextRetry(%d) with rand 0 = %s, want %s", tt.attempt, got, tt.ceiling/2)
			}
		})
	}
}

func TestBackoffDefaultRandSpreads(t *testing.T) {
	b := queue.Backoff{}
	seen := map[time.Duration]bool{}
	for range 100 {
		got := b.NextRetry(3)
		if got < 4*time.Second || got > 8*time.Second {
			t.Fatalf("NextRetry(3) = %s, want in [4s, 8s]", got)
		}
		seen[got] = true
	}
	if len(seen) < 50 {
		t.Errorf("100 draws gave %d distinct waits, want jitter", len(seen))
	}
}

// fixedRetry waits the same time after every attempt.
type fixedRetry time.Duration

func (f fixedRetry) NextRetry(int) time.Duration { return time.Duration(f) }

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	transient := errors.New("upstream 503")
	d := queue.Decider{MaxAttempts: 5, Retry: fixedRetry(time.Minute), MaxRetryAfter: time.Hour}
	tests := []struct {
		name    string
		attempt int
		err     error
		status  queue.Status
		runAt   time.Time // for pending
		errText string
	}{
		{"nil is done", 1, nil, queue.StatusDone, time.Time{}, ""},
		{"nil on the last attempt is done", 5, nil, queue.StatusDone, time.Time{}, ""},
		{"transient retries after the backoff", 1, transient, queue.StatusPending, now.Add(time.Minute), "upstream 503"},
		{"permanent is dead at once", 1, queue.Permanent(errors.New("400 bad request")), queue.StatusDead, time.Time{}, "400 bad request"},
		{"wrapped permanent is dead", 1, fmt.Errorf("deliver: %w", queue.Permanent(errors.New("400"))), queue.StatusDead, time.Time{}, "deliver: 400"},
		{"max attempts reached is dead", 5, transient, queue.StatusDead, time.Time{}, "upstream 503"},
		{"past max attempts is dead", 6, transient, queue.StatusDead, time.Time{}, "upstream 503"},
		{"one before max retries", 4, transient, queue.StatusPending, now.Add(time.Minute), "upstream 503"},
		{"retry-after longer than backoff wins", 1, queue.RetryAfter(transient, 10*time.Minute), queue.StatusPending, now.Add(10 * time.Minute), "upstream 503"},
		{"retry-after shorter than backoff is ignored", 1, queue.RetryAfter(transient, time.Second), queue.StatusPending, now.Add(time.Minute), "upstream 503"},
		{"retry-after capped by MaxRetryAfter", 1, queue.RetryAfter(transient, 48*time.Hour), queue.StatusPending, now.Add(time.Hour), "upstream 503"},
		{"retry-after on the last attempt is dead", 5, queue.RetryAfter(transient, time.Minute), queue.StatusDead, time.Time{}, "upstream 503"},
		{"panic is transient", 1, &queue.PanicError{Value: "boom"}, queue.StatusPending, now.Add(time.Minute), "handler panic: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := &queue.Job{ID: 42, Attempt: tt.attempt, LeaseOwner: "pool-a", Fence: 7}
			c := d.Decide(job, tt.err, now)
			if c.JobID != 42 || c.Owner != "pool-a" || c.Fence != 7 || !c.Now.Equal(now) {
				t.Errorf("Decide identity = (%d, %q, fence %d, %s), want (42, pool-a, fence 7, %s)", c.JobID, c.Owner, c.Fence, c.Now, now)
			}
			if c.Status != tt.status {
				t.Errorf("Status = %s, want %s", c.Status, tt.status)
			}
			if !c.RunAt.Equal(tt.runAt) {
				t.Errorf("RunAt = %s, want %s", c.RunAt, tt.runAt)
			}
			if c.Error != tt.errText {
				t.Errorf("Error = %q, want %q", c.Error, tt.errText)
			}
		})
	}
}

// TestDecideAfterReplay: attempts keep counting across replays, and the
// budget and the backoff count only those since the last replay.
func TestDecideAfterReplay(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	transient := errors.New("upstream 503")
	d := queue.Decider{MaxAttempts: 3, Retry: queue.Backoff{Base: time.Minute, Rand: func() float64 { return 1 }}}
	tests := []struct {
		name          string
		attempt, base int
		status        queue.Status
		runAt         time.Time
	}{
		{"first attempt after a replay retries, first backoff", 6, 5, queue.StatusPending, now.Add(time.Minute)},
		{"second after a replay, doubled backoff", 7, 5, queue.StatusPending, now.Add(2 * time.Minute)},
		{"budget spent since the replay", 8, 5, queue.StatusDead, time.Time{}},
		{"same attempt number without a replay is dead", 6, 0, queue.StatusDead, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := d.Decide(&queue.Job{ID: 1, Attempt: tt.attempt, ReplayBase: tt.base, Replays: 1}, transient, now)
			if c.Status != tt.status || !c.RunAt.Equal(tt.runAt) {
				t.Errorf("Decide = %s at %s, want %s at %s", c.Status, c.RunAt, tt.status, tt.runAt)
			}
		})
	}
}

func TestDecideDefaults(t *testing.T) {
	now := time.Now()
	job := &queue.Job{ID: 1, Attempt: queue.DefaultMaxAttempts - 1}
	c := queue.Decider{}.Decide(job, errors.New("x"), now)
	if c.Status != queue.StatusPending {
		t.Fatalf("attempt %d of default %d: Status = %s, want pending", job.Attempt, queue.DefaultMaxAttempts, c.Status)
	}
	// Default backoff at attempt 11: ceiling capped at 15m, wait in [7.5m, 15m].
	if wait := c.RunAt.Sub(now); wait < 7*time.Minute+30*time.Second || wait > 15*time.Minute {
		t.Errorf("default wait = %s, want in [7m30s, 15m]", wait)
	}
	job.Attempt = queue.DefaultMaxAttempts
	if c := (queue.Decider{}).Decide(job, errors.New("x"), now); c.Status != queue.StatusDead {
		t.Errorf("attempt %d: Status = %s, want dead", job.Attempt, c.Status)
	}
	// Default MaxRetryAfter is an hour.
	job.Attempt = 1
	c = queue.Decider{}.Decide(job, queue.RetryAfter(errors.New("x"), 5*time.Hour), now)
	if got := c.RunAt.Sub(now); got != time.Hour {
		t.Errorf("capped retry-after wait = %s, want 1h", got)
	}
}

// TestDefaultRetryBudget pins the span Decider.MaxAttempts documents: the
// waits between the default 12 attempts of the default Backoff.
func TestDefaultRetryBudget(t *testing.T) {
	tests := []struct {
		name string
		rand float64
		min  time.Duration
		max  time.Duration
	}{
		{"shortest draws", 0, 23 * time.Minute, 24 * time.Minute},
		{"longest draws", 0.999999, 47 * time.Minute, 48 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := queue.Backoff{Rand: func() float64 { return tt.rand }}
			var total time.Duration
			for attempt := 1; attempt < queue.DefaultMaxAttempts; attempt++ {
				total += b.NextRetry(attempt)
			}
			if total < tt.min || total > tt.max {
				t.Errorf("waits between %d attempts = %s, want in [%s, %s]", queue.DefaultMaxAttempts, total, tt.min, tt.max)
			}
		})
	}
}

func TestPanicErrorText(t *testing.T) {
	err := &queue.PanicError{Value: errors.New("nil map"), Stack: []byte("goroutine 1 [running]:")}
	if got := err.Error(); got != "handler panic: nil map" || strings.Contains(got, "goroutine") {
		t.Errorf("Error() = %q, want the value without the stack", got)
	}
}
