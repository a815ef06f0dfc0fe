package integration

// Trace context end to end: the sender's traceparent (or Caddy's tracing
// span) kept with the event and continued by every attempt, the attempt
// spans exported over OTLP/HTTP, and the delivery lag histogram.

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// The sender's trace context, from the W3C Trace Context specification's
// examples: https://www.w3.org/TR/trace-context/#examples-of-http-traceparent-headers
const (
	senderTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	senderSpanID  = "00f067aa0ba902b7"
	senderParent  = "00-" + senderTraceID + "-" + senderSpanID + "-01"
)

func TestE2ETrace(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end tests build and run Caddy; skipped with -short")
	}
	t.Run("traceparent_on_each_attempt", testTraceparentEachAttempt)
	t.Run("garbage_traceparent", testGarbageTraceparent)
	t.Run("exec_environment", testTraceExec)
	t.Run("tracing_otlp", testTracingOTLP)
}

// sendTraced signs and sends one GitHub event with traceparent set (none
// when empty) and expects 202.
func sendTraced(t *testing.T, c *caddyInstance, id, traceparent string) time.Time {
	t.Helper()
	body := payload(id, "push")
	hdr := signGitHub(githubSecret, id, "push", body)
	if traceparent != "" {
		hdr.Set("Traceparent", traceparent)
		hdr.Set("Tracestate", "rojo=00f067aa0ba902b7")
	}
	at := time.Now()
	if status, resp := post(t, c.URL("/hooks/github"), hdr, body); status != http.StatusAccepted {
		t.Fatalf("POST %s: got %d %q, want 202\n%s", id, status, resp, c.logTail())
	}
	return at
}

// testTraceparentEachAttempt: the first attempt and the retry both carry
// the sender's trace id with a span id of their own; the lag histogram
// counts the one delivery, its sum within what the test timed.
func testTraceparentEachAttempt(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, sequence(http.StatusServiceUnavailable, http.StatusOK))
	c := newCaddy(t)
	c.start(t, caddyConfig{Webhook: "backoff 100ms 200ms", Site: githubSite(up.URL("/github"))})
	posted := sendTraced(t, c, "trace-1", senderParent)
	up.waitAnswered(t, "trace-1", http.StatusOK, 1)
	c.waitJobs(t, "github", "trace-1", "done")

	ds := up.forKey("trace-1")
	if len(ds) != 2 {
		t.Fatalf("upstream got %s, want 2 attempts", summarize(ds))
	}
	seen := map[string]bool{}
	for i, d := range ds {
		p := d.Header.Get("Traceparent")
		if len(p) != 55 || p[:36] != "00-"+senderTraceID+"-" || p[52:] != "-01" {
			t.Errorf("attempt %d: traceparent %q, want the sender's trace id", i+1, p)
			continue
		}
		if sid := p[36:52]; sid == senderSpanID || seen[sid] {
			t.Errorf("attempt %d: span id %s repeats the sender's or an earlier attempt's", i+1, sid)
		} else {
			seen[sid] = true
		}
		if got := d.Header.Get("Tracestate"); got != "rojo=00f067aa0ba902b7" {
			t.Errorf("attempt %d: tracestate %q, want the sender's", i+1, got)
		}
	}

	// The lag: from the 202 to the end of the delivering attempt.
	status, body := c.adminDo(t, http.MethodGet, "/metrics", nil)
	if status != http.StatusOK {
		t.Fatalf("GET /metrics: %d", status)
	}
	count := metricValue(t, body, "caddy_webhook_delivery_lag_seconds_count{", `source="github"`)
	sum := metricValue(t, body, "caddy_webhook_delivery_lag_seconds_sum{", `source="github"`)
	if count != 1 {
		t.Errorf("lag histogram count %v, want 1 delivery", count)
	}
	if lo, hi := ds[1].Start.Sub(ds[0].End).Seconds()/2, ds[1].End.Sub(posted).Seconds()+0.05; sum < lo || sum > hi {
		t.Errorf("lag histogram sum %.3fs, want between %.3fs (the backoff waited) and %.3fs (post to delivery)", sum, lo, hi)
	}
	if n := metricValue(t, body, "caddy_webhook_attempts_per_delivery_sum{", `target="http"`); n != 2 {
		t.Errorf("attempts per delivery sum %v, want 2", n)
	}
}

// metricValue reads the value of the first line starting with prefix and
// containing parts.
func metricValue(t *testing.T, body []byte, prefix string, parts ...string) float64 {
	t.Helper()
	line := metricLine(body, prefix, parts...)
	if line == "" {
		t.Fatalf("metrics: no line %s… with %v", prefix, parts)
	}
	v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
	if err != nil {
		t.Fatalf("metrics: %q: %v", line, err)
	}
	return v
}

// testGarbageTraceparent: an invalid traceparent is accepted and forwards
// none; nor does a request without one.
func testGarbageTraceparent(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, always(http.StatusOK))
	c := newCaddy(t)
	c.start(t, caddyConfig{Site: githubSite(up.URL("/github"))})
	tests := []struct{ name, id, traceparent string }{
		{"garbage", "garbage-1", "garbage"},
		{"zero trace id", "garbage-2", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"},
		{"none", "garbage-3", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sendTraced(t, c, tt.id, tt.traceparent)
			ds := up.waitAnswered(t, tt.id, http.StatusOK, 1)
			if p, s := ds[0].Header.Get("Traceparent"), ds[0].Header.Get("Tracestate"); p != "" || s != "" {
				t.Errorf("forwarded traceparent %q tracestate %q, want none", p, s)
			}
		})
	}
}

