package queue

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Checks and defaults every Store applies the same way, kept here so the
// stores cannot drift apart.

// CheckEvent returns an error if Enqueue cannot store ev. Every Store's
// Enqueue starts with it.
func CheckEvent(ev Event) error {
	if ev.Source == "" || ev.DeliveryID == "" {
		return errors.New("enqueue: event needs a source and a delivery id")
	}
	return nil
}

// CheckClaim returns an error if p is not a valid claim, and reports
// whether it can take no job (Limit 0 or less, or an empty, non-nil Routes),
// in which case Claim returns no jobs without asking the database. Every
// Store's Claim starts with it.
func CheckClaim(p ClaimParams) (none bool, err error) {
	switch {
	case p.Owner == "":
		return false, errors.New("claim: ClaimParams.Owner is required")
	case p.Lease <= 0:
		return false, fmt.Errorf("claim: ClaimParams.Lease must be positive, got %s", p.Lease)
	}
	return p.Limit <= 0 || (p.Routes != nil && len(p.Routes) == 0), nil
}

// Times returns when c's outcome is stamped (c.Now, or now if it is zero)
// and when a retry is due (c.RunAt, or that stamp if it is zero).
func (c *Completion) Times(now time.Time) (at, runAt time.Time) {
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

// TruncateError cuts s to at most MaxErrorLen bytes without splitting a
// UTF-8 sequence.
func TruncateError(s string) string {
	n := MaxErrorLen
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
