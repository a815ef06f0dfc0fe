package consumer

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/caddyserver/caddy/v2"

	httptarget "github.com/caddywebhook/caddywebhook/caddywebhook/targets/http"
)

// A listener forwards each event to the local URL of the first route whose
// event types take it, else to the default URL. An event that no route
// takes and no default gets is held (hold.go), never dropped.

// Route sends the events of some types to a local URL.
type Route struct {
	// Events are the event types the route takes: a type, or a prefix and
	// '*' ("invoice.*"), as a target's events are.
	Events []string
	// URL is the local app's URL for them.
	URL string
}

// ParseRoute reads one --forward-to value: a URL, the default route
// ("http://localhost:3000/webhooks", no Events), or event types and a URL
// ("invoice.*,customer.*=http://localhost:3000/billing").
func ParseRoute(s string) (Route, error) {
	if strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") {
		// A URL whose query holds '=' is still the default.
		return Route{URL: s}, nil
	}
	types, u, ok := strings.Cut(s, "=")
	if !ok {
		return Route{}, fmt.Errorf("--forward-to %q: give a URL, or event types and a URL as 'invoice.*=http://localhost:3000/billing'", s)
	}
	var r Route
	for t := range strings.SplitSeq(types, ",") {
		t = strings.TrimSpace(t)
		if t == "" {
			return Route{}, fmt.Errorf("--forward-to %q: an empty event type before '='", s)
		}
		if i := strings.IndexByte(t, '*'); i >= 0 && i != len(t)-1 {
			return Route{}, fmt.Errorf("--forward-to %q: '*' may only end an event type (%q)", s, t)
		}
		r.Events = append(r.Events, t)
	}
	r.URL = u
	return r, nil
}

// takes reports whether the route takes an event of type typ; a route
// without Events (the default) takes every event.
func (r Route) takes(typ string) bool {
	if len(r.Events) == 0 {
		return true
	}
	for _, e := range r.Events {
		if prefix, glob := strings.CutSuffix(e, "*"); glob && strings.HasPrefix(typ, prefix) || e == typ {
			return true
		}
	}
	return false
}

// destination is a route with the http target that forwards to it.
type destination struct {
	route  Route
	target *httptarget.Target
	url    *url.URL
	label  string // how a delivery line names it, when there are several
}

// destinations builds the http target of each route of cfg, the default
// last: the same request, headers and signature an upstream of the
// target gets, and the same reading of its answer.
func destinations(cfg ListenConfig) ([]*destination, error) {
	routes := append([]Route(nil), cfg.Routes...)
	if cfg.ForwardTo != "" {
		routes = append(routes, Route{URL: cfg.ForwardTo})
	}
	if len(routes) == 0 {
		return nil, errors.New("listen: --forward-to is required")
	}
	var out []*destination
	for _, r := range routes {
		u, err := url.Parse(r.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			closeDestinations(out)
			return nil, fmt.Errorf("listen: --forward-to must be an absolute http:// or https:// URL (%s)", routeName(r))
		}
		target := &httptarget.Target{URL: r.URL, Timeout: caddy.Duration(cfg.Timeout), SignSecret: cfg.SignSecret, Resign: cfg.Resign}
		if err := target.Provision(caddy.Context{Context: context.Background()}); err != nil {
			closeDestinations(out)
			return nil, fmt.Errorf("listen: %w", err)
		}
		out = append(out, &destination{route: r, target: target, url: u})
		if err := target.Validate(); err != nil {
			closeDestinations(out)
			return nil, fmt.Errorf("listen: %w", flagNames(err))
		}
	}
	if len(out) > 1 {
		for _, d := range out {
			d.label = "→ " + loggedURL(d.route.URL)
		}
	}
	return out, nil
}

// flagNames says the http target's option names as listen's flags.
func flagNames(err error) error {
	msg := strings.NewReplacer("resign and sign_secret", "--resign and --sign-secret-env", "sign_secret:", "--sign-secret-env:").Replace(err.Error())
	if msg == err.Error() {
		return err
	}
	return errors.New(msg)
}

// routeName names a route in an error, without its URL, which may hold a
// credential.
func routeName(r Route) string {
	if len(r.Events) == 0 {
		return "the default"
	}
	return "the route of " + strings.Join(r.Events, ",")
}

func closeDestinations(ds []*destination) {
	for _, d := range ds {
		_ = d.target.Cleanup()
	}
}

// destinationFor returns the destination of an event of type typ: the
// first route that takes it, else the default; nil when none does.
func (l *listener) destinationFor(typ string) *destination {
	for _, d := range l.dests {
		if d.route.takes(typ) {
			return d
		}
	}
	return nil
}

// routesText says where the listener forwards, for its Ready line:
// the default URL, or each route and the default.
func (l *listener) routesText() string {
	if len(l.dests) == 1 && len(l.dests[0].route.Events) == 0 {
		return loggedURL(l.dests[0].route.URL)
	}
	parts := make([]string, len(l.dests))
	for i, d := range l.dests {
		events := "everything else"
		if len(d.route.Events) > 0 {
			events = strings.Join(d.route.Events, ",")
		}
		parts[i] = events + " to " + loggedURL(d.route.URL)
	}
	if len(l.dests[len(l.dests)-1].route.Events) > 0 {
		parts = append(parts, "nothing else (held)")
	}
	return strings.Join(parts, "; ")
}
