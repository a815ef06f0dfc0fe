package caddywebhook

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/caddywebhook/rules"
	"github.com/caddywebhook/caddywebhook/queue"
)

// Replay by query: POST /webhook/replay with where. The search of
// search.go picks the events; for each, the newest job of each of its
// targets (or of the one target named) says whether the event reached it,
// and decides what is queued: a dead job is replayed, a done one resent,
// and with status=any a named target the event has no job for gets a new
// one, as `resend --event` makes. Each (event, target) is queued at most
// once per request, however the filters overlap; a job pending, running
// or blocked is on its way already and left alone. The jobs go to the
// store in chunks as they are found (EventStore.Requeue), each due now
// or, with a rate, spread out. The spread is the jobs' due times, kept in
// the store like any other: it survives a restart and holds for every
// instance sharing the queue, which a timer in this process would not.
// The target's own rate limit still applies on delivery.

// defaultReplayMatches is how many matches a replay by query lists
// unless its limit says.
const defaultReplayMatches = 20

// replayPlan is one request of a replay by query.
type replayPlan struct {
	ctx    context.Context
	q      *runningConfig
	s      *searcher
	target string         // the target named; empty: every target of each event
	wanted []queue.Status // the statuses of the jobs queued again
	add    bool           // a named target the event has no job for gets one
	dryRun bool
	show   bool // show_request: what each route's target would receive
	limit  int  // matches listed
	due    time.Time
	every  time.Duration // the spread of a rate; 0 for none
	// planned counts the jobs planned so far, which places each in the
	// spread.
	planned int
	items   []queue.Requeue
	pending []adminapi.ReplayMatch // items' matches, in step
	shown   map[queue.Route]bool
	resp    adminapi.ReplayQueryResponse
}

// handleReplayQuery is POST /webhook/replay with where.
func (a *adminAPI) handleReplayQuery(w http.ResponseWriter, r *http.Request, q *runningConfig) error {
	start := time.Now()
	query := r.URL.Query()
	p := &replayPlan{ctx: r.Context(), q: q, target: query.Get("target"), shown: map[queue.Route]bool{},
		resp: adminapi.ReplayQueryResponse{Matches: []adminapi.ReplayMatch{}}}
	switch st := query.Get("status"); st {
	case string(queue.StatusDead), string(queue.StatusDone):
		p.wanted = []queue.Status{queue.Status(st)}
	case "any":
		p.wanted, p.add = []queue.Status{queue.StatusDead, queue.StatusDone}, true
	case "":
		return badParam("status", "is required with where: dead (replay the dead jobs), done (resend the delivered ones) or any (both, and a new job for a target named that an event has none for)")
	default:
		return badParam("status", "must be dead, done or any, not %q", st)
	}
	source := query.Get("source")
	if p.target != "" && !slices.ContainsFunc(q.Routes, func(rt queue.Route) bool {
		return rt.Target == p.target && (source == "" || rt.Source == source)
	}) {
		return badParam("target", "%q is not a target of %s in the running config", p.target, sourceName(source))
	}
	var err error
	if p.s, err = a.newSearcher(q, query, false); err != nil {
		return err
	}
	p.limit = cmp.Or(p.s.limit, defaultReplayMatches)
	if p.dryRun, err = parseFlag(query, "dry_run"); err != nil {
		return err
	}
	if p.show, err = parseFlag(query, "show_request"); err != nil {
		return err
	}
	p.due = a.clock()
	if v := query.Get("rate"); v != "" {
		rate, err := parseRate(v)
		if err != nil {
			return badParam("rate", "%v", err)
		}
		p.every = rate.Per / time.Duration(rate.N)
	}
	if v := query.Get("due"); v != "" {
		if p.every == 0 {
			return badParam("due", "goes with rate: it is when the first job of a spread replay is due")
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return badParam("due", "must be an RFC 3339 time (the next_due of the answer before), not %q", v)
		}
		// A spread continued late starts now, not in the past: the jobs
		// would all be due at once.
		if t.After(p.due) {
			p.due = t
		}
	}

	next, err := p.s.run(p.ctx, p.visit)
	if err == nil {
		err = p.flush()
	}
	p.resp.DryRun, p.resp.NextCursor, p.resp.Search = p.dryRun, next, p.s.report
	if p.every > 0 {
		p.resp.NextDue = p.due.Add(time.Duration(p.planned) * p.every).UTC()
	}
	if !p.dryRun {
		a.auditReplay(q, query, p, start, err)
	}
	if err != nil {
		return p.failed(err)
	}
	return adminapi.WriteJSON(w, http.StatusOK, p.resp)
}

// sourceName names source in a message: "source github", or "any
// source" for none.
func sourceName(source string) string {
	if source == "" {
		return "any source"
	}
	return "source " + source
}

