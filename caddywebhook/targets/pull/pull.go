// Package pulltarget is the webhook.targets.pull module: a target whose jobs
// no worker of the webhook app delivers. Consumers claim them over HTTP
// through a webhook_consumer handler, `caddy webhook listen` among them, so
// that an app no one can reach (a laptop, a service behind NAT) receives
// the events with the queue's guarantees: leases, a fence per claim, the
// attempt counted at claim, backoff, dead letters and replay.
//
//	webhook_receiver github {
//		secret {env.GITHUB_SECRET}
//		to pull {
//			name laptop
//			events push pull_request
//		}
//	}
//
// The target has no options of its own: the receiver's `to` options (name,
// events, max_attempts, backoff, ordering) apply to it as to any target.
package pulltarget

import (
	"context"
	"errors"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddywebhook/caddywebhook/caddywebhook"
	"github.com/caddywebhook/caddywebhook/queue"
)

func init() {
	caddy.RegisterModule(Target{})
}

// Target is the pull target: its jobs wait for consumers, which claim,
// extend and answer for them through a webhook_consumer handler
// (docs/CONSUMER.md). The app's pool never claims them, so while no
// consumer asks they cost the pool's claims nothing. The rate,
// concurrency and circuit_breaker options of a `to` line do not apply:
// consumers decide how fast they take jobs.
type Target struct{}

// CaddyModule returns the Caddy module information.
func (Target) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "webhook.targets.pull",
		New: func() caddy.Module { return new(Target) },
	}
}

// errPulled is what Deliver answers, should anything but a consumer ever
// try to deliver a pull target's job; the app's pool does not.
var errPulled = errors.New("pull target: jobs are claimed by consumers, never delivered by the pool")

// Deliver implements caddywebhook.Target. The pool never calls it.
func (Target) Deliver(context.Context, *queue.Job) error { return queue.Permanent(errPulled) }

// PulledByConsumers implements caddywebhook.PullTarget.
func (Target) PulledByConsumers() {}

// UnmarshalCaddyfile sets up the target from Caddyfile tokens. The dispenser
// starts at the kind token; the target takes no arguments and no options
// beyond those of the `to` line:
//
//	pull
func (t *Target) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the kind
	if d.NextArg() {
		return d.Errf("pull target: takes no arguments, got %q", d.Val())
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		return d.Errf("pull target: unknown option %q (name, events, max_attempts, backoff and ordering belong to the to line)", d.Val())
	}
	return nil
}

// Interface guards
var (
	_ caddywebhook.PullTarget = Target{}
	_ caddyfile.Unmarshaler   = (*Target)(nil)
)
