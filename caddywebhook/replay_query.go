package caddywebhook

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/search"
	"github.com/caddywebhook/caddywebhook/caddywebhook/rules"
	"github.com/caddywebhook/caddywebhook/queue"
)

// Replay by query: POST /webhook/replay with where. This file reads the
// request and writes its audit; package internal/search walks the events,
// decides for each what is queued (a dead job replayed, a done one resent,
// a new job for a named target with status=any) and queues it in chunks.

// defaultReplayMatches is how many matches a replay by query lists
// unless its limit says.
const defaultReplayMatches = 20

// handleReplayQuery is POST /webhook/replay with where.
func (a *adminAPI) handleReplayQuery(w http.ResponseWriter, r *http.Request, q *runningConfig) error {
	start := time.Now()
	query := r.URL.Query()
	p := &search.Replay{Store: q.Store, Target: query.Get("target"), Routable: q.routable,
		Event: func(ev *queue.EventDetail) *rules.Event { return jobEvent(storedJob(ev, "")) }}
	switch st := query.Get("status"); st {
	case string(queue.StatusDead), string(queue.StatusDone):
		p.Wanted = []queue.Status{queue.Status(st)}
	case "any":
		p.Wanted, p.Add = []queue.Status{queue.StatusDead, queue.StatusDone}, true
	case "":
		return badParam("status", "is required with where: dead (replay the dead jobs), done (resend the delivered ones) or any (both, and a new job for a target named that an event has none for)")
	default:
		return badParam("status", "must be dead, done or any, not %q", st)
	}
	source := query.Get("source")
	if p.Target != "" && !slices.ContainsFunc(q.Routes, func(rt queue.Route) bool {
		return rt.Target == p.Target && (source == "" || rt.Source == source)
	}) {
		return badParam("target", "%q is not a target of %s in the running config", p.Target, sourceName(source))
	}
	var err error
	if p.Search, err = a.newSearcher(q, query, false); err != nil {
		return err
	}
	p.Limit = cmp.Or(p.Search.Limit, defaultReplayMatches)
	if p.DryRun, err = boolParam(query.Get, "dry_run"); err != nil {
		return err
	}
	show, err := boolParam(query.Get, "show_request")
	if err != nil {
		return err
	}
	if show {
		p.Show = q.replayRequest
	}
	p.Due = a.clock()
	if v := query.Get("rate"); v != "" {
		rate, err := parseRate(v)
		if err != nil {
			return badParam("rate", "%v", err)
		}
		p.Every = rate.Per / time.Duration(rate.N)
	}
	if v := query.Get("due"); v != "" {
		if p.Every == 0 {
			return badParam("due", "goes with rate: it is when the first job of a spread replay is due")
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return badParam("due", "must be an RFC 3339 time (the next_due of the answer before), not %q", v)
		}
		// A spread continued late starts now, not in the past: the jobs
		// would all be due at once.
		if t.After(p.Due) {
			p.Due = t
		}
	}

	_, err = p.Run(r.Context())
	if !p.DryRun {
		a.auditReplay(q, query, p, start, err)
	}
	if err != nil {
		return replayFailed(p, err)
	}
	return adminapi.WriteJSON(w, http.StatusOK, p.Response)
}

// sourceName names source in a message: "source github", or "any
// source" for none.
func sourceName(source string) string {
	if source == "" {
		return "any source"
	}
	return "source " + source
}

// replayRequest is, for show_request, the request target would receive
// of ev after its transform, as the rule test renders it.
func (q *runningConfig) replayRequest(ev *queue.EventDetail, target string) (adminapi.ReplayRequest, bool) {
	rr, ok := q.routeRules(queue.Route{Source: ev.Source, Target: target})
	if !ok {
		return adminapi.ReplayRequest{}, false
	}
	t := rr.test(storedJob(ev, target))
	return adminapi.ReplayRequest{Source: ev.Source, Target: target, Event: ev.ID,
		Request: t.Request, TransformError: t.TransformError}, true
}

// replayFailed is the answer to a replay that failed part way: the jobs
// queued before stay queued, and the message says how many.
func replayFailed(p *search.Replay, err error) error {
	n := p.Queued()
	if p.DryRun || n == 0 {
		return searchError(err)
	}
	if e := (*search.ExprError)(nil); errors.As(err, &e) {
		return badParam("where", "%s (%d jobs were queued before it, up to that event)", e, n)
	}
	return storeError(0, fmt.Errorf("replay by query (%d jobs queued before the error): %w", n, err))
}

// auditReplay logs one line and emits one Caddy event for a bulk replay:
// the query, the filters and the counts; never a body or a header.
func (a *adminAPI) auditReplay(q *runningConfig, query url.Values, p *search.Replay, start time.Time, err error) {
	get := query.Get
	data := map[string]any{
		"where": get("where"), "source": get("source"), "target": get("target"), "status": get("status"),
		"event_type": get("event_type"), "since": get("since"), "until": get("until"), "rate": get("rate"),
		"cursor": get("cursor"), "next_cursor": p.Response.NextCursor,
		"events": p.Response.Events, "replayed": p.Response.Replayed, "resent": p.Response.Resent, "added": p.Response.Added,
		"in_flight": p.Response.InFlight, "unroutable": p.Response.Unroutable, "scanned": p.Search.Report.Scanned,
		"duration_ms": time.Since(start).Milliseconds(),
	}
	fields := make([]zap.Field, 0, len(data)+1)
	for _, k := range slices.Sorted(maps.Keys(data)) {
		fields = append(fields, zap.Any(k, data[k]))
	}
	if err != nil {
		fields = append(fields, zap.Error(err))
	}
	adminLogger().Info("webhook jobs replayed by query", fields...)
	q.events.emit(EventBulkReplay, data)
}
