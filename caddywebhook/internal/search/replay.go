package search

import (
	"context"
	"slices"
	"time"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/caddywebhook/rules"
	"github.com/caddywebhook/caddywebhook/queue"
)

// Replay by query: the search picks the events; for each, the newest job
// of each of its targets (or of the one target named) says whether the
// event reached it, and decides what is queued: a dead job is replayed, a
// done one resent, and with Add a named target the event has no job for
// gets a new one, as `resend --event` makes. Each (event, target) is
// queued at most once per request, however the filters overlap; a job
// pending, running or blocked is on its way already and left alone. The
// jobs go to the store in chunks as they are found (Requeue), each due
// now or, with a rate, spread out. The spread is the jobs' due times,
// kept in the store like any other: it survives a restart and holds for
// every instance sharing the queue, which a timer in this process would
// not. The target's own rate limit still applies on delivery.

// Requeuer is the store's side of a replay.
type Requeuer interface {
	Requeue(ctx context.Context, items []queue.Requeue) ([]int64, error)
}

// Replay is one request of a replay by query. The caller sets the fields
// before Response and calls Run; Response is the answer, filled as it
// goes (also when Run fails part way: what was queued stays queued).
type Replay struct {
	Search *Searcher
	Store  Requeuer
	// Event is what the search's expression sees of a stored event.
	Event func(ev *queue.EventDetail) *rules.Event
	// Routable reports whether the running config delivers to target
	// for source: a job for a route it does not is left as it is.
	Routable func(source, target string) bool
	// Show, if not nil, is called for the first match of each route: the
	// request its target would receive (show_request).
	Show   func(ev *queue.EventDetail, target string) (adminapi.ReplayRequest, bool)
	Target string         // the target named; empty: every target of each event
	Wanted []queue.Status // the statuses of the jobs queued again
	Add    bool           // a named target the event has no job for gets one
	DryRun bool
	Limit  int           // matches listed
	Due    time.Time     // when the first job is due
	Every  time.Duration // the spread of a rate; 0 for none

	Response adminapi.ReplayQueryResponse

	ctx context.Context
	// planned counts the jobs planned so far, which places each in the
	// spread.
	planned int
	items   []queue.Requeue
	pending []adminapi.ReplayMatch // items' matches, in step
	shown   map[queue.Route]bool
}

// Run walks the search and queues what it finds (a dry run only counts),
// and returns the cursor the next request continues from.
func (p *Replay) Run(ctx context.Context) (int64, error) {
	p.ctx, p.shown = ctx, map[queue.Route]bool{}
	p.Response.Matches = []adminapi.ReplayMatch{}
	next, err := p.Search.Run(ctx, p.visit)
	if err == nil {
		err = p.flush()
	}
	p.Response.DryRun, p.Response.NextCursor, p.Response.Search = p.DryRun, next, p.Search.Report
	if p.Every > 0 {
		p.Response.NextDue = p.Due.Add(time.Duration(p.planned) * p.Every).UTC()
	}
	return next, err
}

// Queued is how many jobs the request queued (or would).
func (p *Replay) Queued() int {
	return p.Response.Replayed + p.Response.Resent + p.Response.Added
}

// visit plans what is queued for one event the search walks.
func (p *Replay) visit(ev *queue.EventDetail, jobs []queue.JobSummary) (bool, error) {
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
	if p.Target != "" {
		if _, ok := newest[p.Target]; !ok && !p.Routable(ev.Source, p.Target) {
			return false, nil // an event of a source without the target
		}
		targets = []string{p.Target}
	}
	ok, err := p.Search.Match(rules.NewInput(p.Event(ev)), ev.ID)
	if err != nil || !ok {
		return false, err
	}
	p.Response.Events++
	for _, t := range targets {
		m := adminapi.ReplayMatch{Event: ev.ID, Source: ev.Source, DeliveryID: ev.DeliveryID, EventType: ev.EventType, Target: t}
		var it queue.Requeue
		j, has := newest[t]
		switch {
		case !has && !p.Add:
			continue
		case !has:
			m.Action, it = adminapi.ReplayActionAdd, queue.Requeue{EventID: ev.ID, Target: t}
		case j.Status == queue.StatusPending || j.Status == queue.StatusRunning || j.Status == queue.StatusBlocked:
			p.Response.InFlight++
			continue
		case !slices.Contains(p.Wanted, j.Status):
			continue
		default:
			m.Job, m.Status, it = j.ID, j.Status, queue.Requeue{JobID: j.ID}
			m.Action = adminapi.ReplayActionResend
			if j.Status == queue.StatusDead {
				m.Action = adminapi.ReplayActionReplay
			}
		}
		if !p.Routable(ev.Source, t) {
			p.Response.Unroutable++
			continue
		}
		m.Due = p.Due.Add(time.Duration(p.planned) * p.Every).UTC()
		if p.Every > 0 {
			it.RunAt = m.Due
		}
		p.planned++
		p.show(ev, t)
		p.items, p.pending = append(p.items, it), append(p.pending, m)
	}
	if len(p.items) >= queue.RequeueChunk {
		return false, p.flush()
	}
	return false, nil
}

// show adds, for the first match of a route, the request its target would
// receive, when the request asked for it.
func (p *Replay) show(ev *queue.EventDetail, target string) {
	route := queue.Route{Source: ev.Source, Target: target}
	if p.Show == nil || p.shown[route] {
		return
	}
	p.shown[route] = true
	if r, ok := p.Show(ev, target); ok {
		p.Response.Requests = append(p.Response.Requests, r)
	}
}

// flush queues the planned items (a dry run only counts them) and lists
// the first matches.
func (p *Replay) flush() error {
	if len(p.items) == 0 {
		return nil
	}
	var ids []int64
	var err error
	if !p.DryRun {
		ids, err = p.Store.Requeue(p.ctx, p.items)
	}
	for i, m := range p.pending {
		if !p.DryRun {
			if i >= len(ids) || ids[i] == 0 {
				// Not queued: the job changed since the search read it
				// (another replay, a worker), or failed with err.
				if err == nil {
					p.Response.InFlight++
				}
				continue
			}
			m.Job = ids[i]
		}
		switch m.Action {
		case adminapi.ReplayActionReplay:
			p.Response.Replayed++
		case adminapi.ReplayActionResend:
			p.Response.Resent++
		default:
			p.Response.Added++
		}
		if len(p.Response.Matches) < p.Limit {
			p.Response.Matches = append(p.Response.Matches, m)
		}
	}
	p.items, p.pending = p.items[:0], p.pending[:0]
	return err
}
