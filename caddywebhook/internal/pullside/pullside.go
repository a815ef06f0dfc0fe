// Package pullside is the pull side of the running webhook app as the
// consumer endpoint (webhook_consumer) sees it: what a consumer may claim,
// extend and answer, and the words of its answers. The app installs its
// lookup from its init function, so that the consumer package needs
// nothing of the app's package but its module. It is for the plugin's own
// packages, no part of its public API.
package pullside

import (
	"context"
	"time"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/queue"
)

// Side is the pull side of one running config.
type Side interface {
	// Lease is how long a consumer's claim holds without an extension:
	// the app's lease.
	Lease() time.Duration
	// PollInterval is how often a waiting claim asks the store again
	// when nothing in this process signalled new work.
	PollInterval() time.Duration
	// Targets returns the names of the pull targets of the running
	// config; Has reports whether target is one.
	Targets() []string
	Has(target string) bool
	// Stopped is closed when the app stops or a reload replaces it.
	Stopped() <-chan struct{}
	// Ready returns a channel closed when jobs of target may have become
	// claimable in this process. Take it before a claim that finds
	// nothing, then wait on it, the poll interval, or Stopped.
	Ready(target string) <-chan struct{}
	// Claim leases up to limit claimable jobs of target, counting an
	// attempt on each.
	Claim(ctx context.Context, target string, limit int) ([]*queue.Job, error)
	// Extend moves the leases of the claims still held, of the pull
	// targets in allowed, and returns the ids it could not extend.
	Extend(ctx context.Context, allowed []string, claims []queue.Claimed) (lost []int64, err error)
	// Answer records a consumer's answers, each fenced as the pool's own
	// finishes are; the replies are in the order of acks.
	Answer(ctx context.Context, allowed []string, acks []Ack) ([]AckReply, error)
}

var of func(app any) (Side, error)

// Install sets how the pull side of an app is found. Call it from an init
// function.
func Install(f func(app any) (Side, error)) { of = f }

// Of returns the pull side of app, the running webhook app, or an error
// when it has none now (it stopped, or a reload replaced it): the
// consumer should ask again.
func Of(app any) (Side, error) { return of(app) }

// AckOutcome is what a consumer says became of its attempt at one claim:
// one of the attempt words (adminapi.Attempt…) a consumer may report.
type AckOutcome string

// The outcomes a consumer may report.
const (
	// AckDelivered: delivered; the job is done.
	AckDelivered AckOutcome = adminapi.AttemptDelivered
	// AckRetry: a transient failure; the job is retried after the
	// target's backoff (or RetryAfter, if longer), or goes dead if that
	// was its last attempt.
	AckRetry AckOutcome = adminapi.AttemptRetry
	// AckDead: a permanent failure; the job goes dead at once.
	AckDead AckOutcome = adminapi.AttemptDead
	// AckHandedBack: not attempted (the consumer stops, its app is not
	// listening); the job is pending again at once, its attempt uncharged.
	AckHandedBack AckOutcome = adminapi.AttemptHandedBack
)

// Valid reports whether o is one of the four outcomes.
func (o AckOutcome) Valid() bool {
	switch o {
	case AckDelivered, AckRetry, AckDead, AckHandedBack:
		return true
	}
	return false
}

// Ack is a consumer's answer for one claim.
type Ack struct {
	Claim   queue.Claimed
	Outcome AckOutcome
	// Error is the attempt's error, kept as the job's last error for
	// retry and dead (as queue.SafeText makes it).
	Error string
	// RetryAfter, for a retry, asks for the next attempt no sooner than
	// this (capped by the app's max_retry_after, and never sooner than
	// the backoff), as an HTTP target's Retry-After does.
	RetryAfter time.Duration
	// Duration is how long the attempt took, for the job's history.
	Duration time.Duration
}

// AckReply says what became of one Ack: the server's reply to it.
type AckReply struct {
	ID int64
	// Recorded is false when the claim was no longer held (the lease ran
	// out and the job was claimed again, or it was answered already), or
	// is not one the consumer may answer for: nothing was changed.
	Recorded bool
	// Status is the job's status after a recorded answer: done, pending
	// (to be retried, or handed back), or dead.
	Status queue.Status
	// RunAt is when a retried job is due again.
	RunAt time.Time
}
