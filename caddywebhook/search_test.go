package caddywebhook

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/caddywebhook/rules"
	"github.com/caddywebhook/caddywebhook/queue"
)

// searchRoutes are the routes of the search fixture's running config:
// shop's billing (with a transform) and mail, and crm's hub. Jobs of
// shop/gone are unroutable.
var searchRoutes = []queue.Route{{Source: "shop", Target: "billing"}, {Source: "shop", Target: "mail"}, {Source: "crm", Target: "hub"}}

// searchFixture is a store of events of several customers, types,
// sources, targets and statuses, by delivery id:
//
//	s-1 shop order.paid     A  billing done, mail done
//	s-2 shop order.paid     B  billing dead, mail done
//	s-3 shop order.refunded A  billing dead
//	(an hour later)
//	s-4 shop order.paid     A  billing dead, mail pending
//	c-1 crm  customer.created A  hub done
//	s-5 shop order.paid     A  mail done (billing's filter did not take it)
//	s-6 shop order.paid     C  billing running
//	s-7 shop ping           (no customer field)  no job
//	s-8 shop order.paid     A  billing done, then billing again dead; gone dead
type searchFixture struct {
	*adminFixture
	events map[string]int64 // delivery id → event id
	jobs   map[string]int64 // "s-1/billing" → job id; the newest of a target
	first  map[string]int64 // "s-8/billing" → the older job
}

// searchT1 is when the second half of the fixture's events was stored.
var searchT1 = adminT0.Add(time.Hour)

