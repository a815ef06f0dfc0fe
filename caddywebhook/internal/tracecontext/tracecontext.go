// Package tracecontext is the W3C trace context (https://www.w3.org/TR/trace-context/)
// of the plugin: read from an accepted request and kept with its event
// (queue.Event.Trace), and made anew for each delivery attempt, which the
// targets send on. The receiver, the app's attempt spans and the targets
// share it; it is no part of the plugin's public API.
package tracecontext

import (
	"context"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// The W3C Trace Context headers (https://www.w3.org/TR/trace-context/),
// in Go's canonical form. A target that speaks HTTP sends HeaderTraceparent
// (and HeaderTracestate when there is one) on every attempt of an event
// that arrived in a trace; see Traceparent.
const (
	HeaderTraceparent = "Traceparent"
	HeaderTracestate  = "Tracestate"
)

// The environment variables an exec target sets for the same purpose: the
// OpenTelemetry environment-variable carrier's names.
const (
	EnvTraceparent = "TRACEPARENT"
	EnvTracestate  = "TRACESTATE"
)

// maxTracestate is the longest tracestate kept: the W3C specification lets
// a vendor cut a longer one, and 512 bytes is what it asks to propagate.
const maxTracestate = 512

// FromRequest returns the trace context to store with an event accepted
// from r, in queue.Event.Trace's form: the span of Caddy's `tracing`
// handler when it is in the route (it puts its span in the request's
// context), else a valid incoming traceparent with its tracestate, else
// "". An invalid traceparent is dropped, never stored as sent; an invalid
// tracestate is dropped alone. Without either the cost is a context lookup
// and a header lookup, no allocation.
func FromRequest(r *http.Request) string {
	if sc := trace.SpanContextFromContext(r.Context()); sc.IsValid() {
		return formatTrace(sc.TraceID(), sc.SpanID(), sc.TraceFlags(), sc.TraceState().String())
	}
	parents := r.Header[HeaderTraceparent]
	if len(parents) != 1 {
		// None, or several: the specification says to ignore a repeated
		// traceparent.
		return ""
	}
	tid, sid, flags, ok := parseTraceparent(parents[0])
	if !ok {
		return ""
	}
	return formatTrace(tid, sid, flags, validTracestate(r.Header[HeaderTracestate]))
}

// formatTrace writes queue.Event.Trace: a version-00 traceparent, and
// after a newline the tracestate, if any.
func formatTrace(tid trace.TraceID, sid trace.SpanID, flags trace.TraceFlags, state string) string {
	n := 55
	if state != "" {
		n += 1 + len(state)
	}
	var b strings.Builder
	b.Grow(n)
	writeTraceparent(&b, tid, sid, flags)
	if state != "" {
		b.WriteByte('\n')
		b.WriteString(state)
	}
	return b.String()
}

func writeTraceparent(b *strings.Builder, tid trace.TraceID, sid trace.SpanID, flags trace.TraceFlags) {
	var buf [55]byte
	copy(buf[:3], "00-")
	hex.Encode(buf[3:35], tid[:])
	buf[35] = '-'
	hex.Encode(buf[36:52], sid[:])
	buf[52] = '-'
	hex.Encode(buf[53:55], []byte{byte(flags)})
	b.Write(buf[:])
}

// parseTraceparent reads a traceparent header as the W3C specification
// says a receiver must: two lowercase hex digits of version (not ff), a
// trace id and a parent id that are not all zeros, and flags. A version
// later than 00 may carry more fields after the four it knows, which are
// ignored; version 00 has exactly four.
func parseTraceparent(s string) (tid trace.TraceID, sid trace.SpanID, flags trace.TraceFlags, ok bool) {
	if len(s) < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return tid, sid, 0, false
	}
	if len(s) > 55 && (s[:2] == "00" || s[55] != '-') {
		return tid, sid, 0, false
	}
	var ver [1]byte
	var fl [1]byte
	if !lowerHex(s[:2]) || !lowerHex(s[3:35]) || !lowerHex(s[36:52]) || !lowerHex(s[53:55]) || s[:2] == "ff" {
		return tid, sid, 0, false
	}
	hex.Decode(ver[:], []byte(s[:2]))
	hex.Decode(tid[:], []byte(s[3:35]))
	hex.Decode(sid[:], []byte(s[36:52]))
	hex.Decode(fl[:], []byte(s[53:55]))
	if !tid.IsValid() || !sid.IsValid() {
		return tid, sid, 0, false
	}
	// Only the sampled bit is defined; the others are not passed on.
	return tid, sid, trace.TraceFlags(fl[0]) & trace.FlagsSampled, true
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// validTracestate joins the tracestate header lines and returns them if
// they form a list the specification allows (at most 32 members key=value
// with distinct keys, as validListMember checks each), cut to maxTracestate
// bytes at a member boundary; otherwise "". It is the list OpenTelemetry's
// trace.ParseTraceState accepts, so an attempt that hands the stored string
// on sends what an attempt with a span would. It checks in place: a single
// line that passes is returned without a copy.
func validTracestate(lines []string) string {
	var state string
	switch len(lines) {
	case 0:
		return ""
	case 1:
		state = lines[0]
	default:
		state = strings.Join(lines, ",")
	}
	var keys [32]string
	members, rest := 0, state
	for rest != "" {
		var m string
		m, rest, _ = strings.Cut(rest, ",")
		m = strings.Trim(m, " \t")
		if m == "" {
			continue
		}
		if members == len(keys) || !validListMember(m) {
			return ""
		}
		key, _, _ := strings.Cut(m, "=")
		if slices.Contains(keys[:members], key) {
			return "" // a key twice: the specification refuses the list
		}
		keys[members] = key
		members++
	}
	for len(state) > maxTracestate {
		i := strings.LastIndexByte(state, ',')
		if i < 0 {
			return ""
		}
		state = state[:i]
	}
	return strings.TrimRight(state, " \t,")
}

// validListMember checks one tracestate list member, key=value: a key
// a-z first then a-z, 0-9, _-*/ (at most 256), or tenant@system (a tenant
// of at most 241 starting a-z or 0-9, a system of at most 14 starting
// a-z); a value of at most 256 printable ASCII but comma and equals, not
// ending in a space.
func validListMember(m string) bool {
	key, value, ok := strings.Cut(m, "=")
	if !ok || value == "" || len(value) > 256 || value[len(value)-1] == ' ' {
		return false
	}
	if tenant, system, multi := strings.Cut(key, "@"); multi {
		if !validKeyPart(tenant, 241, true) || !validKeyPart(system, 14, false) {
			return false
		}
	} else if !validKeyPart(key, 256, false) {
		return false
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < 0x20 || c > 0x7e || c == ',' || c == '=' {
			return false
		}
	}
	return true
}

// validKeyPart checks a key, or a tenant or system id, of at most max
// bytes: a-z first (or 0-9 when digitFirst), then a-z, 0-9, _-*/.
func validKeyPart(s string, max int, digitFirst bool) bool {
	if s == "" || len(s) > max {
		return false
	}
	if c := s[0]; (c < 'a' || c > 'z') && (!digitFirst || c < '0' || c > '9') {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' && c != '-' && c != '*' && c != '/' {
			return false
		}
	}
	return true
}

