// Package storekit is for the implementations of queue.Store, and only for
// them: the checks every Store method starts with, the paging of ListJobs,
// the stamps and the stored error of a completion, and the byte encoding of
// an event's headers. Each Store applies them the same way, and keeping them
// here means queue/sqlite and queue/postgres cannot drift apart; a new
// backend imports this package too. Code that uses a Store never needs it.
package storekit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

// CheckEvent returns an error if Enqueue cannot store ev. Every Store's
// Enqueue starts with it.
func CheckEvent(ev queue.Event) error {
	if ev.Source == "" || ev.DeliveryID == "" {
		return errors.New("enqueue: event needs a source and a delivery id")
	}
	if len(ev.OrderingKey) > queue.MaxOrderingKeyLen {
		return fmt.Errorf("enqueue: ordering key is %d bytes, more than %d", len(ev.OrderingKey), queue.MaxOrderingKeyLen)
	}
	if len(ev.Trace) > queue.MaxTraceLen {
		return fmt.Errorf("enqueue: trace context is %d bytes, more than %d", len(ev.Trace), queue.MaxTraceLen)
	}
	return nil
}

// CheckClaim returns an error if p is not a valid claim, and reports
// whether it can take no job (Limit 0 or less, or an empty, non-nil Routes),
// in which case Claim returns no jobs without asking the database. Every
// Store's Claim starts with it.
func CheckClaim(p queue.ClaimParams) (none bool, err error) {
	switch {
	case p.Owner == "":
		return false, errors.New("claim: ClaimParams.Owner is required")
	case p.Lease <= 0:
		return false, fmt.Errorf("claim: ClaimParams.Lease must be positive, got %s", p.Lease)
	case p.Quotas != nil && len(p.Quotas) != len(p.Routes):
		return false, fmt.Errorf("claim: ClaimParams.Quotas has %d entries for %d routes", len(p.Quotas), len(p.Routes))
	}
	for i, q := range p.Quotas {
		if q <= 0 {
			return false, fmt.Errorf("claim: ClaimParams.Quotas[%d] must be positive, got %d", i, q)
		}
	}
	return p.Limit <= 0 || (p.Routes != nil && len(p.Routes) == 0), nil
}

// CheckDiscardFilter returns an error if DiscardJobs cannot take f: it
// deletes pending or dead jobs, one status at a time. Every Store's
// DiscardJobs starts with it.
func CheckDiscardFilter(f queue.Filter) error {
	switch f.Status {
	case queue.StatusPending, queue.StatusDead:
		return nil
	}
	return fmt.Errorf("discard jobs: Filter.Status must be pending or dead, got %q", f.Status)
}

// CheckCompletions returns an error for the first completion whose status
// Finish cannot record. Every Store's Finish starts with it.
func CheckCompletions(cs []queue.Completion) error {
	for _, c := range cs {
		switch c.Status {
		case queue.StatusDone, queue.StatusPending, queue.StatusDead:
		default:
			return fmt.Errorf("finish job %d: Completion.Status must be done, pending or dead, got %q", c.JobID, c.Status)
		}
		if c.HandedBack && c.Status != queue.StatusPending {
			return fmt.Errorf("finish job %d: a handed-back Completion must be pending, got %q", c.JobID, c.Status)
		}
	}
	return nil
}

// Times returns when c's outcome is stamped (c.Now, or now if it is zero)
// and when a retry is due (c.RunAt, or that stamp if it is zero).
func Times(c *queue.Completion, now time.Time) (at, runAt time.Time) {
	at = c.Now
	if at.IsZero() {
		at = now
	}
	runAt = c.RunAt
	if runAt.IsZero() {
		runAt = at
	}
	return at, runAt
}

// PageSize checks p and returns the number of jobs a page holds: p.Limit,
// queue.DefaultListLimit when it is 0 or less, at most queue.MaxListLimit.
// Every Store's ListJobs starts with it.
func PageSize(p queue.ListParams) (int, error) {
	if p.Status != "" && !p.Status.Valid() {
		return 0, fmt.Errorf("list jobs: unknown status %q", p.Status)
	}
	if p.Limit <= 0 {
		return queue.DefaultListLimit, nil
	}
	return min(p.Limit, queue.MaxListLimit), nil
}

// TrimPage makes the page a store read with one row more than size (the
// extra row tells that another page follows) and sets its cursor.
func TrimPage(jobs []queue.JobSummary, size int) queue.JobPage {
	if len(jobs) <= size {
		return queue.JobPage{Jobs: jobs}
	}
	jobs = jobs[:size]
	return queue.JobPage{Jobs: jobs, NextCursor: jobs[size-1].ID}
}

// SetOldestPending records the due time of each route's oldest due pending
// job in st, as ages at now: on the route's pending Count and, the largest,
// as st.OldestPending. Every Store's Stats ends with it.
func SetOldestPending(st *queue.Stats, oldest map[queue.Route]time.Time, now time.Time) {
	for i := range st.Counts {
		c := &st.Counts[i]
		if due, ok := oldest[queue.Route{Source: c.Source, Target: c.Target}]; ok && c.Status == queue.StatusPending {
			c.OldestPending = max(now.Sub(due), 0)
			st.OldestPending = max(st.OldestPending, c.OldestPending)
		}
	}
}

// CheckPause returns an error if Pause or Resume cannot take source: a
// pause always names its source. Every Store's Pause and Resume start
// with it.
func CheckPause(op, source string) error {
	if source == "" {
		return fmt.Errorf("%s: a source is required", op)
	}
	return nil
}

// PauseName names a pause in an error: "source github" for a whole
// source, "github/ci" for one target.
func PauseName(source, target string) string {
	if target == "" {
		return "source " + source
	}
	return source + "/" + target
}

// BulkInChunks is the one loop of every bulk operation a Store cuts into
// short transactions: ReplayDead, DiscardJobs and Purge. It calls chunk with
// at most size rows to change, and again while each call changes all it was
// asked to, until a call comes back short, limit rows are changed, chunk
// fails or ctx ends (between two calls; it then returns ctx.Err()). It
// returns the sum of what chunk reported, which counts the rows of a chunk
// that committed even when chunk also returned an error.
func BulkInChunks(ctx context.Context, limit, size int, chunk func(n int) (int, error)) (int, error) {
	total := 0
	for {
		want := min(size, limit-total)
		if want <= 0 {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, err := chunk(want)
		total += n
		if err != nil || n < want {
			return total, err
		}
	}
}
