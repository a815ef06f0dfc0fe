package caddywebhook

import (
	"context"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

func TestRedactor(t *testing.T) {
	t.Parallel()
	basic := base64.StdEncoding.EncodeToString([]byte("deployer:basic-password-123"))
	r := newRedactor([]string{"Bearer bearer-token-0123", "Basic " + basic, "short", "whsec_signsecret0123", "bearer-token-0123",
		"https://u:hook-url-password@example.com/h?key=url-query-key-123", "host=db user=q password=dsn-password-xyz"})
	tests := []struct {
		name, in, want string
	}{
		{"bare bearer token", "invalid token bearer-token-0123", "invalid token [redacted]"},
		{"whole header", "got Bearer bearer-token-0123", "got [redacted]"},
		{"basic password decoded", `wrong password "basic-password-123"`, `wrong password "[redacted]"`},
		{"basic pair", "user deployer:basic-password-123", "user [redacted]"},
		{"basic encoded", "header Basic " + basic, "header [redacted]"},
		{"sign secret", "secret whsec_signsecret0123 refused", "secret [redacted] refused"},
		{"short values left alone", "short answer", "short answer"},
		{"url password", "auth failed for hook-url-password", "auth failed for [redacted]"},
		{"url query value", "bad key url-query-key-123", "bad key [redacted]"},
		{"dsn password", "password dsn-password-xyz rejected", "password [redacted] rejected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.redact(tt.in); got != tt.want {
				t.Errorf("redact(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestRedactingHandler: the redacted error keeps its kind for the pool.
func TestRedactingHandler(t *testing.T) {
	t.Parallel()
	r := newRedactor([]string{"token-0123456789"})
	tests := []struct {
		name      string
		err       error
		permanent bool
		after     time.Duration
	}{
		{"transient", errors.New("invalid token token-0123456789"), false, 0},
		{"permanent", queue.Permanent(errors.New("invalid token token-0123456789")), true, 0},
		{"retry after", queue.RetryAfter(errors.New("invalid token token-0123456789"), time.Minute), false, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := redactingHandler{next: queue.HandlerFunc(func(context.Context, *queue.Job) error { return tt.err }), r: r}
			err := h.Handle(t.Context(), &queue.Job{})
			if err.Error() != "invalid token [redacted]" {
				t.Errorf("error = %q", err)
			}
			if queue.IsPermanent(err) != tt.permanent {
				t.Errorf("permanent = %v, want %v", queue.IsPermanent(err), tt.permanent)
			}
			if after, _ := queue.RetryAfterOf(err); after != tt.after {
				t.Errorf("retry after = %s, want %s", after, tt.after)
			}
		})
	}
}
