package caddywebhook

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

// targetTestContext is a Caddy context for provisioning a target in a test.
func targetTestContext(t *testing.T) caddy.Context {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	return ctx
}

// provisionTarget provisions and validates tgt as Caddy would, and
// returns the first error, prefixed with the step that failed.
func provisionTarget(t *testing.T, tgt interface {
	caddy.Provisioner
	caddy.Validator
}) error {
	t.Helper()
	if err := tgt.Provision(targetTestContext(t)); err != nil {
		return fmt.Errorf("provision: %w", err)
	}
	if err := tgt.Validate(); err != nil {
		return fmt.Errorf("validate: %w", err)
	}
	return nil
}

// targetTestJob is a job for the named target as the pool hands it over.
func targetTestJob(target string) *queue.Job {
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

// targetCaddyfileCase is one row of a target's Caddyfile table: input
// parses to want, or fails with an error containing wantErr.
type targetCaddyfileCase[T any] struct {
	name    string
	input   string
	want    T
	wantErr string
}

// checkTargetCaddyfile runs a target's Caddyfile table, comparing the
// parsed target with want through its JSON form (what Caddy stores).
func checkTargetCaddyfile[T any, PT interface {
	*T
	caddyfile.Unmarshaler
}](t *testing.T, tests []targetCaddyfileCase[T]) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PT(new(T))
			err := got.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tt.input))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("UnmarshalCaddyfile: %v", err)
			}
			gotJSON, _ := json.Marshal(got)
			wantJSON, _ := json.Marshal(&tt.want)
			if !bytes.Equal(gotJSON, wantJSON) {
				t.Errorf("got %s\nwant %s", gotJSON, wantJSON)
			}
		})
	}
}