// Parse reads queue.Event.Trace back into the span context the
// event arrived in. ok is false for "" (and for anything this build did
// not write).
func Parse(stored string) (trace.SpanContext, bool) {
	if stored == "" {
		return trace.SpanContext{}, false
	}
	parent, state, _ := strings.Cut(stored, "\n")
	tid, sid, flags, ok := parseTraceparent(parent)
	if !ok {
		return trace.SpanContext{}, false
	}
	cfg := trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true}
	if state != "" {
		if ts, err := trace.ParseTraceState(state); err == nil {
			cfg.TraceState = ts
		}
	}
	return trace.NewSpanContext(cfg), true
}

// newSpanID returns a random span id, never all zeros.
func newSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		v := rand.Uint64()
		for i := range sid {
			sid[i] = byte(v >> (8 * i))
		}
	}
	return sid
}

// attemptTrace is the trace context an attempt sends when no span is
// exported: the stored traceparent with a span id new for the attempt, and
// the stored tracestate as it is (it was checked when the event was
// accepted). Handing the strings on spares every attempt a parse of the
// tracestate into a trace.TraceState and its writing out again.
type attemptTrace struct{ parent, state string }

type attemptTraceKey struct{}

// WithAttempt returns ctx carrying the attempt's trace context, made
// from queue.Job.Trace, or ctx as it was when stored holds none (or
// nothing this build wrote).
func WithAttempt(ctx context.Context, stored string) context.Context {
	parent, state, _ := strings.Cut(stored, "\n")
	tid, _, flags, ok := parseTraceparent(parent)
	if !ok {
		return ctx
	}
	var b strings.Builder
	b.Grow(55)
	writeTraceparent(&b, tid, newSpanID(), flags)
	return context.WithValue(ctx, attemptTraceKey{}, &attemptTrace{parent: b.String(), state: state})
}

// Traceparent returns the traceparent and tracestate a target sends with
// the delivery attempt ctx belongs to: the trace id the event arrived in,
// a span id new for each attempt, and the tracestate it arrived with.
// Both are "" when the event came with no trace context: then a target
// sends none. A target sets them after every header of its own and of a
// transform, so that nothing overrides them.
func Traceparent(ctx context.Context) (traceparent, tracestate string) {
	if at, ok := ctx.Value(attemptTraceKey{}).(*attemptTrace); ok {
		return at.parent, at.state
	}
	// An exported attempt's span, or a caller's own span context.
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	var b strings.Builder
	b.Grow(55)
	writeTraceparent(&b, sc.TraceID(), sc.SpanID(), sc.TraceFlags())
	return b.String(), sc.TraceState().String()
}

// SetStatus records the HTTP status code an upstream answered an
// attempt with on the attempt's span, when spans are exported; otherwise
// it does nothing.
func SetStatus(ctx context.Context, code int) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.Int("http.response.status_code", code))
	}
}
