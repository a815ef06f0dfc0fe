// Package targettest holds the helpers the tests of the webhook.targets
// modules share: a Caddy context, a provision-and-validate step, a job as
// the pool hands it over and a runner for Caddyfile tables.
package targettest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddywebhook/caddywebhook/queue"
)

// Context returns a Caddy context for provisioning a target in a test.
func Context(t testing.TB) caddy.Context {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	return ctx
}

// Provision provisions and validates tgt as Caddy would, and
// returns the first error, prefixed with the step that failed.
func Provision(t testing.TB, tgt interface {
	caddy.Provisioner
	caddy.Validator
}) error {
	t.Helper()
	if err := tgt.Provision(Context(t)); err != nil {
		return fmt.Errorf("provision: %w", err)
	}
	if err := tgt.Validate(); err != nil {
		return fmt.Errorf("validate: %w", err)
	}
	return nil
}

// Job returns a job for the named target as the pool hands it over.
func Job(target string) *queue.Job {
	return &queue.Job{
		ID:         42,
		EventID:    7,
		Source:     "github",
		DeliveryID: "72d3162e-cc78-11e3-81ab-4c9367dc0958",
		EventType:  "push",
		Target:     target,
		Headers: []queue.Header{
			{Name: "Content-Type", Value: "application/json"},
			{Name: "X-GitHub-Event", Value: "push"},
		},
		Payload: []byte("{\"ref\":\"refs/heads/main\"}\n"),
		Attempt: 1,
	}
}

// CaddyfileCase is one row of a target's Caddyfile table: input
// parses to Want, or fails with an error containing WantErr.
type CaddyfileCase[T any] struct {
	Name    string
	Input   string
	Want    T
	WantErr string
}

// CheckCaddyfile runs a target's Caddyfile table, comparing the
// parsed target with Want through its JSON form (what Caddy stores).
func CheckCaddyfile[T any, PT interface {
	*T
	caddyfile.Unmarshaler
}](t *testing.T, tests []CaddyfileCase[T]) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			got := PT(new(T))
			err := got.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tt.Input))
			if tt.WantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.WantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.WantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("UnmarshalCaddyfile: %v", err)
			}
			gotJSON, _ := json.Marshal(got)
			wantJSON, _ := json.Marshal(&tt.Want)
			if !bytes.Equal(gotJSON, wantJSON) {
				t.Errorf("got %s\nwant %s", gotJSON, wantJSON)
			}
		})
	}
}

// Outcome names what a Deliver error means to the pool.
func Outcome(err error) string {
	switch {
	case err == nil:
		return "done"
	case queue.IsPermanent(err):
		return "permanent"
	default:
		return "transient"
	}
}
