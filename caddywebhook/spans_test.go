package caddywebhook

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/tracecontext"
	"github.com/caddywebhook/caddywebhook/queue"
)

// otlpSink is a local OTLP/HTTP traces endpoint that decodes what it
// receives: ExportTraceServiceRequest in protobuf, POSTed to /v1/traces.
// https://opentelemetry.io/docs/specs/otlp/#otlphttp
type otlpSink struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func newOTLPSink(t *testing.T) (*otlpSink, string) {
	t.Helper()
	s := &otlpSink{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, _ := io.ReadAll(body)
		var req coltrace.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(b, &req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				s.spans = append(s.spans, ss.Spans...)
			}
		}
		s.mu.Unlock()
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return s, srv.URL
}

func (s *otlpSink) all() []*tracepb.Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*tracepb.Span(nil), s.spans...)
}

func spanAttr(sp *tracepb.Span, key string) string {
	for _, kv := range sp.Attributes {
		if kv.Key == key {
			return kv.Value.GetStringValue()
		}
	}
	return ""
}

// TestAppTracesDeliveries runs Caddy's tracing handler ahead of the
// receiver with an OTLP/HTTP exporter set by the OTEL_* variables: the
// local endpoint receives the ingest span and one span per attempt under
// it, and the upstream sees the ingest trace id with the attempt span's id
// on the first attempt and on the retry. The lag histogram counts the
// delivery once, with a lag between the post and the delivery the test saw.
func TestAppTracesDeliveries(t *testing.T) {
	sink, endpoint := newOTLPSink(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")

	var mu sync.Mutex
	var parents []string
	var delivered time.Time
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		parents = append(parents, r.Header.Get("Traceparent"))
		if len(parents) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		delivered = time.Now()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(up.Close)

	h := newHarness(t)
	h.before = []any{map[string]any{"handler": "tracing", "span": "ingest"}}
	target := httpTarget("app", up.URL)
	target["backoff"] = map[string]any{"base": "10ms", "max": "20ms"}
	h.load(t, map[string]any{"workers": 1, "tracing": true}, githubReceiver("traced", target))

	route := queue.Route{Source: "traced", Target: "app"}
	before := histogramCount(t, route)
	posted := time.Now()
	if got := h.post(t, "traced", "d-1", "push", testBody(1)); got != http.StatusAccepted {
		t.Fatalf("status %d, want 202", got)
	}
	s := h.store(t)
	js := jobs(t, s)
	waitStatus(t, s, js[0].ID, queue.StatusDone)
	h.stop(t) // flushes the spans

	mu.Lock()
	defer mu.Unlock()
	if len(parents) != 2 {
		t.Fatalf("upstream got %d requests, want 2", len(parents))
	}
	var ingest *tracepb.Span
	var attempts []*tracepb.Span
	for _, sp := range sink.all() {
		switch sp.Name {
		case "ingest":
			ingest = sp
		case attemptSpanName:
			attempts = append(attempts, sp)
		}
	}
	if ingest == nil || len(attempts) != 2 {
		t.Fatalf("OTLP endpoint got ingest %v and %d attempt spans, want the ingest span and 2", ingest != nil, len(attempts))
	}
	traceID := hex.EncodeToString(ingest.TraceId)
	for i, sp := range attempts {
		if !bytes.Equal(sp.TraceId, ingest.TraceId) || !bytes.Equal(sp.ParentSpanId, ingest.SpanId) {
			t.Errorf("attempt span %d: trace %x parent %x, want trace %s under span %x", i, sp.TraceId, sp.ParentSpanId, traceID, ingest.SpanId)
		}
		if spanAttr(sp, "webhook.source") != "traced" || spanAttr(sp, "webhook.target") != "app" {
			t.Errorf("attempt span %d attributes %v, want source and target", i, sp.Attributes)
		}
	}
	for i, p := range parents {
		want := "00-" + traceID + "-"
		if len(p) != 55 || p[:36] != want {
			t.Errorf("attempt %d sent traceparent %q, want the ingest trace %s", i+1, p, traceID)
		}
		found := false
		for _, sp := range attempts {
			found = found || p[36:52] == hex.EncodeToString(sp.SpanId)
		}
		if !found {
			t.Errorf("attempt %d sent span id %s, which is no attempt span's", i+1, p[36:52])
		}
	}
	if parents[0] == parents[1] {
		t.Errorf("both attempts sent traceparent %q, want a new span id each", parents[0])
	}

	count, sum := histogramCountSum(t, route)
	if count-before != 1 {
		t.Errorf("lag histogram counted %d deliveries, want 1", count-before)
	}
	if max := delivered.Sub(posted).Seconds() + 0.05; sum <= 0 || sum > max {
		t.Errorf("lag histogram sum %.3fs, want above 0 and at most the %.3fs from post to delivery", sum, max)
	}
}

func histogramCount(t *testing.T, route queue.Route) uint64 {
	t.Helper()
	n, _ := histogramCountSum(t, route)
	return n
}

func histogramCountSum(t *testing.T, route queue.Route) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	if err := webhookMetrics.lag.WithLabelValues(route.Source, route.Target).(interface{ Write(*dto.Metric) error }).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

func TestAttemptTraceparent(t *testing.T) {
	const stored = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\nrojo=00f067aa0ba902b7"
	var seen []string
	h := attemptHandler{next: handlerFunc(func(ctx context.Context, job *queue.Job) error {
		p, s := tracecontext.Traceparent(ctx)
		seen = append(seen, p+"|"+s)
		return nil
	})}
	for range 2 {
		if err := h.Handle(t.Context(), &queue.Job{Trace: stored}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Handle(t.Context(), &queue.Job{}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 3 {
		t.Fatalf("handled %d, want 3", len(seen))
	}
	for i, s := range seen[:2] {
		sc, ok := tracecontext.Parse(s[:55])
		if !ok || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.SpanID().String() == "00f067aa0ba902b7" || s[55:] != "|rojo=00f067aa0ba902b7" {
			t.Errorf("attempt %d sent %q, want the stored trace id, a new span id and the tracestate", i+1, s)
		}
	}
	if seen[0] == seen[1] {
		t.Errorf("two attempts sent the same traceparent %q", seen[0])
	}
	if seen[2] != "|" {
		t.Errorf("a job with no trace context sent %q, want none", seen[2])
	}
}

type handlerFunc func(ctx context.Context, job *queue.Job) error

func (f handlerFunc) Handle(ctx context.Context, job *queue.Job) error { return f(ctx, job) }

// TestAttemptTraceAllocs: with no span exported an attempt costs its new
// traceparent, the value holding it and the context around it; the stored
// tracestate is sent as stored, never parsed and written out again.
func TestAttemptTraceAllocs(t *testing.T) {
	tests := []struct {
		name   string
		stored string
		allocs float64
	}{
		{"no trace context", "", 0},
		{"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", 3},
		{"traceparent and tracestate", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\nrojo=00f067aa0ba902b7,congo=t61rcWkgMzE", 3},
	}
	var parent, state string
	h := attemptHandler{next: handlerFunc(func(ctx context.Context, job *queue.Job) error {
		parent, state = tracecontext.Traceparent(ctx)
		return nil
	})}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := &queue.Job{Trace: tt.stored}
			if n := testing.AllocsPerRun(100, func() { _ = h.Handle(t.Context(), job) }); n != tt.allocs {
				t.Errorf("an attempt allocates %v times, want %v", n, tt.allocs)
			}
			if want, _, _ := strings.Cut(tt.stored, "\n"); len(parent) != len(want) || parent != "" && parent[:36] != want[:36] {
				t.Errorf("traceparent = %q, want the trace id of %q", parent, want)
			}
			if _, want, _ := strings.Cut(tt.stored, "\n"); state != want {
				t.Errorf("tracestate = %q, want %q", state, want)
			}
		})
	}
}

// TestAttemptSpanWords: an attempt's span says what became of it with the
// attempt words of the logs and metrics, dead for a failure on the last
// attempt too.
func TestAttemptSpanWords(t *testing.T) {
	t.Parallel()
	const stored = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		name    string
		err     error
		attempt int
		want    string
	}{
		{"delivered", nil, 1, adminapi.AttemptDelivered},
		{"transient, attempts left", errors.New("upstream answered 503"), 2, adminapi.AttemptRetry},
		{"transient, the last attempt", errors.New("upstream answered 503"), 3, adminapi.AttemptDead},
		{"transient after a replay", errors.New("upstream answered 503"), 4, adminapi.AttemptRetry},
		{"permanent", queue.Permanent(errors.New("upstream answered 400")), 1, adminapi.AttemptDead},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			a := &App{MaxAttempts: 3}
			h := attemptHandler{
				next:   queue.HandlerFunc(func(context.Context, *queue.Job) error { return tt.err }),
				tracer: tp.Tracer("test"),
				last:   a.lastAttempt(nil),
			}
			job := &queue.Job{Trace: stored, Attempt: tt.attempt}
			if tt.name == "transient after a replay" {
				job.ReplayBase = 3
			}
			_ = h.Handle(t.Context(), job)
			spans := rec.Ended()
			if len(spans) != 1 {
				t.Fatalf("%d spans, want 1", len(spans))
			}
			var got string
			for _, kv := range spans[0].Attributes() {
				if kv.Key == attrOutcome {
					got = kv.Value.AsString()
				}
			}
			if got != tt.want {
				t.Errorf("webhook.outcome = %q, want %q", got, tt.want)
			}
		})
	}
}
