package caddywebhook

import (
	"encoding/json"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
)

// setupSearchCLI serves the search fixture's admin API over real HTTP for
// the CLI.
func setupSearchCLI(t *testing.T) (*cliFixture, *searchFixture) {
	t.Helper()
	sf := setupSearch(t)
	f := &cliFixture{adminFixture: sf.adminFixture}
	srv := httptest.NewServer(f.countRequests(f.handler))
	t.Cleanup(srv.Close)
	f.addr, f.srv = srv.Listener.Addr().String(), srv
	return f, sf
}

// searchCLI runs a subcommand against the fixture with the CLI's clock a
// minute after the fixture's last events, the server's clock.
func (f *cliFixture) searchCLI(t *testing.T, args ...string) cliResult {
	t.Helper()
	return runCLI(t, searchT1.Add(time.Minute), append(args, "--address", f.addr)...)
}

// fixtureName matches {s-1} (an event's id) and {s-1/billing} (a job's)
// in a golden output.
var fixtureName = regexp.MustCompile(`\{([a-z]-\d)(/[a-z]+(#1)?)?\}`)

// expand puts the fixture's ids in place of their names.
func (sf *searchFixture) expand(s string) string {
	return fixtureName.ReplaceAllStringFunc(s, func(m string) string {
		name := m[1 : len(m)-1]
		if id, ok := sf.events[name]; ok {
			return strconv.FormatInt(id, 10)
		}
		if older, ok := strings.CutSuffix(name, "#1"); ok {
			return strconv.FormatInt(sf.first[older], 10)
		}
		return strconv.FormatInt(sf.jobs[name], 10)
	})
}

