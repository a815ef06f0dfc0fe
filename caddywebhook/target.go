package caddywebhook

import (
	"context"

	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/tracecontext"
	"github.com/caddywebhook/caddywebhook/queue"
)

// Target is a module in the webhook.targets namespace: it delivers one job
// once. Deliver returns nil when the job is done, an error wrapped with
// queue.Permanent when no retry can help, an error wrapped with
// queue.RetryAfter when the upstream asked for a wait, and any other error for
// a transient failure. It must honour ctx: the pool cancels it when the lease
// is lost or the grace period of a shutdown runs out.
//
// Modules in the namespace are named webhook.targets.<kind>, each in its
// own package under caddywebhook/targets; their Caddyfile unmarshaler sees
// the tokens `<kind> <args…> { <options> }` of a `to` line, without the
// options the receiver keeps (name, events and the delivery settings of
// TargetConfig). A target resolves its secret-bearing fields with
// ResolveSecret.
type Target interface {
	Deliver(ctx context.Context, job *queue.Job) error
}

// The metadata headers a target that speaks HTTP adds to every forwarded
// request, so the upstream can deduplicate, trace and route without parsing
// the payload.
const (
	// HeaderDeliveryID carries the sender's delivery id (the dedupe key
	// within a source).
	HeaderDeliveryID = "X-Webhook-Delivery-Id"
	// HeaderSource carries the name of the receiver that accepted the event.
	HeaderSource = "X-Webhook-Source"
	// HeaderEventType carries the event type, when the event has one.
	HeaderEventType = "X-Webhook-Event-Type"
	// HeaderAttempt carries the attempt number, 1 for the first
	// delivery. It keeps counting across replays, so a resend never
	// repeats a number the upstream has seen answered; only a delivery cut
	// short by a stop (handed back, uncharged) is sent again with its
	// number.
	HeaderAttempt = "X-Webhook-Attempt"
	// HeaderReplay carries how many times an operator replayed the job
	// from dead; absent until the first replay, so its presence marks a
	// resend.
	HeaderReplay = "X-Webhook-Replay"
	// HeaderJobID carries the id of the job in the queue, the handle for the
	// admin API (`caddy webhook show <id>`).
	HeaderJobID = "X-Webhook-Job-Id"
)

// The W3C Trace Context headers (https://www.w3.org/TR/trace-context/) a
// target that speaks HTTP sends on every attempt of an event that arrived
// in a trace, in Go's canonical form, and the environment variables an
// exec target sets for the same purpose (the OpenTelemetry
// environment-variable carrier's names).
const (
	HeaderTraceparent = tracecontext.HeaderTraceparent
	HeaderTracestate  = tracecontext.HeaderTracestate
	EnvTraceparent    = tracecontext.EnvTraceparent
	EnvTracestate     = tracecontext.EnvTracestate
)
