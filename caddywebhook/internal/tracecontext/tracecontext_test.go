package tracecontext

import (
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/caddywebhook/caddywebhook/queue"
)

// The cases follow the W3C Trace Context specification's rules for a
// receiver: https://www.w3.org/TR/trace-context/#traceparent-header
func TestRequestTrace(t *testing.T) {
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		name    string
		headers map[string][]string
		want    string
	}{
		{"none", nil, ""},
		{"valid", map[string][]string{"Traceparent": {parent}}, parent},
		{"with tracestate", map[string][]string{"Traceparent": {parent}, "Tracestate": {"rojo=00f067aa0ba902b7", "congo=t61rcWkgMzE"}},
			parent + "\nrojo=00f067aa0ba902b7,congo=t61rcWkgMzE"},
		{"invalid tracestate dropped alone", map[string][]string{"Traceparent": {parent}, "Tracestate": {"not a list\n"}}, parent},
		{"tracestate with an upper-case key dropped", map[string][]string{"Traceparent": {parent}, "Tracestate": {"Rojo=1"}}, parent},
		{"tracestate of 33 members dropped", map[string][]string{"Traceparent": {parent}, "Tracestate": {members(33)}}, parent},
		{"tracestate of 32 members kept", map[string][]string{"Traceparent": {parent}, "Tracestate": {members(32)}}, parent + "\n" + members(32)},
		{"tracestate with a key twice dropped", map[string][]string{"Traceparent": {parent}, "Tracestate": {"a=1,a=2"}}, parent},
		{"tracestate with a key twice over two lines dropped", map[string][]string{"Traceparent": {parent}, "Tracestate": {"a=1", "a=2"}}, parent},
		{"tracestate key starting with a digit dropped", map[string][]string{"Traceparent": {parent}, "Tracestate": {"1abc=x"}}, parent},
		{"tracestate key with two @ dropped", map[string][]string{"Traceparent": {parent}, "Tracestate": {"a@b@c=1"}}, parent},
		{"tracestate multi-tenant key kept", map[string][]string{"Traceparent": {parent}, "Tracestate": {"1tenant@sys=1,rojo=2"}}, parent + "\n1tenant@sys=1,rojo=2"},
		{"tracestate system id starting with a digit dropped", map[string][]string{"Traceparent": {parent}, "Tracestate": {"t@1sys=1"}}, parent},
		{"long tracestate cut at a member", map[string][]string{"Traceparent": {parent}, "Tracestate": {longMembers(6)}},
			parent + "\n" + longMembers(5)},
		{"unknown flags cleared", map[string][]string{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff"}}, parent},
		{"future version with more fields", map[string][]string{"Traceparent": {"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what"}}, parent},
		{"garbage", map[string][]string{"Traceparent": {"garbage"}}, ""},
		{"uppercase hex", map[string][]string{"Traceparent": {"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"}}, ""},
		{"zero trace id", map[string][]string{"Traceparent": {"00-00000000000000000000000000000000-00f067aa0ba902b7-01"}}, ""},
		{"zero span id", map[string][]string{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"}}, ""},
		{"version ff", map[string][]string{"Traceparent": {"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}, ""},
		{"version 00 too long", map[string][]string{"Traceparent": {parent + "-x"}}, ""},
		{"repeated", map[string][]string{"Traceparent": {parent, parent}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/", nil)
			for k, v := range tt.headers {
				r.Header[k] = v
			}
			got := FromRequest(r)
			if got != tt.want {
				t.Fatalf("FromRequest = %q, want %q", got, tt.want)
			}
			if len(got) > queue.MaxTraceLen {
				t.Fatalf("FromRequest is %d bytes, more than MaxTraceLen", len(got))
			}
		})
	}
}

func TestRequestTraceFromSpan(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	r := httptest.NewRequest("POST", "/", nil)
	// The span wins over a header, as Caddy's tracing handler's span is the
	// request's (it injects the same context into the headers anyway).
	r.Header.Set("Traceparent", "00-11111111111111111111111111111111-2222222222222222-01")
	r = r.WithContext(trace.ContextWithSpanContext(r.Context(), sc))
	if got, want := FromRequest(r), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"; got != want {
		t.Fatalf("FromRequest = %q, want %q", got, want)
	}
}

func TestRequestTraceAllocs(t *testing.T) {
	tests := []struct {
		name    string
		headers map[string][]string
		allocs  float64
	}{
		{"none", nil, 0},
		// The stored string only.
		{"traceparent and tracestate", map[string][]string{
			"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
			"Tracestate":  {"rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/", nil)
			for k, v := range tt.headers {
				r.Header[k] = v
			}
			if n := testing.AllocsPerRun(100, func() { _ = FromRequest(r) }); n != tt.allocs {
				t.Fatalf("FromRequest allocates %v times, want %v", n, tt.allocs)
			}
		})
	}
}

// longMembers is a tracestate of n members of 101 bytes each.
func longMembers(n int) string {
	m := make([]string, n)
	for i := range m {
		m[i] = "k" + strconv.Itoa(i) + "=" + strings.Repeat("v", 98)
	}
	return strings.Join(m, ",")
}

// members is a tracestate of n members with distinct keys.
func members(n int) string {
	m := make([]string, n)
	for i := range m {
		m[i] = "k" + strconv.Itoa(i) + "=v"
	}
	return strings.Join(m, ",")
}

// TestTracestateAgreesWithOTel: a tracestate is kept exactly when
// OpenTelemetry's parser accepts it, so that an attempt handing the stored
// string on and one sending its span's state send the same.
func TestTracestateAgreesWithOTel(t *testing.T) {
	for _, state := range []string{
		"rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", "a=1,a=2", "1abc=x", "a@b@c=1", "t@s=1", "1t@s=1", "t@1s=1",
		"Rojo=1", "a=", "=1", "a=b c", "a=b ", "a=b=c", "a/b*c_d-e=1", members(32), members(33),
		strings.Repeat("t", 241) + "@s=1", strings.Repeat("t", 242) + "@s=1", "t@" + strings.Repeat("s", 14) + "=1", "t@" + strings.Repeat("s", 15) + "=1",
	} {
		_, err := trace.ParseTraceState(state)
		if kept := validTracestate([]string{state}) != ""; kept != (err == nil) {
			t.Errorf("%q: kept %v, OpenTelemetry's parser says %v", state, kept, err)
		}
	}
}