// refreshJobs names the jobs added since the fixture was made: the newest
// job of each event and target.
func (sf *searchFixture) refreshJobs(t *testing.T) {
	t.Helper()
	for name, id := range sf.events {
		ev, err := sf.store.GetEvent(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range ev.Jobs {
			sf.jobs[name+"/"+j.Target] = j.ID
		}
	}
}

func TestCLISearchOutput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		want    string   // the whole stdout, column gaps squeezed to " | "
		pending []string // the pending jobs afterwards, when the command changes them
	}{
		{
			name: "events of a customer",
			args: []string{"events", "--where", `body.customer == "A"`},
			want: `ID | SOURCE | DELIVERY | EVENT | AGE | JOBS
{s-1} | shop | s-1 | order.paid | 1h1m | {s-1/billing} billing done, {s-1/mail} mail done
{s-3} | shop | s-3 | order.refunded | 1h1m | {s-3/billing} billing dead
{s-4} | shop | s-4 | order.paid | 1m0s | {s-4/billing} billing dead, {s-4/mail} mail pending
{c-1} | crm | c-1 | customer.created | 1m0s | {c-1/hub} hub done
{s-5} | shop | s-5 | order.paid | 1m0s | {s-5/mail} mail done
{s-8} | shop | s-8 | order.paid | 1m0s | {s-8/billing#1} billing done, {s-8/gone} gone dead, {s-8/billing} billing dead

searched 9 events
the expression failed on 1 event, which does not match: no such key: …
`,
		},
		{
			name: "a page of events points at the next",
			args: []string{"events", "--where", `true`, "--limit", "2", "--source", "shop"},
			want: `ID | SOURCE | DELIVERY | EVENT | AGE | JOBS
{s-1} | shop | s-1 | order.paid | 1h1m | {s-1/billing} billing done, {s-1/mail} mail done
{s-2} | shop | s-2 | order.paid | 1h1m | {s-2/billing} billing dead, {s-2/mail} mail done

searched 2 events
more: add --cursor {s-2} for the next page
`,
		},
		{
			name: "a customer's dead jobs",
			args: []string{"list", "--where", `job.status == "dead" && body.customer == "A"`},
			want: `ID | SOURCE | TARGET | STATUS | ATTEMPTS | EVENT | DELIVERY | AGE | LAST ERROR
{s-3/billing} | shop | billing | dead | 1 | order.refunded | s-3 | 1h1m | upstream answered 500
{s-4/billing} | shop | billing | dead | 1 | order.paid | s-4 | 1m0s | upstream answered 500
{s-8/gone} | shop | gone | dead | 1 | order.paid | s-8 | 1m0s | upstream answered 500
{s-8/billing} | shop | billing | dead | 1 | order.paid | s-8 | 1m0s | upstream answered 500

searched 9 events
`,
		},
		{
			name: "a listing of jobs counts the jobs the expression failed on",
			args: []string{"list", "--where", `body.note == "x"`, "--source", "shop", "--until", "30m"},
			want: `no jobs

searched 3 events
the expression failed on 5 jobs, which do not match: no such key: …
`,
		},
		{
			name: "matching events whose jobs were delivered, with the default status",
			args: []string{"replay", "--where", `body.customer == "A"`, "--source", "crm", "--dry-run"},
			want: `dry run, nothing changed: no job to queue for 1 matching event (searched 1 event)
--status dead (the default) replays dead jobs only; --status done or any resends delivered ones
`,
		},
		{
			name: "the dry run, and what the target would receive",
			args: []string{"replay", "--where", `body.customer == "A" && event_type == "order.paid"`, "--target", "billing", "--status", "any", "--dry-run", "--show-request"},
			want: `dry run, nothing changed: would queue 4 jobs for 4 matching events (searched 9 events): replay 2 dead, resend 1 done, add 1 new job

JOB | EVENT | DELIVERY | SOURCE | TARGET | STATUS | ACTION
{s-1/billing} | {s-1} | s-1 | shop | billing | done | resend
{s-4/billing} | {s-4} | s-4 | shop | billing | dead | replay
- | {s-5} | s-5 | shop | billing | - | new job
{s-8/billing} | {s-8} | s-8 | shop | billing | dead | replay

billing of source shop would receive, for event {s-1}:
POST
Content-Type: application/json

{"customer":"A","replayed":true}
`,
			pending: []string{"s-4/mail"},
		},
		{
			name: "the dry run lists the first",
			args: []string{"replay", "--where", `body.customer == "A" && event_type == "order.paid"`, "--target", "billing", "--status", "any", "--dry-run", "--limit", "1"},
			want: `dry run, nothing changed: would queue 4 jobs for 4 matching events (searched 9 events): replay 2 dead, resend 1 done, add 1 new job

JOB | EVENT | DELIVERY | SOURCE | TARGET | STATUS | ACTION
{s-1/billing} | {s-1} | s-1 | shop | billing | done | resend
(the first 1 of 4; --limit lists more)
`,
			pending: []string{"s-4/mail"},
		},
		{
			name: "the replay",
			args: []string{"replay", "--where", `body.customer == "A" && event_type == "order.paid"`, "--target", "billing", "--status", "any"},
			want: `queued 4 jobs for 4 matching events (searched 9 events): replayed 2 dead, resent 1 done, added 1 new job; pending, due now

JOB | EVENT | DELIVERY | SOURCE | TARGET | STATUS | ACTION
{s-1/billing} | {s-1} | s-1 | shop | billing | done | resend
{s-4/billing} | {s-4} | s-4 | shop | billing | dead | replay
{s-5/billing} | {s-5} | s-5 | shop | billing | - | new job
{s-8/billing} | {s-8} | s-8 | shop | billing | dead | replay
`,
			pending: []string{"s-1/billing", "s-4/billing", "s-4/mail", "s-5/billing", "s-8/billing"},
		},
		{
			name: "done jobs of every target, the pending one left alone",
			args: []string{"replay", "--where", `body.customer == "A"`, "--status", "done"},
			want: `queued 4 jobs for 6 matching events (searched 9 events): resent 4 done; pending, due now
left alone: 1 pending, running or blocked (on its way already)
the expression failed on 1 event, which does not match: no such key: …

JOB | EVENT | DELIVERY | SOURCE | TARGET | STATUS | ACTION
{s-1/billing} | {s-1} | s-1 | shop | billing | done | resend
{s-1/mail} | {s-1} | s-1 | shop | mail | done | resend
{c-1/hub} | {c-1} | c-1 | crm | hub | done | resend
{s-5/mail} | {s-5} | s-5 | shop | mail | done | resend
`,
			pending: []string{"c-1/hub", "s-1/billing", "s-1/mail", "s-4/mail", "s-5/mail"},
		},
		{
			name: "spread at a rate",
			args: []string{"replay", "--where", `body.customer == "A"`, "--target", "billing", "--rate", "2/s", "--source", "shop"},
			want: `queued 3 jobs for 5 matching events (searched 8 events): replayed 3 dead; pending, spread at 2/s until 2026-11-30T13:01:01Z (in 2s)
the expression failed on 1 event, which does not match: no such key: …

JOB | EVENT | DELIVERY | SOURCE | TARGET | STATUS | ACTION
{s-3/billing} | {s-3} | s-3 | shop | billing | dead | replay
{s-4/billing} | {s-4} | s-4 | shop | billing | dead | replay
{s-8/billing} | {s-8} | s-8 | shop | billing | dead | replay
`,
			pending: []string{"s-3/billing", "s-4/billing", "s-4/mail", "s-8/billing"},
		},
		{
			name: "nothing to queue",
			args: []string{"replay", "--where", `body.customer == "Z"`, "--source", "crm"},
			want: "no job to queue for 0 matching events (searched 1 event)\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, sf := setupSearchCLI(t)
			res := f.searchCLI(t, tt.args...)
			if res.code != 0 || res.stderr != "" {
				t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
			}
			sf.refreshJobs(t) // the jobs a replay added
			if got, want := squeeze(res.stdout), sf.expand(tt.want); got != want {
				t.Errorf("stdout:\n%s\nwant:\n%s", got, want)
			}
			if tt.pending != nil {
				if got := sf.pendingJobs(t); !slices.Equal(got, tt.pending) {
					t.Errorf("pending afterwards %v, want %v", got, tt.pending)
				}
			}
		})
	}
}

