package queue

import (
	"errors"
	"time"
)

// permanentError marks an error that no later attempt can fix.
type permanentError struct{ err error }

func (p permanentError) Error() string { return p.err.Error() }
func (p permanentError) Unwrap() error { return p.err }

// Permanent wraps err so the pool parks the job as dead at once instead of
// retrying it: a 400 from the upstream, a payload that can never succeed.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err, or an error it wraps, came from Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

// retryAfterError asks for the next attempt no sooner than after.
type retryAfterError struct {
	err   error
	after time.Duration
}

func (r retryAfterError) Error() string { return r.err.Error() }
func (r retryAfterError) Unwrap() error { return r.err }

// RetryAfter wraps a transient err with the wait the upstream asked for (an
// HTTP Retry-After): the next attempt is no sooner than after, capped by the
// pool's MaxRetryAfter, and never sooner than the backoff would give.
func RetryAfter(err error, after time.Duration) error {
	if err == nil {
		return nil
	}
	return retryAfterError{err: err, after: after}
}

// RetryAfterOf returns the wait requested through RetryAfter, if any.
func RetryAfterOf(err error) (time.Duration, bool) {
	var r retryAfterError
	if errors.As(err, &r) {
		return r.after, true
	}
	return 0, false
}
