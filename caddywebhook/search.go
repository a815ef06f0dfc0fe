package caddywebhook

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/caddywebhook/rules"
	"github.com/caddywebhook/caddywebhook/queue"
)

// Search by content: the where parameter of GET /webhook/events and GET
// /webhook/jobs (and of POST /webhook/replay, replay_query.go). The
// expression is a content rule's, over the same variables as a target's
// filter sees at delivery (the stored body and headers, no query string),
// compiled when the request arrives, so that a bad one is a 400 with its
// position, as the config load reports a filter's. It runs here, on the
// events that the store's ScanEvents reads page by page in id order after
// the cursor (queue knows nothing of CEL), and one request walks for a
// bounded time and number of events: a search that did not reach the
// newest event answers with the cursor to continue from, rather than
// holding its request for minutes on a large store.

// The bounds of one request of a search, unless adminAPI.search sets
// others: how long it walks the store, and how many events it evaluates
// the expression on. The time is the one that matters; the count caps a
// store whose pages cost almost nothing to walk.
const (
	defaultSearchTime = 5 * time.Second
	defaultSearchRows = 1_000_000
)

// searchBudget bounds one request of a search; zero fields take the
// defaults.
type searchBudget struct {
	time time.Duration
	rows int
}

// searcher runs one request of a search: the expression, the filters the
// store applies, and the report the answer carries.
type searcher struct {
	store  queue.Store
	where  *rules.Filter
	scan   queue.ScanParams
	budget searchBudget
	// limit is the request's limit parameter, 0 when not given: how many
	// matches a page lists.
	limit  int
	report adminapi.Search
}

// newSearcher reads where, the filters the store applies (source,
// event_type, since, until), the cursor after which the walk starts and
// the limit from query; jobs compiles where for a search of jobs (the job
// variable).
func (a *adminAPI) newSearcher(q *runningConfig, query url.Values, jobs bool) (*searcher, error) {
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
	s := &searcher{
		store:  q.Store,
		where:  where,
		scan:   queue.ScanParams{Source: f.Source, EventType: f.EventType, Since: f.Since, Until: f.Until},
		budget: searchBudget{time: cmp.Or(a.search.time, defaultSearchTime), rows: cmp.Or(a.search.rows, defaultSearchRows)},
		report: adminapi.Search{Where: src},
	}
	if s.limit, s.scan.After, err = pageParams(query.Get); err != nil {
		return nil, err
	}
	return s, nil
}

// visitor is called with each event a search walks that the store's
// filters select, and the event's jobs as the jobs listing shows them. It
// returns done when the request has what it needs.
type visitor func(ev *queue.EventDetail, jobs []queue.JobSummary) (done bool, err error)

// run walks the store from the cursor and calls visit for each event,
// until visit is done, the walk reaches the newest event, or the budget is
// spent. It returns where the next request continues: the last event
// visited, or the end of the last page walked; 0 at the newest event.
func (s *searcher) run(ctx context.Context, visit visitor) (int64, error) {
	start := time.Now()
	p := s.scan
	for {
		page, err := s.store.ScanEvents(ctx, p)
		if err != nil {
			return 0, err
		}
		k := 0
		for i := range page.Events {
			ev := &page.Events[i]
			for k < len(page.Jobs) && page.Jobs[k].EventID < ev.ID {
				k++
			}
			n := k
			for n < len(page.Jobs) && page.Jobs[n].EventID == ev.ID {
				n++
			}
			var done bool
			if ev.ReadError != "" {
				// Sealed under a key the config lacks: an expression
				// on its empty body would say nothing true of it.
				s.report.Unread++
				if s.report.UnreadError == "" {
					s.report.UnreadError = ev.ReadError
				}
			} else {
				s.report.Scanned++
				if done, err = visit(ev, page.Jobs[k:n]); err != nil {
					return 0, err
				}
			}
			last := i == len(page.Events)-1 && page.Next == 0
			switch {
			case last:
			case done:
				s.report.Stopped = adminapi.SearchStoppedLimit
				return ev.ID, nil
			case s.report.Scanned >= s.budget.rows:
				s.report.Stopped = adminapi.SearchStoppedRows
				return ev.ID, nil
			case time.Since(start) >= s.budget.time:
				s.report.Stopped = adminapi.SearchStoppedTime
				return ev.ID, nil
			}
		}
		if page.Next == 0 {
			return 0, nil
		}
		p.After = page.Next
		if time.Since(start) >= s.budget.time {
			s.report.Stopped = adminapi.SearchStoppedTime
			return page.Next, nil
		}
	}
}

// match runs the expression on in, an input of event eventID. An
// evaluation error does not match and is counted, as a filter's would be
// at ingest; but an expression stopped by its cost or time limit, or one
// whose value is not a bool, ends the search with a 400 that says so,
// since it would fail the same way on the events to come.
func (s *searcher) match(in *rules.Input, eventID int64) (bool, error) {
	ok, err := s.where.Match(in)
	switch {
	case err == nil:
		return ok, nil
	case errors.Is(err, rules.ErrLimit):
		return false, badParam("where", "event %d: %s: the expression costs more than a content rule may on this event "+
			"(cost limit %d, %s for a loop); make it cheaper, or narrow the search so it reads less of each body",
			eventID, redactQuoted(err.Error()), rules.DefaultCostLimit, rules.DefaultTimeLimit)
	case errors.Is(err, rules.ErrNotBool):
		return false, badParam("where", "event %d: %s: a search must yield true or false", eventID, redactQuoted(err.Error()))
	}
	s.report.EvalErrors++
	if s.report.EvalError == "" {
		s.report.EvalError = redactQuoted(err.Error())
	}
	return false, nil
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
	limit := cmp.Or(s.limit, queue.DefaultListLimit)
	resp := adminapi.EventSearchResponse{EventPage: queue.EventPage{Events: []queue.EventSummary{}}}
	next, err := s.run(r.Context(), func(ev *queue.EventDetail, _ []queue.JobSummary) (bool, error) {
		if hasTarget != nil && (len(ev.Jobs) > 0) != *hasTarget {
			return false, nil
		}
		ok, err := s.match(rules.NewInput(jobEvent(storedJob(ev, ""))), ev.ID)
		if ok {
			resp.Events = append(resp.Events, ev.EventSummary)
		}
		return len(resp.Events) >= limit, err
	})
	if err != nil {
		return searchError(err)
	}
	resp.NextCursor, resp.Search = next, s.report
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
	limit := cmp.Or(s.limit, queue.DefaultListLimit)
	resp := adminapi.JobSearchResponse{JobPage: queue.JobPage{Jobs: []queue.JobSummary{}}}
	next, err := s.run(r.Context(), func(ev *queue.EventDetail, jobs []queue.JobSummary) (bool, error) {
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
			ok, err := s.match(in, ev.ID)
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
	resp.NextCursor, resp.Search = next, s.report
	return adminapi.WriteJSON(w, http.StatusOK, resp)
}

// searchError is storeError for a search, whose errors are the
// expression's (already a 400) or the store's.
func searchError(err error) error {
	if errors.As(err, new(caddy.APIError)) {
		return err
	}
	return storeError(0, err)
}

// parseFlag reads a boolean query parameter: true, false, or absent.
func parseFlag(query url.Values, name string) (bool, error) {
	switch v := query.Get(name); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, badParam(name, "must be true or false, not %q", v)
	}
}
