package caddywebhook

import (
	"slices"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

// runningConfig describes the running webhook app: the store, the routes,
// pauses, circuits and compiled rules of its config, its sources and its
// pull side. Start builds it once the app's parts run and publishes it with
// one atomic store (current, process.go); Stop clears it unless a newer
// app's has replaced it. The admin API, the dashboard and the rule test
// read it per request, because the admin server outlives config reloads
// while the app it talks to changes; nothing in it changes once published.
type runningConfig struct {
	Store queue.Store // the queue
	// keys are the store's keys under this config (App.Encryption).
	keys      queue.Keys
	Retention time.Duration
	// Routes are the (source, target) pairs of the running config; jobs
	// of any other pair are unroutable: no worker takes them.
	Routes []queue.Route
	// pauses is the app's copy of the store's pauses, refreshed at once
	// after the admin API changes them; nil when no pool runs.
	pauses *pauseSet
	// Circuits reports the routes whose circuit breaker is not closed;
	// nil when no target has one.
	Circuits func() map[queue.Route]queue.CircuitState
	// rules are each route's compiled rules, for the rule test and the
	// filters the job and event pages show.
	rules map[queue.Route]routeRules
	// sources are the receivers' sources (admin_sources.go).
	sources map[string]sourceConfig
	// pull is the pull side, nil without pull targets (pull.go).
	pull *pullSide
	// events emits through the config's `events` app, nil without one
	// (a nil *caddyEvents emits nothing).
	events *caddyEvents
	// maxTails and tailMaxLag are App.MaxTails and App.TailMaxLag, 0 for
	// their defaults.
	maxTails   int
	tailMaxLag time.Duration
}

// routable reports whether the running config delivers jobs of source to
// target.
func (q *runningConfig) routable(source, target string) bool {
	return slices.Contains(q.Routes, queue.Route{Source: source, Target: target})
}

// source returns a source of the running config.
func (q *runningConfig) source(name string) (sourceConfig, bool) {
	cfg, ok := q.sources[name]
	return cfg, ok
}

// routeRules returns the compiled rules of route in the running config.
func (q *runningConfig) routeRules(route queue.Route) (routeRules, bool) {
	rr, ok := q.rules[route]
	return rr, ok
}

// filterTook returns the filter of route in the running config, when it
// has one: for the job and event pages, a job of that route is an event
// its filter took.
func (q *runningConfig) filterTook(route queue.Route) string {
	rr, ok := q.rules[route]
	if !ok {
		return ""
	}
	if srcs := rr.filter.Sources(); len(srcs) > 0 {
		return srcs[0]
	}
	return ""
}