func setupSearch(t *testing.T) *searchFixture {
	t.Helper()
	f := &searchFixture{adminFixture: setupAdmin(t), events: map[string]int64{}, jobs: map[string]int64{}, first: map[string]int64{}}
	billing, err := rules.CompileTransform(&rules.TransformConfig{Body: `{"customer": body.customer, "replayed": true}`}, rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f.cfg.Store(&runningConfig{Store: f.store, Retention: 24 * time.Hour, Routes: searchRoutes, rules: map[queue.Route]routeRules{
		{Source: "shop", Target: "billing"}: {kind: "http", transform: billing},
		{Source: "shop", Target: "mail"}:    {kind: "http"},
		{Source: "crm", Target: "hub"}:      {kind: "exec"},
	}})
	type job struct {
		target string
		status queue.Status
	}
	add := func(source, id, eventType, body string, jobs ...job) {
		var targets []string
		for _, j := range jobs {
			targets = append(targets, j.target)
		}
		res, err := f.store.Enqueue(t.Context(), queue.Event{Source: source, DeliveryID: id, EventType: eventType,
			Headers: []queue.Header{{Name: "Content-Type", Value: "application/json"}}, Payload: []byte(body), Targets: targets})
		if err != nil {
			t.Fatal(err)
		}
		f.events[id] = res.EventID
		ev, err := f.store.GetEvent(t.Context(), res.EventID)
		if err != nil {
			t.Fatal(err)
		}
		for i, j := range ev.Jobs {
			f.jobs[id+"/"+j.Target] = j.ID
			spec := jobSpec{source: source, target: j.Target, status: jobs[i].status}
			if spec.status == queue.StatusDead {
				spec.lastError = "upstream answered 500"
			}
			f.drive(t, j.ID, spec)
		}
	}
	add("shop", "s-1", "order.paid", `{"customer":"A","amount":10}`, job{"billing", queue.StatusDone}, job{"mail", queue.StatusDone})
	add("shop", "s-2", "order.paid", `{"customer":"B","amount":20}`, job{"billing", queue.StatusDead}, job{"mail", queue.StatusDone})
	add("shop", "s-3", "order.refunded", `{"customer":"A","amount":10}`, job{"billing", queue.StatusDead})
	f.now.Store(searchT1.UnixNano())
	add("shop", "s-4", "order.paid", `{"customer":"A","amount":30}`, job{"billing", queue.StatusDead}, job{"mail", queue.StatusPending})
	add("crm", "c-1", "customer.created", `{"customer":"A"}`, job{"hub", queue.StatusDone})
	add("shop", "s-5", "order.paid", `{"customer":"A","amount":40}`, job{"mail", queue.StatusDone})
	add("shop", "s-6", "order.paid", `{"customer":"C","amount":50}`, job{"billing", queue.StatusRunning})
	add("shop", "s-7", "ping", `{}`)
	add("shop", "s-8", "order.paid", `{"customer":"A","amount":60}`, job{"billing", queue.StatusDone}, job{"gone", queue.StatusDead})
	f.first["s-8/billing"] = f.jobs["s-8/billing"]
	again, err := f.store.AddJob(t.Context(), f.events["s-8"], "billing")
	if err != nil {
		t.Fatal(err)
	}
	f.drive(t, again, jobSpec{source: "shop", target: "billing", status: queue.StatusDead, lastError: "upstream answered 500"})
	f.jobs["s-8/billing"] = again
	f.now.Store(searchT1.Add(time.Minute).UnixNano())
	return f
}

// eventNames and jobNames name what a search found as the fixture does,
// in order.
func (f *searchFixture) eventNames(events []queue.EventSummary) []string {
	out := []string{}
	for _, e := range events {
		out = append(out, e.DeliveryID)
	}
	return out
}

func (f *searchFixture) jobNames(jobs []queue.JobSummary) []string {
	out := []string{}
	for _, j := range jobs {
		name := j.DeliveryID + "/" + j.Target
		if f.first[name] == j.ID {
			name += "#1"
		}
		out = append(out, name)
	}
	return out
}

// where is a query with where set to expr and the other parameters given
// as name, value pairs.
func where(expr string, kv ...string) string {
	q := url.Values{"where": {expr}}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	return q.Encode()
}

func TestSearchEvents(t *testing.T) {
	t.Parallel()
	f := setupSearch(t)
	const customerA = `body.customer == "A"`
	tests := []struct {
		name    string
		query   string
		want    []string
		next    bool   // a next_cursor is expected
		stopped string // the report's Stopped
		errors  int    // the report's EvalErrors
	}{
		{name: "a customer", query: where(customerA), want: []string{"s-1", "s-3", "s-4", "c-1", "s-5", "s-8"}, errors: 1},
		{name: "a customer's payments", query: where(customerA + ` && event_type == "order.paid"`), want: []string{"s-1", "s-4", "s-5", "s-8"}},
		{name: "with the listing's filters", query: where(`body.amount >= 30`, "event_type", "order.paid"), want: []string{"s-4", "s-5", "s-6", "s-8"}},
		{name: "a source", query: where(`true`, "source", "crm"), want: []string{"c-1"}},
		{name: "since", query: where(customerA, "since", adminT0.Add(30*time.Minute).Format(time.RFC3339)), want: []string{"s-4", "c-1", "s-5", "s-8"}, errors: 1},
		{name: "until", query: where(customerA, "until", adminT0.Add(30*time.Minute).Format(time.RFC3339)), want: []string{"s-1", "s-3"}},
		{name: "without a target", query: where(`true`, "has_target", "false"), want: []string{"s-7"}},
		{name: "stored headers", query: where(`headers["content-type"] == "application/json" && delivery_id.startsWith("s-")`, "source", "shop"),
			want: []string{"s-1", "s-2", "s-3", "s-4", "s-5", "s-6", "s-7", "s-8"}},
		{name: "a page", query: where(customerA, "limit", "2"), want: []string{"s-1", "s-3"}, next: true, stopped: adminapi.SearchStoppedLimit},
		{name: "nothing", query: where(`body.customer == "Z"`), want: []string{}, errors: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := decode[adminapi.EventSearchResponse](t, f.doWant(t, http.MethodGet, "/webhook/events?"+tt.query, http.StatusOK))
			if got := f.eventNames(resp.Events); !slices.Equal(got, tt.want) {
				t.Errorf("events = %v, want %v", got, tt.want)
			}
			if (resp.NextCursor != 0) != tt.next || resp.Stopped != tt.stopped || resp.EvalErrors != tt.errors {
				t.Errorf("next_cursor %d stopped %q eval_errors %d, want a cursor %v, %q, %d", resp.NextCursor, resp.Stopped, resp.EvalErrors, tt.next, tt.stopped, tt.errors)
			}
			if tt.errors > 0 && resp.EvalError != "no such key: …" && !strings.HasPrefix(resp.EvalError, "no such key") {
				t.Errorf("eval_error %q, want cel's missing key", resp.EvalError)
			}
			if len(resp.Events) > 0 && resp.Events[0].Jobs == nil {
				t.Error("an event's jobs are null, want a list")
			}
		})
	}

	t.Run("pages follow the cursor", func(t *testing.T) {
		var got []string
		q := url.Values{"where": {customerA}, "limit": {"2"}}
		for range 10 {
			resp := decode[adminapi.EventSearchResponse](t, f.doWant(t, http.MethodGet, "/webhook/events?"+q.Encode(), http.StatusOK))
			got = append(got, f.eventNames(resp.Events)...)
			if resp.NextCursor == 0 {
				break
			}
			q.Set("cursor", fmt.Sprint(resp.NextCursor))
		}
		if want := []string{"s-1", "s-3", "s-4", "c-1", "s-5", "s-8"}; !slices.Equal(got, want) {
			t.Errorf("paged = %v, want %v", got, want)
		}
	})
}