// testTraceExec: an exec target sees TRACEPARENT (and TRACESTATE) in its
// environment.
func testTraceExec(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := recordScript(t, dir)
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	c := newCaddy(t)
	c.start(t, caddyConfig{Site: receiver("/hooks/github", "github", "github", "{env.E2E_GITHUB_SECRET}",
		fmt.Sprintf("to exec %s %s {webhook.delivery_id} 0", script, out))})
	sendTraced(t, c, "exec-trace", senderParent)
	testutil.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(out, "exec-trace.done"))
		return err == nil
	}, func() string { return "the exec target to run\n" + c.logTail() })
	env, err := os.ReadFile(filepath.Join(out, "exec-trace.env"))
	if err != nil {
		t.Fatal(err)
	}
	var parent, state string
	for _, line := range strings.Split(string(env), "\n") {
		if v, ok := strings.CutPrefix(line, "TRACEPARENT="); ok {
			parent = v
		}
		if v, ok := strings.CutPrefix(line, "TRACESTATE="); ok {
			state = v
		}
	}
	if len(parent) != 55 || parent[3:35] != senderTraceID || parent[36:52] == senderSpanID {
		t.Errorf("TRACEPARENT=%q, want the sender's trace id and a new span id", parent)
	}
	if state != "rojo=00f067aa0ba902b7" {
		t.Errorf("TRACESTATE=%q, want the sender's", state)
	}
}

// otlpEndpoint is a local OTLP/HTTP traces endpoint that decodes the
// protobuf ExportTraceServiceRequest it receives on /v1/traces.
// https://opentelemetry.io/docs/specs/otlp/#otlphttp
type otlpEndpoint struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func newOTLPEndpoint(t *testing.T) (*otlpEndpoint, string) {
	t.Helper()
	e := &otlpEndpoint{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, "bad gzip", http.StatusBadRequest)
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
		e.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				e.spans = append(e.spans, ss.Spans...)
			}
		}
		e.mu.Unlock()
		resp, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(resp)
	}))
	t.Cleanup(srv.Close)
	return e, srv.URL
}

func (e *otlpEndpoint) byName(name string) []*tracepb.Span {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []*tracepb.Span
	for _, sp := range e.spans {
		if sp.Name == name {
			out = append(out, sp)
		}
	}
	return out
}

// testTracingOTLP: with Caddy's tracing handler in the route and the
// webhook app's tracing on, the OTLP endpoint receives the ingest span and
// the attempt spans under it, and the upstream sees the attempt span's id.
func testTracingOTLP(t *testing.T) {
	t.Parallel()
	ep, url := newOTLPEndpoint(t)
	up := newUpstream(t, sequence(http.StatusServiceUnavailable, http.StatusOK))
	c := newCaddy(t)
	c.Env = []string{
		"OTEL_TRACES_EXPORTER=otlp",
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + url,
		"OTEL_BSP_SCHEDULE_DELAY=100",
	}
	c.start(t, caddyConfig{
		Webhook: "backoff 100ms 200ms\ntracing",
		Site:    "\ttracing {\n\t\tspan ingest\n\t}\n" + githubSite(up.URL("/github")),
	})
	sendTraced(t, c, "otlp-1", senderParent)
	up.waitAnswered(t, "otlp-1", http.StatusOK, 1)
	var ingest, attempts []*tracepb.Span
	testutil.Eventually(t, func() bool {
		ingest, attempts = ep.byName("ingest"), ep.byName("webhook delivery")
		return len(ingest) >= 1 && len(attempts) >= 2
	}, func() string {
		return fmt.Sprintf("the ingest span and two attempt spans at the OTLP endpoint: got %d and %d", len(ingest), len(attempts))
	})
	root := ingest[0]
	// The tracing handler continues the sender's trace.
	if got := hex.EncodeToString(root.TraceId); got != senderTraceID {
		t.Errorf("ingest span trace %s, want the sender's %s", got, senderTraceID)
	}
	ds := up.forKey("otlp-1")
	for i, sp := range attempts {
		if !bytes.Equal(sp.TraceId, root.TraceId) || !bytes.Equal(sp.ParentSpanId, root.SpanId) {
			t.Errorf("attempt span %d: trace %x parent %x, want under the ingest span %x", i, sp.TraceId, sp.ParentSpanId, root.SpanId)
		}
		for _, kv := range sp.Attributes {
			if strings.Contains(kv.Value.GetStringValue(), bodyMarker) {
				t.Errorf("attempt span %d attribute %s carries the payload", i, kv.Key)
			}
		}
	}
	for i, d := range ds {
		p := d.Header.Get("Traceparent")
		found := false
		for _, sp := range attempts {
			found = found || (len(p) == 55 && p[36:52] == hex.EncodeToString(sp.SpanId))
		}
		if !found {
			t.Errorf("attempt %d sent traceparent %q, whose span id is no attempt span's", i+1, p)
		}
	}
}
