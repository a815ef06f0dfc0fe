package caddywebhook

import (
	"encoding/json"
	"fmt"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/caddywebhook/rules"
)

// A receiver's `to` lines: each target's config, how its module is
// loaded, and the filters that decide which targets an event gets.

// TargetConfig is one destination of a receiver's events.
type TargetConfig struct {
	// Name identifies the target in jobs, logs, metrics and the admin API.
	// Jobs store it, so it must stay the same across reloads for their
	// deliveries to continue. Default: the kind (http, exec), then
	// <kind>-2, <kind>-3… for further targets of the same kind in this
	// receiver.
	Name string `json:"name,omitempty"`

	// Events limits the target to these event types; an entry ending in
	// '*' matches by prefix ("invoice.*"). Default: every event.
	Events []string `json:"events,omitempty"`

	// Filter is a CEL expression that must be true for the target to take
	// an event, on top of Events; it runs at ingest, after the signature
	// verified, on the variables body (the JSON body, null when it is not
	// JSON), raw, headers, query, event_type, source and delivery_id. An
	// evaluation error (a missing field) does not take the event. See
	// docs/RULES.md. Default: none, every event of Events.
	Filter string `json:"filter,omitempty"`

	// Transform reshapes what the target receives: a new body, headers
	// set or removed, each a CEL expression over the stored event, run at
	// delivery. An error is permanent: the job goes dead with it. See
	// docs/RULES.md. Default: none, the event as it was received.
	Transform *rules.TransformConfig `json:"transform,omitempty"`

	// caddyfileRules are the rule lines of a Caddyfile, checked once the
	// whole receiver is read.
	caddyfileRules []caddyfileRule

	// DeliverRaw is the target module, in the webhook.targets namespace,
	// selected by its "kind": http, exec or pull.
	DeliverRaw json.RawMessage `json:"deliver,omitempty" caddy:"namespace=webhook.targets inline_key=kind"`

	// DeliverySettings are the target's own retry and flow-control
	// settings; their JSON fields sit beside name and events.
	DeliverySettings
}

// targetFilter is a target's events filter.
type targetFilter struct {
	name   string
	events []string      // nil: all
	rule   *rules.Filter // nil: none
}

// provisionTargets names and loads the target modules and prepares the
// events filters.
func (rc *Receiver) provisionTargets(ctx caddy.Context) ([]namedTarget, error) {
	var (
		targets   []namedTarget
		seen      = make(map[string]bool)
		kindCount = make(map[string]int)
		filtered  bool
	)
	for i, tc := range rc.Targets {
		if tc == nil || len(tc.DeliverRaw) == 0 {
			return nil, fmt.Errorf("target #%d: deliver is required", i+1)
		}
		var probe struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(tc.DeliverRaw, &probe); err != nil || probe.Kind == "" {
			return nil, fmt.Errorf("target #%d: deliver needs a kind (http, exec, pull)", i+1)
		}
		kindCount[probe.Kind]++
		name := tc.Name
		if name == "" {
			name = probe.Kind
			if n := kindCount[probe.Kind]; n > 1 {
				name = fmt.Sprintf("%s-%d", probe.Kind, n)
			}
		}
		if !adminapi.ValidName(name) {
			return nil, fmt.Errorf("target #%d: name %q: use letters, digits, '.', '_' and '-' (at most 64)", i+1, name)
		}
		if seen[name] {
			return nil, fmt.Errorf("target #%d: name %q is used twice in this receiver; set name", i+1, name)
		}
		seen[name] = true
		for _, e := range tc.Events {
			if e == "" {
				return nil, fmt.Errorf("target %q: empty event type in events", name)
			}
		}
		retry, limits, err := tc.DeliverySettings.check()
		if err != nil {
			return nil, fmt.Errorf("target %q: %w", name, err)
		}
		rr, err := tc.compileRules()
		if err != nil {
			return nil, fmt.Errorf("target %q: %w", name, err)
		}
		rr.kind = probe.Kind
		mod, err := ctx.LoadModule(tc, "DeliverRaw")
		if err != nil {
			return nil, fmt.Errorf("target %q: %w", name, err)
		}
		t, ok := mod.(Target)
		if !ok {
			return nil, fmt.Errorf("target %q: module %T is not a webhook target", name, mod)
		}
		if _, pulled := t.(PullTarget); pulled {
			if err := tc.DeliverySettings.flowControlOnPull(); err != nil {
				return nil, fmt.Errorf("target %q: %w", name, err)
			}
		}
		targets = append(targets, namedTarget{
			name: name, target: withTransform(t, rr.transform),
			retry: retry,
			flow:  limits,
			rules: rr,
		})
		rc.filters = append(rc.filters, targetFilter{name: name, events: tc.Events, rule: rr.filter})
		rc.allTargets = append(rc.allTargets, name)
		filtered = filtered || len(tc.Events) > 0 || rr.filter != nil
	}
	if filtered {
		rc.allTargets = nil
	} else {
		rc.filters = nil
	}
	return targets, nil
}
