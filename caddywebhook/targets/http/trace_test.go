package httptarget

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/caddywebhook/caddywebhook/caddywebhook/targets/targettest"
	"github.com/caddywebhook/caddywebhook/queue"
)

// TestTargetTraceContext: the attempt's trace context is the traceparent
// sent, whatever a static header or a stored (or transformed) header says,
// and an attempt without one sends none of theirs either.
func TestTargetTraceContext(t *testing.T) {
	forEachClient(t, func(t *testing.T, c client) {
		tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
		sid, _ := trace.SpanIDFromHex("a3ce929d0e0e4736")
		state, _ := trace.ParseTraceState("rojo=00f067aa0ba902b7")
		traced := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: state}))
		untraced := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: tid, SpanID: sid}))
		tests := []struct {
			name       string
			ctx        context.Context
			parent, st string
		}{
			{"traced", traced, "00-4bf92f3577b34da6a3ce929d0e0e4736-a3ce929d0e0e4736-01", "rojo=00f067aa0ba902b7"},
			{"no stored context", context.Background(), "", ""},
			{"traced, no tracestate", untraced, "00-4bf92f3577b34da6a3ce929d0e0e4736-a3ce929d0e0e4736-00", ""},
		}
		handler, seen := httpTestRecorder(t)
		tgt, _ := httpTestSetup(t, c, handler, func(tgt *Target) {
			tgt.Headers = http.Header{"Traceparent": {"00-11111111111111111111111111111111-2222222222222222-01"}, "Tracestate": {"spoof=1"}}
		})
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				job := targettest.Job("http")
				job.Headers = append(job.Headers, queue.Header{Name: "traceparent", Value: "00-33333333333333333333333333333333-4444444444444444-01"})
				if err := tgt.Deliver(tt.ctx, job); err != nil {
					t.Fatalf("Deliver: %v", err)
				}
				req := <-seen
				if got := req.header.Values("Traceparent"); tt.parent == "" && len(got) != 0 || tt.parent != "" && (len(got) != 1 || got[0] != tt.parent) {
					t.Errorf("traceparent = %q, want %q", got, tt.parent)
				}
				if got := req.header.Values("Tracestate"); tt.st == "" && len(got) != 0 || tt.st != "" && (len(got) != 1 || got[0] != tt.st) {
					t.Errorf("tracestate = %q, want %q", got, tt.st)
				}
			})
		}
	})
}
