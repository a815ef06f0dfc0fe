package caddywebhook

import (
	"context"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddywebhook/caddywebhook/queue"
)

// Target is a module in the webhook.targets namespace: it delivers one job
// once. Deliver returns nil when the job is done, an error wrapped with
// queue.Permanent when no retry can help, an error wrapped with
// queue.RetryAfter when the upstream asked for a wait, and any other error for
// a transient failure. It must honour ctx: the pool cancels it when the lease
// is lost or the grace period of a shutdown runs out.
//
// Modules in the namespace are named webhook.targets.<kind>; their Caddyfile
// unmarshaler sees the tokens `<kind> <args…> { <options> }` of a `to` line,
// without the `name` and `events` options, which the receiver keeps.
type Target interface {
	Deliver(ctx context.Context, job *queue.Job) error
}

// unmarshalTimeout reads the one duration argument of a target's timeout
// option; kind names the target in the messages.
func unmarshalTimeout(d *caddyfile.Dispenser, kind string) (caddy.Duration, error) {
	if !d.NextArg() {
		return 0, d.Errf("%s target: timeout: missing the duration", kind)
	}
	dur, err := caddy.ParseDuration(d.Val())
	if err != nil {
		return 0, d.Errf("%s target: timeout: %v", kind, err)
	}
	if d.NextArg() {
		return 0, d.Errf("%s target: timeout: takes one duration", kind)
	}
	return caddy.Duration(dur), nil
}