// TestCLISearchContinues: when each request of the API may read only a few
// events, the CLI asks again from the cursor and prints what one request
// would have found.
func TestCLISearchContinues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		requests int64
	}{
		{"events", []string{"events", "--where", `body.customer == "A"`}, 3},
		{"jobs", []string{"list", "--where", `job.status == "dead" && body.customer == "A"`}, 3},
		{"dry run", []string{"replay", "--where", `body.customer == "A" && event_type == "order.paid"`, "--target", "billing", "--status", "any", "--dry-run"}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			whole, _ := setupSearchCLI(t)
			want := whole.searchCLI(t, tt.args...)
			f, _ := setupSearchCLI(t)
			f.api.search.Rows = 4
			got := f.searchCLI(t, tt.args...)
			if got.code != 0 || got.stdout != want.stdout {
				t.Errorf("in requests of 4 events: exit %d, stdout\n%s\nwant\n%s", got.code, got.stdout, want.stdout)
			}
			if n := f.requests.Load(); n != tt.requests {
				t.Errorf("%d requests, want %d", n, tt.requests)
			}
		})
	}
}

func TestCLISearchErrors(t *testing.T) {
	t.Parallel()
	f, sf := setupSearchCLI(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"a syntax error, with its position", []string{"events", "--where", `body.customer ==`}, "invalid --where: line 1, column 17: Syntax error"},
		{"not a bool", []string{"list", "--where", `job.attempts + 1`}, "invalid --where: line 1, column 1: yields int; want bool"},
		{"no job in a search of events", []string{"events", "--where", `job.status == "dead"`}, "undeclared reference to 'job'"},
		{"a replay's bad status", []string{"replay", "--where", `true`, "--status", "pending"}, "invalid --status: must be dead, done or any"},
		{"a replay's unknown target", []string{"replay", "--where", `true`, "--target", "sms"}, `invalid --target: "sms" is not a target of any source`},
		{"a dry run without where", []string{"replay", "--dry-run"}, "--dry-run goes with --where"},
		{"a rate without where", []string{"replay", "--all-dead", "--rate", "1/s"}, "--rate goes with --where"},
		{"where and job ids", []string{"replay", "3", "--where", "true"}, "give --where, or job ids, or --all-dead; not more than one"},
		{"where and all dead", []string{"replay", "--all-dead", "--where", "true"}, "give --where, or job ids, or --all-dead; not more than one"},
		{"a delivery id with where", []string{"events", "--where", "true", "--source", "shop", "--delivery", "s-1"}, "invalid --delivery: does not go with where"},
	}
	before := sf.pendingJobs(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := f.searchCLI(t, tt.args...)
			if res.code != 1 || !strings.Contains(res.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", res.code, res.stderr, tt.want)
			}
		})
	}
	if after := sf.pendingJobs(t); !slices.Equal(after, before) {
		t.Errorf("refused commands changed the pending jobs: %v to %v", before, after)
	}
}

func TestCLISearchJSON(t *testing.T) {
	t.Parallel()
	f, sf := setupSearchCLI(t)
	res := f.searchCLI(t, "replay", "--where", `body.customer == "A"`, "--target", "billing", "--dry-run", "--json")
	var r adminapi.ReplayQueryResponse
	if err := json.Unmarshal([]byte(res.stdout), &r); err != nil || res.code != 0 {
		t.Fatalf("exit %d, %v: %s", res.code, err, res.stdout)
	}
	if !r.DryRun || r.Replayed != 3 || r.Where != `body.customer == "A"` || len(r.Matches) != 3 || r.Matches[0].Job != sf.jobs["s-3/billing"] {
		t.Errorf("answer %+v", r)
	}
	res = f.searchCLI(t, "events", "--where", `true`, "--limit", "1", "--json")
	var e adminapi.EventSearchResponse
	if err := json.Unmarshal([]byte(res.stdout), &e); err != nil || len(e.Events) != 1 || e.NextCursor != sf.events["s-1"] || e.Scanned != 1 {
		t.Errorf("events --json = %s, %v", res.stdout, err)
	}
}