// TestSearchBudget: a request that spent its events stops with a cursor,
// and the requests that follow it find the rest, each event once.
func TestSearchBudget(t *testing.T) {
	t.Parallel()
	f := setupSearch(t)
	f.api.search.Rows = 3
	var got []string
	var scanned, requests int
	q := url.Values{"where": {`body.customer == "A"`}}
	for ; requests < 20; requests++ {
		resp := decode[adminapi.EventSearchResponse](t, f.doWant(t, http.MethodGet, "/webhook/events?"+q.Encode(), http.StatusOK))
		got = append(got, f.eventNames(resp.Events)...)
		scanned += resp.Scanned
		if resp.Scanned > 3 {
			t.Errorf("one request scanned %d events, more than its 3", resp.Scanned)
		}
		if resp.NextCursor == 0 {
			break
		}
		if resp.Stopped != adminapi.SearchStoppedRows {
			t.Errorf("stopped %q with a cursor, want rows", resp.Stopped)
		}
		q.Set("cursor", fmt.Sprint(resp.NextCursor))
	}
	if want := []string{"s-1", "s-3", "s-4", "c-1", "s-5", "s-8"}; !slices.Equal(got, want) || scanned != 9 || requests != 2 {
		t.Errorf("found %v scanning %d events in %d requests after the first; want %v, 9 events, 3 requests", got, scanned, requests, want)
	}
	f.api.search.Rows, f.api.search.Time = 0, time.Nanosecond
	resp := decode[adminapi.EventSearchResponse](t, f.doWant(t, http.MethodGet, "/webhook/events?"+where("true"), http.StatusOK))
	if resp.Stopped != adminapi.SearchStoppedTime || resp.NextCursor == 0 || resp.Scanned != 1 {
		t.Errorf("with no time: stopped %q next %d scanned %d, want time, a cursor, one event", resp.Stopped, resp.NextCursor, resp.Scanned)
	}
}

