package caddywebhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/notify"
	"github.com/caddywebhook/caddywebhook/caddywebhook/rules"
	"github.com/caddywebhook/caddywebhook/queue"
)

// Failure notifications, like Svix's operational webhooks: a target of the
// app's own that receives a small JSON notice when a job goes dead, when a
// circuit opens or closes, and when a route's backlog grows stale. This
// file is their config and their route; package internal/notify counts
// the occurrences and stores the notices as events of the reserved source
// _notify, durable, retried and dead-lettered like any delivery.

// NotifyConfig is the app's failure notifications.
type NotifyConfig struct {
	// DeliverRaw is the target module that receives the notices, in the
	// webhook.targets namespace, selected by its "kind": http (a Slack or
	// Discord incoming webhook, or your own endpoint; sign_secret signs the
	// notices with Standard Webhooks) or exec. Required.
	DeliverRaw json.RawMessage `json:"deliver,omitempty" caddy:"namespace=webhook.targets inline_key=kind"`

	// Window aggregates notices: the first occurrence of a kind of notice
	// for one route (source and target) opens a window, and one notice
	// with the count of occurrences is sent when it closes, so a route
	// gets at most one notice of each kind per window. Default: 1m.
	Window caddy.Duration `json:"window,omitempty"`

	// PendingAge is the age of a route's oldest due pending job from which
	// its backlog counts as stale and a backlog.stale notice is sent, again
	// every PendingAge while it stays stale. The queue is checked once per
	// window. Default: off, no backlog notices.
	PendingAge caddy.Duration `json:"pending_age,omitempty"`

	// MaxAttempts is the attempt budget of a notice's delivery. Default:
	// the app's max_attempts (12).
	MaxAttempts int `json:"max_attempts,omitempty"`

	// Backoff spaces the attempts of a failing notice; an unset base or max
	// is the app's. Default: the app's backoff (2s, 15m).
	Backoff *BackoffConfig `json:"backoff,omitempty"`

	// Transform reshapes each notice before it is sent, as a receiver
	// target's transform does: `body` sees the notice as JSON, so a Slack
	// incoming webhook gets {"text": …}. See docs/RULES.md. Default: none,
	// the notice as JSON.
	Transform *rules.TransformConfig `json:"transform,omitempty"`
}

// validate checks the settings that need no module; each message names the
// option.
func (n *NotifyConfig) validate() error {
	switch {
	case len(n.DeliverRaw) == 0:
		return errors.New("notify: deliver is required (a target such as http <url>)")
	case n.Window < 0:
		return errors.New("notify: window must not be negative")
	case n.PendingAge < 0:
		return errors.New("notify: pending_age must not be negative")
	case n.MaxAttempts < 0:
		return errors.New("notify: max_attempts must not be negative")
	}
	if err := n.Backoff.validate(); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}

// provisionNotify loads the notify target and registers its route.
func (a *App) provisionNotify(ctx caddy.Context) error {
	if a.Notify == nil {
		return nil
	}
	if err := a.Notify.validate(); err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	mod, err := ctx.LoadModule(a.Notify, "DeliverRaw")
	if err != nil {
		return fmt.Errorf("webhook: notify: %w", err)
	}
	t, ok := mod.(Target)
	if !ok {
		return fmt.Errorf("webhook: notify: module %T is not a webhook target", mod)
	}
	tr, err := compileTransform(a.Notify.Transform)
	if err != nil {
		return fmt.Errorf("webhook: notify: %w", err)
	}
	route := queue.Route{Source: notify.Source, Target: notify.Target}
	a.routes[route] = withTransform(t, tr)
	a.rules[route] = routeRules{transform: tr}
	a.policies[route] = retryPolicy{maxAttempts: a.Notify.MaxAttempts, backoff: a.Notify.Backoff}
	return nil
}

// reservedSource reports whether a receiver may not use source: names
// beginning with an underscore belong to the app's own events.
func reservedSource(source string) bool { return strings.HasPrefix(source, "_") }
