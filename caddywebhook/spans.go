package caddywebhook

import (
	"context"
	"fmt"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.17.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/tracecontext"
	"github.com/caddywebhook/caddywebhook/queue"
)

// The attributes of a delivery attempt's span. They name the route and the
// attempt, never the payload, a header, a secret or a query string.
var (
	attrSource     = attribute.Key("webhook.source")
	attrTarget     = attribute.Key("webhook.target")
	attrAttempt    = attribute.Key("webhook.attempt")
	attrOutcome    = attribute.Key("webhook.outcome")
	attrStatusCode = attribute.Key("http.response.status_code")
)

// attemptSpanName names each delivery attempt's span.
const attemptSpanName = "webhook delivery"

// attemptHandler gives each delivery attempt of a job with a stored trace
// context (queue.Job.Trace) a context of its own under it: a span when
// tracer is set, else only a new span id, which Traceparent reads. A job
// without one goes to next untouched.
type attemptHandler struct {
	next   queue.Handler
	tracer trace.Tracer // nil: no span is exported
	// last reports whether job is on its last attempt, so that a span
	// says dead for a failure that parks the job, as the logs do; nil:
	// never.
	last func(job *queue.Job) bool
}

// Handle implements queue.Handler.
func (h attemptHandler) Handle(ctx context.Context, job *queue.Job) error {
	if h.tracer == nil {
		return h.next.Handle(tracecontext.WithAttempt(ctx, job.Trace), job)
	}
	sc, ok := tracecontext.Parse(job.Trace)
	if !ok {
		return h.next.Handle(ctx, job)
	}
	ctx, span := h.tracer.Start(trace.ContextWithRemoteSpanContext(ctx, sc), attemptSpanName,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrSource.String(job.Source), attrTarget.String(job.Target), attrAttempt.Int(job.Attempt)))
	err := h.next.Handle(ctx, job)
	word := adminapi.AttemptDelivered
	switch {
	case err == nil:
	case queue.IsPermanent(err) || h.last != nil && h.last(job):
		word = adminapi.AttemptDead
	default:
		word = adminapi.AttemptRetry
	}
	span.SetAttributes(attrOutcome.String(word))
	if err != nil {
		span.SetStatus(codes.Error, word)
	}
	span.End()
	return err
}

type sharedTracer struct {
	mu       sync.Mutex
	provider *sdktrace.TracerProvider
	users    int
}

// acquire returns the shared tracer, building its provider if none is up.
func (s *sharedTracer) acquire(ctx context.Context) (trace.Tracer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.provider == nil {
		exp, err := autoexport.NewSpanExporter(ctx)
		if err != nil {
			return nil, fmt.Errorf("webhook: tracing: create span exporter: %w", err)
		}
		version, _ := caddy.Version()
		res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
			semconv.WebEngineName("Caddy"), semconv.WebEngineVersion(version)))
		if err != nil {
			res = resource.Default()
		}
		s.provider = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	}
	s.users++
	return s.provider.Tracer("github.com/caddywebhook/caddywebhook"), nil
}

// release lets go of one acquire; the last one flushes what is buffered
// and shuts the provider down.
func (s *sharedTracer) release(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.users == 0 {
		return nil
	}
	if s.users--; s.users > 0 || s.provider == nil {
		return nil
	}
	p := s.provider
	s.provider = nil
	if err := p.ForceFlush(ctx); err != nil {
		return fmt.Errorf("webhook: tracing: flush spans: %w", err)
	}
	if err := p.Shutdown(ctx); err != nil {
		return fmt.Errorf("webhook: tracing: shut down: %w", err)
	}
	return nil
}

// acquireTracer takes this app's reference to the shared tracer, released
// by Cleanup.
func (a *App) acquireTracer() (trace.Tracer, error) {
	tr, err := spanExport.acquire(a.ctx)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.traced = true
	a.mu.Unlock()
	return tr, nil
}

// Interface guards
var _ queue.Handler = attemptHandler{}
