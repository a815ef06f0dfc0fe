package caddywebhook

import (
	"cmp"
	"errors"
	"net/http"
	"net/url"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/search"
	"github.com/caddywebhook/caddywebhook/caddywebhook/rules"
	"github.com/caddywebhook/caddywebhook/queue"
)

// Search by content: the where parameter of GET /webhook/events and GET
// /webhook/jobs (and of POST /webhook/replay, replay_query.go). The
// expression is a content rule's, over the same variables as a target's
// filter sees at delivery (the stored body and headers, no query string),
// compiled when the request arrives, so that a bad one is a 400 with its
// position, as the config load reports a filter's. Package
// internal/search walks the store with it, within a request's budget.

// newSearcher reads where, the filters the store applies (source,
// event_type, since, until), the cursor after which the walk starts and
// the limit from query; jobs compiles where for a search of jobs (the job
// variable).
func (a *adminAPI) newSearcher(q *runningConfig, query url.Values, jobs bool) (*search.Searcher, error) {
	src := query.Get("where")
	where, err := rules.CompileSearch(src, jobs, rules.Options{})
	if err != nil {
		return nil, badParam("where", "%v", err)
	}
	if query.Get("delivery_id") != "" {
		return nil, badParam("delivery_id", "does not go with where: a delivery id names one event already")
	}
	f, err := a.parseEventFilter(query.Get)
	if err != nil {
		return nil, err
	}
	s := &search.Searcher{
		Store:  q.Store,
		Where:  where,
		Scan:   queue.ScanParams{Source: f.Source, EventType: f.EventType, Since: f.Since, Until: f.Until},
		Budget: a.search,
		Report: adminapi.Search{Where: src},
	}
	if s.Limit, s.Scan.After, err = pageParams(query.Get); err != nil {
		return nil, err
	}
	return s, nil
}

// storedJob is a stored event as a job for target: what the rules see of
// it, a search's expression and, for target, its transform.
func storedJob(ev *queue.EventDetail, target string) *queue.Job {
	return &queue.Job{EventID: ev.ID, Source: ev.Source, DeliveryID: ev.DeliveryID, EventType: ev.EventType,
		Target: target, Headers: ev.Headers, Payload: ev.Payload}
}

// handleEventSearch is GET /webhook/events with where: the matching
// events, oldest first.
func (a *adminAPI) handleEventSearch(w http.ResponseWriter, r *http.Request, q *runningConfig) error {
	query := r.URL.Query()
	s, err := a.newSearcher(q, query, false)
	if err != nil {
		return err
	}
	var hasTarget *bool
	switch v := query.Get("has_target"); v {
	case "":
	case "true", "false":
		b := v == "true"
		hasTarget = &b
	default:
		return badParam("has_target", "must be true or false, not %q", v)
	}
	limit := cmp.Or(s.Limit, queue.DefaultListLimit)
	resp := adminapi.EventSearchResponse{EventPage: queue.EventPage{Events: []queue.EventSummary{}}}
	next, err := s.Run(r.Context(), func(ev *queue.EventDetail, _ []queue.JobSummary) (bool, error) {
		if hasTarget != nil && (len(ev.Jobs) > 0) != *hasTarget {
			return false, nil
		}
		ok, err := s.Match(rules.NewInput(jobEvent(storedJob(ev, ""))), ev.ID)
		if ok {
			resp.Events = append(resp.Events, ev.EventSummary)
		}
		return len(resp.Events) >= limit, err
	})
	if err != nil {
		return searchError(err)
	}
	resp.NextCursor, resp.Search = next, s.Report
	return adminapi.WriteJSON(w, http.StatusOK, resp)
}

// handleJobSearch is GET /webhook/jobs with where: the matching jobs, by
// event then job, oldest first. The expression sees each job beside its
// event (the job variable); status and target narrow the jobs first.
func (a *adminAPI) handleJobSearch(w http.ResponseWriter, r *http.Request, q *runningConfig) error {
	query := r.URL.Query()
	s, err := a.newSearcher(q, query, true)
	if err != nil {
		return err
	}
	status := queue.Status(query.Get("status"))
	if status != "" && !status.Valid() {
		return badParam("status", "must be pending, blocked, running, done or dead, not %q", status)
	}
	target := query.Get("target")
	limit := cmp.Or(s.Limit, queue.DefaultListLimit)
	resp := adminapi.JobSearchResponse{JobPage: queue.JobPage{Jobs: []queue.JobSummary{}}}
	next, err := s.Run(r.Context(), func(ev *queue.EventDetail, jobs []queue.JobSummary) (bool, error) {
		var in *rules.Input
		var evt *rules.Event
		for _, j := range jobs {
			if (status != "" && j.Status != status) || (target != "" && j.Target != target) {
				continue
			}
			if in == nil {
				// One input for the event's jobs: its body is parsed once.
				evt = jobEvent(storedJob(ev, ""))
				in = rules.NewInput(evt)
			}
			evt.Job = &rules.Job{ID: j.ID, Target: j.Target, Status: string(j.Status), Attempts: j.Attempts,
				Replays: j.Replays, LastError: j.LastError}
			ok, err := s.Match(in, ev.ID)
			if err != nil {
				return true, err
			}
			if ok {
				resp.Jobs = append(resp.Jobs, j)
			}
		}
		return len(resp.Jobs) >= limit, nil
	})
	if err != nil {
		return searchError(err)
	}
	resp.NextCursor, resp.Search = next, s.Report
	return adminapi.WriteJSON(w, http.StatusOK, resp)
}

// searchError is storeError for a search, whose errors are the
// expression's (a 400 about where) or the store's.
func searchError(err error) error {
	if e := (*search.ExprError)(nil); errors.As(err, &e) {
		return badParam("where", "%s", e)
	}
	if errors.As(err, new(caddy.APIError)) {
		return err
	}
	return storeError(0, err)
}