func TestSearchJobs(t *testing.T) {
	t.Parallel()
	f := setupSearch(t)
	tests := []struct {
		name  string
		query string
		want  []string
	}{
		{name: "dead jobs of a customer", query: where(`job.status == "dead" && body.customer == "A"`), want: []string{"s-3/billing", "s-4/billing", "s-8/gone", "s-8/billing"}},
		{name: "status and target narrow first", query: where(`body.customer == "A"`, "status", "dead", "target", "billing"), want: []string{"s-3/billing", "s-4/billing", "s-8/billing"}},
		{name: "the job's error and attempts", query: where(`job.last_error.contains("500") && job.attempts == 1 && job.target != "billing"`), want: []string{"s-8/gone"}},
		{name: "done jobs of a source", query: where(`job.status == "done"`, "source", "shop", "target", "billing"), want: []string{"s-1/billing", "s-8/billing#1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := decode[adminapi.JobSearchResponse](t, f.doWant(t, http.MethodGet, "/webhook/jobs?"+tt.query, http.StatusOK))
			if got := f.jobNames(resp.Jobs); !slices.Equal(got, tt.want) {
				t.Errorf("jobs = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestSearchRefused: a bad expression is a 400 that names where and says
// where the error is, as the config load reports a filter's.
func TestSearchRefused(t *testing.T) {
	t.Parallel()
	f := setupSearch(t)
	tests := []struct {
		name, path, param, msg string
	}{
		{"syntax error", "/webhook/events?" + where(`body.customer ==`), "where", "invalid parameter where: line 1, column 17: Syntax error"},
		{"syntax error on line 2", "/webhook/jobs?" + where("job.status == \"dead\" &&\n  body.customer = \"A\""), "where", "line 2, column 17: Syntax error"},
		{"not a bool", "/webhook/events?" + where(`body.amount + 1`), "where", "line 1, column 1: yields int"},
		{"not a bool, known only on an event", "/webhook/events?" + where(`body.customer`), "where", "event " + fmt.Sprint(f.events["s-1"]) + ": filter yields string, not a bool"},
		{"no job in a search of events", "/webhook/events?" + where(`job.status == "dead"`), "where", "undeclared reference to 'job'"},
		{"empty", "/webhook/events?" + where(` `), "where", "empty expression"},
		{"a delivery id", "/webhook/events?" + where(`true`, "source", "shop", "delivery_id", "s-1"), "delivery_id", "does not go with where"},
		{"a status", "/webhook/jobs?" + where(`true`, "status", "gone"), "status", "must be pending"},
		{"an unknown parameter", "/webhook/events?" + where(`true`, "wher", "x"), "wher", "is unknown here"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := f.doWant(t, http.MethodGet, tt.path, http.StatusBadRequest)
			e := decode[adminapi.Error](t, rec)
			if e.Param != tt.param || !strings.Contains(e.Error, tt.msg) {
				t.Errorf("error %+v, want param %q and %q", e, tt.param, tt.msg)
			}
		})
	}
}

// TestSearchCostLimit: an expression the cost limit stops on an event
// ends the search with a 400 that says so.
func TestSearchCostLimit(t *testing.T) {
	t.Parallel()
	f := setupAdmin(t)
	var b strings.Builder
	b.WriteString(`{"items":[`)
	for i := range 3000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, i)
	}
	b.WriteString(`]}`)
	for i, body := range []string{`{"items":[1,2]}`, b.String()} {
		if _, err := f.store.Enqueue(t.Context(), queue.Event{Source: "shop", DeliveryID: fmt.Sprint("d-", i), Payload: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}
	rec := f.doWant(t, http.MethodGet, "/webhook/events?"+where(`body.items.map(x, body.items.filter(y, y == x).size()).size() > 1`), http.StatusBadRequest)
	e := decode[adminapi.Error](t, rec)
	if e.Param != "where" || !strings.Contains(e.Error, "event 2: ") || !strings.Contains(e.Error, "the expression costs more than a content rule may") ||
		!(strings.Contains(e.Error, "cost limit exceeded") || strings.Contains(e.Error, "time limit exceeded")) {
		t.Errorf("error %+v, want where: event 2 stopped by its limit", e)
	}
}

// counts is the job counts of the store, by route and status.
func (f *adminFixture) counts(t *testing.T) string {
	t.Helper()
	st, err := f.store.Stats(t.Context(), time.Unix(0, f.now.Load()))
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, c := range st.Counts {
		parts = append(parts, fmt.Sprintf("%s/%s %s %d", c.Source, c.Target, c.Status, c.Jobs))
	}
	return strings.Join(parts, ", ")
}

// pendingJobs names the fixture's pending jobs.
func (f *searchFixture) pendingJobs(t *testing.T) []string {
	t.Helper()
	page, err := f.store.ListJobs(t.Context(), queue.ListParams{Filter: queue.Filter{Status: queue.StatusPending}, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	got := f.jobNames(page.Jobs)
	slices.Sort(got)
	return got
}

func TestReplayQuery(t *testing.T) {
	t.Parallel()
	const customerA = `body.customer == "A"`
	// s-4/mail is pending from the start.
	tests := []struct {
		name    string
		query   string
		want    adminapi.ReplayQueryResponse // the counts
		actions []string                     // the matches, name and action
		pending []string                     // the pending jobs afterwards, sorted
	}{
		{
			name:    "dead jobs of one target",
			query:   where(customerA, "status", "dead", "target", "billing"),
			want:    adminapi.ReplayQueryResponse{Events: 5, Replayed: 3},
			actions: []string{"s-3/billing replay", "s-4/billing replay", "s-8/billing replay"},
			pending: []string{"s-3/billing", "s-4/billing", "s-4/mail", "s-8/billing"},
		},
		{
			name:    "any: replayed, resent, and a new job where the event had none",
			query:   where(customerA+` && event_type == "order.paid"`, "status", "any", "target", "billing"),
			want:    adminapi.ReplayQueryResponse{Events: 4, Replayed: 2, Resent: 1, Added: 1},
			actions: []string{"s-1/billing resend", "s-4/billing replay", "s-5/billing add", "s-8/billing replay"},
			pending: []string{"s-1/billing", "s-4/billing", "s-4/mail", "s-5/billing", "s-8/billing"},
		},
		{
			name:    "done jobs of every target",
			query:   where(customerA, "status", "done"),
			want:    adminapi.ReplayQueryResponse{Events: 6, Resent: 4, InFlight: 1},
			actions: []string{"s-1/billing resend", "s-1/mail resend", "c-1/hub resend", "s-5/mail resend"},
			pending: []string{"c-1/hub", "s-1/billing", "s-1/mail", "s-4/mail", "s-5/mail"},
		},
		{
			name:    "dead jobs of every target: unroutable left dead",
			query:   where(customerA, "status", "dead"),
			want:    adminapi.ReplayQueryResponse{Events: 6, Replayed: 3, InFlight: 1, Unroutable: 1},
			actions: []string{"s-3/billing replay", "s-4/billing replay", "s-8/billing replay"},
			pending: []string{"s-3/billing", "s-4/billing", "s-4/mail", "s-8/billing"},
		},
		{
			name:    "a source's running job is left alone",
			query:   where(`body.customer == "C"`, "status", "any", "target", "billing"),
			want:    adminapi.ReplayQueryResponse{Events: 1, InFlight: 1},
			pending: []string{"s-4/mail"},
		},
		{
			name:    "with the listing's filters",
			query:   where(`true`, "status", "dead", "target", "billing", "since", adminT0.Add(30*time.Minute).Format(time.RFC3339), "source", "shop"),
			want:    adminapi.ReplayQueryResponse{Events: 5, Replayed: 2, InFlight: 1},
			actions: []string{"s-4/billing replay", "s-8/billing replay"},
			pending: []string{"s-4/billing", "s-4/mail", "s-8/billing"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setupSearch(t)
			before := f.counts(t)
			dry := decode[adminapi.ReplayQueryResponse](t, f.doWant(t, http.MethodPost, "/webhook/replay?"+tt.query+"&dry_run=true", http.StatusOK))
			if after := f.counts(t); after != before {
				t.Fatalf("the dry run changed the counts:\n%s\nto\n%s", before, after)
			}
			real := decode[adminapi.ReplayQueryResponse](t, f.doWant(t, http.MethodPost, "/webhook/replay?"+tt.query, http.StatusOK))
			for _, c := range []struct {
				name string
				resp adminapi.ReplayQueryResponse
			}{{"dry run", dry}, {"replay", real}} {
				got := c.resp
				if got.Events != tt.want.Events || got.Replayed != tt.want.Replayed || got.Resent != tt.want.Resent || got.Added != tt.want.Added ||
					got.InFlight != tt.want.InFlight || got.Unroutable != tt.want.Unroutable || got.NextCursor != 0 {
					t.Errorf("%s: events %d replayed %d resent %d added %d in flight %d unroutable %d next %d; want %+v", c.name,
						got.Events, got.Replayed, got.Resent, got.Added, got.InFlight, got.Unroutable, got.NextCursor, tt.want)
				}
				var actions []string
				for _, m := range got.Matches {
					actions = append(actions, m.DeliveryID+"/"+m.Target+" "+m.Action)
				}
				if !slices.Equal(actions, tt.actions) {
					t.Errorf("%s: matches %v, want %v", c.name, actions, tt.actions)
				}
				if c.name == "dry run" && got.DryRun != true || c.name == "replay" && got.DryRun {
					t.Errorf("%s: dry_run = %v", c.name, got.DryRun)
				}
			}
			for _, m := range real.Matches {
				if m.Job == 0 || (m.Action != adminapi.ReplayActionAdd && m.Job != f.jobs[m.DeliveryID+"/"+m.Target]) {
					t.Errorf("replayed match %+v: want the job queued", m)
				}
			}
			if got := f.pendingJobs(t); !slices.Equal(got, tt.pending) {
				t.Errorf("pending afterwards %v, want %v", got, tt.pending)
			}
			// Again: what was queued is on its way; nothing is queued twice.
			again := decode[adminapi.ReplayQueryResponse](t, f.doWant(t, http.MethodPost, "/webhook/replay?"+tt.query, http.StatusOK))
			if n := again.Replayed + again.Resent + again.Added; n != 0 {
				t.Errorf("the same replay again queued %d more: %+v", n, again.Matches)
			}
			if got := f.pendingJobs(t); !slices.Equal(got, tt.pending) {
				t.Errorf("pending after the second replay %v, want %v", got, tt.pending)
			}
		})
	}
}

// TestReplayQuerySpread: with a rate the jobs are due one interval apart,
// in the store, and a continued replay carries on from next_due.
func TestReplayQuerySpread(t *testing.T) {
	t.Parallel()
	f := setupSearch(t)
	f.api.search.Rows = 3
	t0 := time.Unix(0, f.now.Load()).UTC()
	q := url.Values{"where": {"true"}, "status": {"dead"}, "target": {"billing"}, "rate": {"2/s"}}
	var matches []adminapi.ReplayMatch
	for range 10 {
		resp := decode[adminapi.ReplayQueryResponse](t, f.doWant(t, http.MethodPost, "/webhook/replay?"+q.Encode(), http.StatusOK))
		matches = append(matches, resp.Matches...)
		if want := t0.Add(time.Duration(len(matches)) * 500 * time.Millisecond); !resp.NextDue.Equal(want) {
			t.Errorf("next_due %v after %d jobs, want %v", resp.NextDue, len(matches), want)
		}
		if resp.NextCursor == 0 {
			break
		}
		q.Set("cursor", fmt.Sprint(resp.NextCursor))
		q.Set("due", resp.NextDue.Format(time.RFC3339Nano))
	}
	var names []string
	for i, m := range matches {
		names = append(names, m.DeliveryID)
		want := t0.Add(time.Duration(i) * 500 * time.Millisecond)
		if !m.Due.Equal(want) {
			t.Errorf("match %d due %v, want %v", i, m.Due, want)
		}
		if j := f.getJob(t, m.Job); j.Status != queue.StatusPending || !j.RunAt.Equal(want) {
			t.Errorf("job %d %s due %v, want pending due %v", j.ID, j.Status, j.RunAt, want)
		}
	}
	if want := []string{"s-2", "s-3", "s-4", "s-8"}; !slices.Equal(names, want) {
		t.Errorf("replayed %v, want %v", names, want)
	}
}

// TestReplayQueryShowRequest: the dry run shows, for the first match of
// each route, what its target would receive after its transform.
func TestReplayQueryShowRequest(t *testing.T) {
	t.Parallel()
	f := setupSearch(t)
	resp := decode[adminapi.ReplayQueryResponse](t, f.doWant(t, http.MethodPost, "/webhook/replay?"+
		where(`body.customer == "A"`, "status", "any", "dry_run", "true", "show_request", "true", "limit", "1"), http.StatusOK))
	var got []string
	for _, r := range resp.Requests {
		s := r.Source + "/" + r.Target + " " + fmt.Sprint(r.Event)
		if r.Request != nil {
			s += " " + r.Request.Method + " " + r.Request.Body
		}
		got = append(got, s)
	}
	want := []string{
		fmt.Sprintf(`shop/billing %d POST {"customer":"A","replayed":true}`, f.events["s-1"]),
		fmt.Sprintf(`shop/mail %d POST {"customer":"A","amount":10}`, f.events["s-1"]),
		fmt.Sprintf(`crm/hub %d EXEC {"customer":"A"}`, f.events["c-1"]),
	}
	if !slices.Equal(got, want) {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(resp.Matches) != 1 || resp.Resent+resp.Replayed != 7 {
		t.Errorf("%d matches listed of %d resent and %d replayed, want 1 of 7", len(resp.Matches), resp.Resent, resp.Replayed)
	}
}

func TestReplayQueryRefused(t *testing.T) {
	t.Parallel()
	f := setupSearch(t)
	before := f.counts(t)
	tests := []struct {
		name, query, param, msg string
	}{
		{"no status", where(`true`), "status", "is required with where"},
		{"a status replay cannot take", where(`true`, "status", "pending"), "status", "must be dead, done or any"},
		{"a target of no source", where(`true`, "status", "dead", "target", "sms"), "target", `"sms" is not a target of any source`},
		{"a target of another source", where(`true`, "status", "dead", "target", "hub", "source", "shop"), "target", `"hub" is not a target of source shop`},
		{"a bad rate", where(`true`, "status", "dead", "rate", "fast"), "rate", "want <n>/s"},
		{"due without a rate", where(`true`, "status", "dead", "due", "2026-01-01T00:00:00Z"), "due", "goes with rate"},
		{"a bad dry_run", where(`true`, "status", "dead", "dry_run", "yes"), "dry_run", "must be true or false"},
		{"a bad expression", where(`body.customer = "A"`, "status", "dead"), "where", "line 1, column 15"},
		{"a query parameter without where", "status=dead&dry_run=true", "dry_run", "goes with where"},
		{"a time without where", "status=dead&since=1h", "since", "goes with where"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := decode[adminapi.Error](t, f.doWant(t, http.MethodPost, "/webhook/replay?"+tt.query, http.StatusBadRequest))
			if e.Param != tt.param || !strings.Contains(e.Error, tt.msg) {
				t.Errorf("error %+v, want param %q and %q", e, tt.param, tt.msg)
			}
		})
	}
	if after := f.counts(t); after != before {
		t.Errorf("a refused replay changed the counts:\n%s\nto\n%s", before, after)
	}
}
