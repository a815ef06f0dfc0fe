package exectarget

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/caddywebhook/caddywebhook/caddywebhook/targets/targettest"
)

// TestTargetTraceEnvironment: TRACEPARENT and TRACESTATE carry the
// attempt's trace context (the OpenTelemetry environment carrier), and a
// program of an attempt without one gets neither, not even Caddy's own
// with inherit_env.
func TestTargetTraceEnvironment(t *testing.T) {
	t.Setenv("TRACEPARENT", "00-11111111111111111111111111111111-2222222222222222-01")
	t.Setenv("TRACESTATE", "caddy=own")
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("a3ce929d0e0e4736")
	state, _ := trace.ParseTraceState("rojo=00f067aa0ba902b7")
	traced := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: state}))
	tests := []struct {
		name          string
		ctx           context.Context
		inherit       bool
		parent, state string
	}{
		{"traced", traced, false, "00-4bf92f3577b34da6a3ce929d0e0e4736-a3ce929d0e0e4736-01", "rojo=00f067aa0ba902b7"},
		{"traced, inherit_env", traced, true, "00-4bf92f3577b34da6a3ce929d0e0e4736-a3ce929d0e0e4736-01", "rojo=00f067aa0ba902b7"},
		{"no stored context, inherit_env", context.Background(), true, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tgt := execTestSetup(t, &Target{
				Command:    execTestProgram(t, "target_record.sh"),
				Env:        map[string]string{"RECORD_DIR": dir},
				InheritEnv: tt.inherit,
			})
			if err := tgt.Deliver(tt.ctx, targettest.Job("exec")); err != nil {
				t.Fatalf("Deliver: %v", err)
			}
			env := execTestEnv(t, dir)
			if got, ok := env["TRACEPARENT"]; got != tt.parent || ok != (tt.parent != "") {
				t.Errorf("TRACEPARENT = %q (set: %v), want %q", got, ok, tt.parent)
			}
			if got, ok := env["TRACESTATE"]; got != tt.state || ok != (tt.state != "") {
				t.Errorf("TRACESTATE = %q (set: %v), want %q", got, ok, tt.state)
			}
		})
	}
}