// visit plans what is queued for one event the search walks.
func (p *replayPlan) visit(ev *queue.EventDetail, jobs []queue.JobSummary) (bool, error) {
	// The newest job of each target stands for whether the event reached
	// it; jobs come in id order.
	newest := make(map[string]queue.JobSummary, len(jobs))
	var targets []string
	for _, j := range jobs {
		if _, ok := newest[j.Target]; !ok {
			targets = append(targets, j.Target)
		}
		newest[j.Target] = j
	}
	if p.target != "" {
		if _, ok := newest[p.target]; !ok && !p.q.routable(ev.Source, p.target) {
			return false, nil // an event of a source without the target
		}
		targets = []string{p.target}
	}
	ok, err := p.s.match(rules.NewInput(jobEvent(storedJob(ev, ""))), ev.ID)
	if err != nil || !ok {
		return false, err
	}
	p.resp.Events++
	for _, t := range targets {
		m := adminapi.ReplayMatch{Event: ev.ID, Source: ev.Source, DeliveryID: ev.DeliveryID, EventType: ev.EventType, Target: t}
		var it queue.Requeue
		j, has := newest[t]
		switch {
		case !has && !p.add:
			continue
		case !has:
			m.Action, it = adminapi.ReplayActionAdd, queue.Requeue{EventID: ev.ID, Target: t}
		case j.Status == queue.StatusPending || j.Status == queue.StatusRunning || j.Status == queue.StatusBlocked:
			p.resp.InFlight++
			continue
		case !slices.Contains(p.wanted, j.Status):
			continue
		default:
			m.Job, m.Status, it = j.ID, j.Status, queue.Requeue{JobID: j.ID}
			m.Action = adminapi.ReplayActionResend
			if j.Status == queue.StatusDead {
				m.Action = adminapi.ReplayActionReplay
			}
		}
		if !p.q.routable(ev.Source, t) {
			p.resp.Unroutable++
			continue
		}
		m.Due = p.due.Add(time.Duration(p.planned) * p.every).UTC()
		if p.every > 0 {
			it.RunAt = m.Due
		}
		p.planned++
		if p.show {
			p.showRequest(ev, t)
		}
		p.items, p.pending = append(p.items, it), append(p.pending, m)
	}
	if len(p.items) >= queue.RequeueChunk {
		return false, p.flush()
	}
	return false, nil
}

// showRequest renders, for the first match of a route, the request its
// target would receive, as the rule test does.
func (p *replayPlan) showRequest(ev *queue.EventDetail, target string) {
	route := queue.Route{Source: ev.Source, Target: target}
	rr, ok := p.q.routeRules(route)
	if p.shown[route] || !ok {
		return
	}
	p.shown[route] = true
	t := rr.test(storedJob(ev, target))
	p.resp.Requests = append(p.resp.Requests, adminapi.ReplayRequest{Source: ev.Source, Target: target, Event: ev.ID,
		Request: t.Request, TransformError: t.TransformError})
}

// flush queues the planned items (a dry run only counts them) and lists
// the first matches.
func (p *replayPlan) flush() error {
	if len(p.items) == 0 {
		return nil
	}
	var ids []int64
	var err error
	if !p.dryRun {
		ids, err = p.q.Store.Requeue(p.ctx, p.items)
	}
	for i, m := range p.pending {
		if !p.dryRun {
			if i >= len(ids) || ids[i] == 0 {
				// Not queued: the job changed since the search read it
				// (another replay, a worker), or failed with err.
				if err == nil {
					p.resp.InFlight++
				}
				continue
			}
			m.Job = ids[i]
		}
		switch m.Action {
		case adminapi.ReplayActionReplay:
			p.resp.Replayed++
		case adminapi.ReplayActionResend:
			p.resp.Resent++
		default:
			p.resp.Added++
		}
		if len(p.resp.Matches) < p.limit {
			p.resp.Matches = append(p.resp.Matches, m)
		}
	}
	p.items, p.pending = p.items[:0], p.pending[:0]
	return err
}

// queued is how many jobs the request queued (or would).
func (p *replayPlan) queued() int { return p.resp.Replayed + p.resp.Resent + p.resp.Added }

// failed is the answer to a replay that failed part way: the jobs
// queued before stay queued, and the message says how many.
func (p *replayPlan) failed(err error) error {
	n := p.queued()
	if p.dryRun || n == 0 {
		return searchError(err)
	}
	var apiErr caddy.APIError
	if errors.As(err, &apiErr) {
		apiErr.Err = fmt.Errorf("%w (%d jobs were queued before it, up to that event)", apiErr.Err, n)
		return apiErr
	}
	return storeError(0, fmt.Errorf("replay by query (%d jobs queued before the error): %w", n, err))
}

// auditReplay logs one line and emits one Caddy event for a bulk replay:
// the query, the filters and the counts; never a body or a header.
func (a *adminAPI) auditReplay(q *runningConfig, query url.Values, p *replayPlan, start time.Time, err error) {
	get := query.Get
	data := map[string]any{
		"where": get("where"), "source": get("source"), "target": get("target"), "status": get("status"),
		"event_type": get("event_type"), "since": get("since"), "until": get("until"), "rate": get("rate"),
		"cursor": get("cursor"), "next_cursor": p.resp.NextCursor,
		"events": p.resp.Events, "replayed": p.resp.Replayed, "resent": p.resp.Resent, "added": p.resp.Added,
		"in_flight": p.resp.InFlight, "unroutable": p.resp.Unroutable, "scanned": p.s.report.Scanned,
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
