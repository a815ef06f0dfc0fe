package caddywebhook

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

// activeQueue is what the admin API and the CLI act on: the store of the
// webhook app that started last and has not stopped yet. During a reload the
// new app starts before the old one stops, so the old app's Stop must not
// clear the new app's entry; hence the owner check.
type activeQueue struct {
	owner     *App // the app whose store this is; nil in tests without one
	Store     queue.Store
	Retention time.Duration // how long done jobs are kept (the dedupe memory)
	// Routes are the (source, target) pairs of the running config; jobs
	// of any other pair are unroutable: no worker takes them.
	Routes []queue.Route
	// pauses is the app's copy of the store's pauses, refreshed at once
	// after the admin API changes them; nil when no pool runs.
	pauses *pauseSet

	// Circuits reports the routes whose circuit breaker is not closed;
	// nil when no target has one.
	Circuits func() map[queue.Route]queue.CircuitState
}

// routable reports whether the running config delivers jobs of source to
// target.
func (q *activeQueue) routable(source, target string) bool {
	return slices.Contains(q.Routes, queue.Route{Source: source, Target: target})
}

var active atomic.Pointer[activeQueue]

// setActiveQueue makes owner's store, with its config's routes and its
// pause set and flow control (nil for none), the one the admin API uses.
func setActiveQueue(owner *App, store queue.Store, retention time.Duration, routes []queue.Route, pauses *pauseSet, flow *queue.Flow) {
	q := &activeQueue{owner: owner, Store: store, Retention: retention, Routes: routes, pauses: pauses}
	if flow != nil {
		q.Circuits = flow.Circuits
	}
	active.Store(q)
}

// clearActiveQueue forgets owner's store, unless another owner took over.
func clearActiveQueue(owner *App) {
	cur := active.Load()
	if cur != nil && cur.owner == owner {
		active.CompareAndSwap(cur, nil)
	}
}

// currentQueue returns the active store, or nil when no webhook app runs.
func currentQueue() *activeQueue { return active.Load() }
