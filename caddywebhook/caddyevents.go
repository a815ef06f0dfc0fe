package caddywebhook

import (
	"errors"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"

	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/notify"
	"github.com/caddywebhook/caddywebhook/queue"
)

// The events this plugin emits through Caddy's `events` app, so other
// plugins can react (an `events` handler subscribed to one of them). Each
// carries the route and, where there is one, the job id and the error
// words; never a payload, a header or a secret. They come from the worker
// side and the operators' bulk writes only: nothing on a sender's
// request emits one.
const (
	// EventJobDead: a job went dead. Data: source, target, job_id,
	// delivery_id, attempt, error.
	EventJobDead = "webhook_job_dead"
	// EventCircuitOpened: a route's circuit breaker opened. Data:
	// source, target.
	EventCircuitOpened = "webhook_circuit_opened"
	// EventCircuitClosed: a route's circuit breaker closed again. Data:
	// source, target.
	EventCircuitClosed = "webhook_circuit_closed"
	// EventBacklogStale: a route's oldest pending job is older than
	// notify's pending_age (checked only with notify and pending_age set).
	// Data: source, target, pending, oldest_pending_seconds.
	EventBacklogStale = "webhook_backlog_stale"
	// EventBulkReplay: an operator replayed jobs in bulk through the admin
	// API, by query (where) or every dead job of a route. Data: the
	// request's where, source, target, status, event_type, since, until,
	// rate, cursor and next_cursor, and its counts: events, replayed,
	// resent, added, in_flight, unroutable, scanned, duration_ms.
	EventBulkReplay = "webhook_bulk_replay"
)

// eventErrorLen bounds the error words an event carries.
const eventErrorLen = 512

// caddyEvents emits through the `events` app of the config, when the
// config has one; a nil *caddyEvents emits nothing.
type caddyEvents struct {
	ctx caddy.Context
	app *caddyevents.App
}

// loadCaddyEvents returns the config's `events` app as an emitter, or nil
// when the config has none: the plugin does not load it only to emit.
func loadCaddyEvents(ctx caddy.Context) (*caddyEvents, error) {
	v, err := ctx.AppIfConfigured("events")
	if errors.Is(err, caddy.ErrNotConfigured) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	app, ok := v.(*caddyevents.App)
	if !ok {
		return nil, nil
	}
	return &caddyEvents{ctx: ctx, app: app}, nil
}

func (e *caddyEvents) emit(name string, data map[string]any) {
	if e == nil || !e.app.ShouldEmit(name) {
		return
	}
	e.app.Emit(e.ctx, name, data)
}

func (e *caddyEvents) jobDead(job *queue.Job, c queue.Completion) {
	if e == nil || job.Source == notify.Source {
		return
	}
	e.emit(EventJobDead, map[string]any{
		"source":      job.Source,
		"target":      job.Target,
		"job_id":      job.ID,
		"delivery_id": job.DeliveryID,
		"attempt":     job.Attempt,
		"error":       queue.SafeLine(c.Error, eventErrorLen),
	})
}

func (e *caddyEvents) circuitChanged(route queue.Route, open bool) {
	if e == nil || route.Source == notify.Source {
		return
	}
	name := EventCircuitClosed
	if open {
		name = EventCircuitOpened
	}
	e.emit(name, map[string]any{"source": route.Source, "target": route.Target})
}

func (e *caddyEvents) backlogStale(c queue.Count) {
	if e == nil {
		return
	}
	e.emit(EventBacklogStale, map[string]any{
		"source":                 c.Source,
		"target":                 c.Target,
		"pending":                c.Jobs,
		"oldest_pending_seconds": int64(c.OldestPending.Seconds()),
	})
}
