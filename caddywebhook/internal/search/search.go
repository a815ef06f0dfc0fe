// Package search runs a search by content over a store: the walk behind
// the where parameter of the admin API's event and job listings and of a
// replay by query. The expression is a content rule's (package rules),
// compiled by the caller when the request arrives; it runs here on the
// events that the store's ScanEvents reads page by page in id order after
// a cursor (package queue knows nothing of CEL). One request walks for a
// bounded time and number of events: a search that did not reach the
// newest event answers with the cursor to continue from, rather than
// holding its request for minutes on a large store.
package search

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/caddywebhook/rules"
	"github.com/caddywebhook/caddywebhook/queue"
)

// The bounds of one request of a search unless its Budget says others:
// how long it walks the store, and how many events it evaluates the
// expression on. The time is the one that matters; the count caps a store
// whose pages cost almost nothing to walk.
const (
	DefaultTime = 5 * time.Second
	DefaultRows = 1_000_000
)

// Budget bounds one request of a search; zero fields take the defaults.
type Budget struct {
	Time time.Duration
	Rows int
}

// Scanner is the store's side of a search.
type Scanner interface {
	ScanEvents(ctx context.Context, p queue.ScanParams) (queue.ScanPage, error)
}

// Searcher runs one request of a search: the expression, the filters the
// store applies, and the report the answer carries.
type Searcher struct {
	Store  Scanner
	Where  *rules.Filter
	Scan   queue.ScanParams // the store's filters, and the cursor in After
	Budget Budget
	// Limit is the request's limit parameter, 0 when not given: how many
	// matches a page lists.
	Limit  int
	Report adminapi.Search
}

// Visitor is called with each event a search walks that the store's
// filters select and that the store could open, and the event's jobs as
// the jobs listing shows them. It returns done when the request has what
// it needs.
type Visitor func(ev *queue.EventDetail, jobs []queue.JobSummary) (done bool, err error)

// Run walks the store from the cursor and calls visit for each event,
// until visit is done, the walk reaches the newest event, or the budget is
// spent. It returns where the next request continues: the last event
// visited, or the end of the last page walked; 0 at the newest event. An
// event sealed under a key the store lacks is counted in Report.Unread,
// not visited: an expression on its empty body would say nothing true of
// it.
func (s *Searcher) Run(ctx context.Context, visit Visitor) (int64, error) {
	start := time.Now()
	budgetTime, budgetRows := s.Budget.Time, s.Budget.Rows
	if budgetTime == 0 {
		budgetTime = DefaultTime
	}
	if budgetRows == 0 {
		budgetRows = DefaultRows
	}
	p := s.Scan
	for {
		page, err := s.Store.ScanEvents(ctx, p)
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
				s.Report.Unread++
				if s.Report.UnreadError == "" {
					s.Report.UnreadError = ev.ReadError
				}
			} else {
				s.Report.Scanned++
				if done, err = visit(ev, page.Jobs[k:n]); err != nil {
					return 0, err
				}
			}
			last := i == len(page.Events)-1 && page.Next == 0
			switch {
			case last:
			case done:
				s.Report.Stopped = adminapi.SearchStoppedLimit
				return ev.ID, nil
			case s.Report.Scanned >= budgetRows:
				s.Report.Stopped = adminapi.SearchStoppedRows
				return ev.ID, nil
			case time.Since(start) >= budgetTime:
				s.Report.Stopped = adminapi.SearchStoppedTime
				return ev.ID, nil
			}
		}
		if page.Next == 0 {
			return 0, nil
		}
		p.After = page.Next
		if time.Since(start) >= budgetTime {
			s.Report.Stopped = adminapi.SearchStoppedTime
			return page.Next, nil
		}
	}
}

// ExprError is an expression that cannot go on: stopped by its cost or
// time limit on an event, or whose value was not a bool. It would fail the
// same way on the events to come, so the search ends with it, a 400 about
// the where parameter.
type ExprError struct{ msg string }

func (e *ExprError) Error() string { return e.msg }

// Match runs the expression on in, an input of event eventID. An
// evaluation error does not match and is counted, as a filter's would be
// at ingest; an *ExprError ends the search. Messages quote no value of
// the event.
func (s *Searcher) Match(in *rules.Input, eventID int64) (bool, error) {
	ok, err := s.Where.Match(in)
	switch {
	case err == nil:
		return ok, nil
	case errors.Is(err, rules.ErrLimit):
		return false, &ExprError{fmt.Sprintf("event %d: %s: the expression costs more than a content rule may on this event "+
			"(cost limit %d, %s for a loop); make it cheaper, or narrow the search so it reads less of each body",
			eventID, rules.RedactQuoted(err.Error()), rules.DefaultCostLimit, rules.DefaultTimeLimit)}
	case errors.Is(err, rules.ErrNotBool):
		return false, &ExprError{fmt.Sprintf("event %d: %s: a search must yield true or false", eventID, rules.RedactQuoted(err.Error()))}
	}
	s.Report.EvalErrors++
	if s.Report.EvalError == "" {
		s.Report.EvalError = rules.RedactQuoted(err.Error())
	}
	return false, nil
}
