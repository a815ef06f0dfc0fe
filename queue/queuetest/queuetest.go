// Package queuetest is the conformance suite every queue.Store must pass.
// A backend's tests call Run with a function that opens a fresh, empty
// store on a real database:
//
//	func TestConformance(t *testing.T) {
//		queuetest.Run(t, func(t *testing.T) queue.Store { return openTestStore(t) })
//	}
//
// Every subtest opens its own store, so subtests never see each other's
// rows. The suite uses the wall clock: stores stamp enqueues with their own
// clock, and the tests pass explicit times no earlier than it to Claim,
// Finish and Stats.
package queuetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/caddywebhook/caddywebhook/queue"
)

// Run runs the conformance suite. open must return a new, empty store and
// arrange for it to be closed when t ends; a second Close must be harmless.
func Run(t *testing.T, open func(t *testing.T) queue.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s queue.Store)
	}{
		{"enqueue/fan-out", testFanOut},
		{"enqueue/duplicate", testDuplicate},
		{"claim/order and limit", testClaimOrder},
		{"claim/attempt counted at claim", testAttemptAtClaim},
		{"claim/routes", testRoutes},
		{"lease/expiry takeover", testTakeover},
		{"lease/fence", testFence},
		{"lease/extend reports lost", testExtend},
		{"handback/no charge", testHandBack},
		{"finish/outcomes", testFinish},
		{"finish/history bounded", testHistory},
		{"finish/error truncated", testTruncate},
		{"replay/one", testReplay},
		{"replay/dead by filter", testReplayDead},
		{"discard", testDiscard},
		{"purge/retention", testPurge},
		{"purge/limit", testPurgeLimit},
		{"stats", testStats},
		{"list/filters and paging", testList},
		{"get", testGet},
		{"ready", testReady},
		{"close", testClose},
		{"concurrent workers", testWorkers},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, open(t))
		})
	}
}

// lease is long enough that no lease expires during a test unless the
// test moves its clock past it.
const lease = time.Minute

// now is the wall clock at millisecond precision, the stores' precision.
func now() time.Time { return time.Now().Truncate(time.Millisecond) }

func event(source, id string, targets ...string) queue.Event {
	return queue.Event{
		Source:     source,
		DeliveryID: id,
		EventType:  "order.paid",
		Headers:    []queue.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "X-Event", Value: "order.paid"}},
		Payload:    []byte(`{"id":"` + id + `"}`),
		Targets:    targets,
	}
}

func enqueue(t *testing.T, s queue.Store, ev queue.Event) queue.EnqueueResult {
	t.Helper()
	res, err := s.Enqueue(t.Context(), ev)
	if err != nil {
		t.Fatalf("Enqueue(%s/%s): %v", ev.Source, ev.DeliveryID, err)
	}
	return res
}

func claimAt(t *testing.T, s queue.Store, owner string, limit int, at time.Time) []*queue.Job {
	t.Helper()
	jobs, err := s.Claim(t.Context(), queue.ClaimParams{Owner: owner, Limit: limit, Lease: lease, Now: at})
	if err != nil {
		t.Fatalf("Claim(%s): %v", owner, err)
	}
	return jobs
}

func claim(t *testing.T, s queue.Store, owner string, limit int) []*queue.Job {
	t.Helper()
	return claimAt(t, s, owner, limit, now())
}

func claimOne(t *testing.T, s queue.Store, owner string) *queue.Job {
	t.Helper()
	jobs := claim(t, s, owner, 1)
	if len(jobs) != 1 {
		t.Fatalf("Claim(%s) = %d jobs, want 1", owner, len(jobs))
	}
	return jobs[0]
}

func finish(t *testing.T, s queue.Store, cs ...queue.Completion) []bool {
	t.Helper()
	rec, err := s.Finish(t.Context(), cs)
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if len(rec) != len(cs) {
		t.Fatalf("Finish returned %d flags for %d completions", len(rec), len(cs))
	}
	return rec
}

func done(j *queue.Job, at time.Time) queue.Completion {
	return queue.Completion{JobID: j.ID, Owner: j.LeaseOwner, Status: queue.StatusDone, Started: at, Duration: time.Millisecond, Now: at}
}

func retry(j *queue.Job, runAt time.Time, msg string) queue.Completion {
	at := now()
	return queue.Completion{JobID: j.ID, Owner: j.LeaseOwner, Status: queue.StatusPending, RunAt: runAt, Error: msg, Started: at, Duration: time.Millisecond, Now: at}
}

func dead(j *queue.Job, msg string) queue.Completion {
	at := now()
	return queue.Completion{JobID: j.ID, Owner: j.LeaseOwner, Status: queue.StatusDead, Error: msg, Started: at, Duration: time.Millisecond, Now: at}
}

func get(t *testing.T, s queue.Store, id int64) queue.JobDetail {
	t.Helper()
	d, err := s.GetJob(t.Context(), id)
	if err != nil {
		t.Fatalf("GetJob(%d): %v", id, err)
	}
	return d
}

func stats(t *testing.T, s queue.Store, at time.Time) queue.Stats {
	t.Helper()
	st, err := s.Stats(t.Context(), at)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	return st
}

// count sums the jobs in st with the given status (empty: any).
func count(st queue.Stats, status queue.Status) int64 {
	var n int64
	for _, c := range st.Counts {
		if status == "" || c.Status == status {
			n += c.Jobs
		}
	}
	return n
}

func ids(jobs []*queue.Job) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

func list(t *testing.T, s queue.Store, p queue.ListParams) queue.JobPage {
	t.Helper()
	page, err := s.ListJobs(t.Context(), p)
	if err != nil {
		t.Fatalf("ListJobs(%+v): %v", p, err)
	}
	return page
}

func testFanOut(t *testing.T, s queue.Store) {
	res := enqueue(t, s, event("shop", "d1", "mail", "chat"))
	if res.Duplicate || res.Jobs != 2 || res.EventID == 0 {
		t.Fatalf("Enqueue = %+v, want 2 jobs, not duplicate", res)
	}
	bare := enqueue(t, s, event("shop", "d2"))
	if bare.Duplicate || bare.Jobs != 0 || bare.EventID == 0 || bare.EventID == res.EventID {
		t.Fatalf("Enqueue without targets = %+v, want a new event with no job", bare)
	}
	page := list(t, s, queue.ListParams{})
	var targets []string
	for _, j := range page.Jobs {
		if j.EventID != res.EventID || j.Source != "shop" || j.DeliveryID != "d1" || j.EventType != "order.paid" || j.Status != queue.StatusPending || j.Attempts != 0 {
			t.Errorf("job %+v does not belong to the first event as a fresh pending job", j)
		}
		targets = append(targets, j.Target)
	}
	slices.Sort(targets)
	if !slices.Equal(targets, []string{"chat", "mail"}) {
		t.Errorf("targets = %v, want [chat mail]", targets)
	}
	if st := stats(t, s, now()); st.Events != 2 || count(st, queue.StatusPending) != 2 {
		t.Errorf("Stats = %+v, want 2 events and 2 pending jobs", st)
	}
}

func testDuplicate(t *testing.T, s queue.Store) {
	first := enqueue(t, s, event("shop", "d1", "mail"))
	tests := []struct {
		name    string
		ev      queue.Event
		dup     bool
		eventID int64
	}{
		{"same source and id", event("shop", "d1", "mail", "chat"), true, first.EventID},
		{"same source and id, no targets", event("shop", "d1"), true, first.EventID},
		{"other source, same id", event("forge", "d1", "mail"), false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := count(stats(t, s, now()), "")
			res := enqueue(t, s, tt.ev)
			if res.Duplicate != tt.dup {
				t.Fatalf("Duplicate = %v, want %v", res.Duplicate, tt.dup)
			}
			after := count(stats(t, s, now()), "")
			if tt.dup {
				if res.EventID != tt.eventID || res.Jobs != 0 || after != before {
					t.Errorf("duplicate: %+v, jobs %d -> %d; want event %d, nothing added", res, before, after, tt.eventID)
				}
			} else if after != before+int64(len(tt.ev.Targets)) {
				t.Errorf("jobs %d -> %d, want %d added", before, after, len(tt.ev.Targets))
			}
		})
	}
}

func testClaimOrder(t *testing.T, s queue.Store) {
	var want []int64
	for i := range 5 {
		enqueue(t, s, event("shop", fmt.Sprint("d", i), "mail"))
	}
	for _, j := range list(t, s, queue.ListParams{}).Jobs {
		want = append(want, j.ID)
	}
	slices.Sort(want)

	// The last job fails and is retried with a run_at earlier than the
	// others' (as a clock step could make it): it is claimed first.
	last := claimAt(t, s, "w", 5, now())
	if !slices.Equal(ids(last), want) {
		t.Fatalf("claimed %v, want %v in (run_at, id) order", ids(last), want)
	}
	for _, j := range last[:4] {
		if !finish(t, s, retry(j, now().Add(time.Hour), "later"))[0] {
			t.Fatal("retry not recorded")
		}
	}
	if !finish(t, s, retry(last[4], now().Add(-time.Hour), "early"))[0] {
		t.Fatal("retry not recorded")
	}
	later := now().Add(2 * time.Hour)
	got := claimAt(t, s, "w2", 3, later)
	wantOrder := []int64{want[4], want[0], want[1]}
	if !slices.Equal(ids(got), wantOrder) {
		t.Errorf("claim limit 3 = %v, want %v", ids(got), wantOrder)
	}
	if rest := claimAt(t, s, "w2", 10, later); !slices.Equal(ids(rest), want[2:4]) {
		t.Errorf("second claim = %v, want %v", ids(rest), want[2:4])
	}
	if none := claimAt(t, s, "w2", 10, later); len(none) != 0 {
		t.Errorf("third claim = %v, want none", ids(none))
	}
}

func testAttemptAtClaim(t *testing.T, s queue.Store) {
	ev := event("shop", "d1", "mail")
	enqueue(t, s, ev)
	at := now()
	j := claimOne(t, s, "w1")
	if j.Attempt != 1 || j.LeaseOwner != "w1" || j.LeaseUntil.Before(at.Add(lease)) {
		t.Errorf("claimed %+v, want attempt 1 leased to w1 until %v", j, at.Add(lease))
	}
	if j.Source != ev.Source || j.DeliveryID != ev.DeliveryID || j.EventType != ev.EventType || j.Target != "mail" ||
		string(j.Payload) != string(ev.Payload) || !slices.Equal(j.Headers, ev.Headers) || j.CreatedAt.IsZero() || j.EventID == 0 {
		t.Errorf("claimed job %+v does not carry its event", j)
	}
	if d := get(t, s, j.ID); d.Attempts != 1 || d.Status != queue.StatusRunning {
		t.Errorf("stored attempts %d status %s, want 1 running", d.Attempts, d.Status)
	}
	// A worker that dies mid-attempt is still charged: the next claim,
	// after the lease, is attempt 2.
	again := claimAt(t, s, "w2", 1, at.Add(2*lease))
	if len(again) != 1 || again[0].Attempt != 2 {
		t.Fatalf("claim after expiry = %+v, want attempt 2", again)
	}
}

func testRoutes(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "mail", "chat"))
	enqueue(t, s, event("forge", "d1", "mail"))
	tests := []struct {
		name   string
		routes []queue.Route
		want   []string // source/target claimed
	}{
		{"empty list claims nothing", []queue.Route{}, nil},
		{"unknown route claims nothing", []queue.Route{{Source: "shop", Target: "sms"}}, nil},
		{"one route", []queue.Route{{Source: "shop", Target: "chat"}}, []string{"shop/chat"}},
		{"two routes", []queue.Route{{Source: "forge", Target: "mail"}, {Source: "shop", Target: "mail"}}, []string{"forge/mail", "shop/mail"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			jobs, err := s.Claim(t.Context(), queue.ClaimParams{Owner: "w", Limit: 10, Lease: lease, Now: now(), Routes: tt.routes})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, j := range jobs {
				got = append(got, j.Source+"/"+j.Target)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("claimed %v, want %v", got, tt.want)
			}
		})
	}
	if st := stats(t, s, now()); count(st, queue.StatusRunning) != 3 {
		t.Errorf("Stats = %+v, want the 3 routed jobs running", st)
	}
}

func testTakeover(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "mail"))
	at := now()
	a := claimAt(t, s, "a", 1, at)[0]
	if got := claimAt(t, s, "b", 1, at.Add(lease/2)); len(got) != 0 {
		t.Fatalf("claimed a job whose lease holds: %+v", got[0])
	}
	b := claimAt(t, s, "b", 1, at.Add(lease+time.Second))
	if len(b) != 1 || b[0].ID != a.ID || b[0].LeaseOwner != "b" || b[0].Attempt != 2 {
		t.Fatalf("takeover after expiry = %+v, want job %d attempt 2 for b", b, a.ID)
	}
	if d := get(t, s, a.ID); d.LeaseOwner != "b" || d.Status != queue.StatusRunning {
		t.Errorf("stored owner %q status %s, want b running", d.LeaseOwner, d.Status)
	}
}

func testFence(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "mail"))
	at := now()
	stale := claimAt(t, s, "a", 1, at)[0]
	fresh := claimAt(t, s, "b", 1, at.Add(lease+time.Second))[0]
	tests := []struct {
		name string
		c    queue.Completion
	}{
		{"done", done(stale, now())},
		{"retry", retry(stale, now(), "boom")},
		{"dead", dead(stale, "boom")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if finish(t, s, tt.c)[0] {
				t.Fatal("stale owner's Finish was recorded")
			}
			d := get(t, s, stale.ID)
			if d.Status != queue.StatusRunning || d.LeaseOwner != "b" || d.LastError != "" || len(d.History) != 0 || d.Attempts != 2 {
				t.Errorf("after stale Finish: %+v, want untouched (running under b, no history)", d)
			}
		})
	}
	lost, err := s.ExtendLeases(t.Context(), "a", []int64{stale.ID}, at.Add(time.Hour))
	if err != nil || !slices.Equal(lost, []int64{stale.ID}) {
		t.Errorf("stale ExtendLeases = %v, %v; want the job lost", lost, err)
	}
	if err := s.HandBack(t.Context(), "a", []int64{stale.ID}); err != nil {
		t.Fatal(err)
	}
	if d := get(t, s, stale.ID); d.Status != queue.StatusRunning || d.LeaseOwner != "b" {
		t.Errorf("stale HandBack changed the job: %+v", d)
	}
	if rec := finish(t, s, done(fresh, now())); !rec[0] {
		t.Error("the owner's Finish was not recorded")
	}
}

func testExtend(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "mail", "chat"))
	at := now()
	jobs := claimAt(t, s, "a", 2, at)
	until := at.Add(10 * lease)
	lost, err := s.ExtendLeases(t.Context(), "a", []int64{jobs[0].ID, jobs[1].ID, 1 << 40}, until)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(lost, []int64{1 << 40}) {
		t.Errorf("lost = %v, want only the unknown id", lost)
	}
	if d := get(t, s, jobs[0].ID); !d.LeaseUntil.Equal(until) {
		t.Errorf("lease until %v, want %v", d.LeaseUntil, until)
	}
	// The extended lease holds past the original one.
	if got := claimAt(t, s, "b", 2, at.Add(2*lease)); len(got) != 0 {
		t.Errorf("claimed %v under an extended lease", ids(got))
	}
	lost, err = s.ExtendLeases(t.Context(), "b", ids(jobs), until)
	if err != nil || !slices.Equal(lost, ids(jobs)) {
		t.Errorf("ExtendLeases by a non-owner = %v, %v; want both lost", lost, err)
	}
}

func testHandBack(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "mail"))
	j := claimOne(t, s, "a")
	if err := s.HandBack(t.Context(), "a", []int64{j.ID}); err != nil {
		t.Fatal(err)
	}
	d := get(t, s, j.ID)
	if d.Status != queue.StatusPending || d.Attempts != 0 || d.LeaseOwner != "" || !d.LeaseUntil.IsZero() || d.RunAt.After(now()) {
		t.Errorf("after hand-back: %+v, want pending, 0 attempts, no lease, due now", d)
	}
	again := claimOne(t, s, "b")
	if again.ID != j.ID || again.Attempt != 1 {
		t.Errorf("claim after hand-back = job %d attempt %d, want job %d attempt 1", again.ID, again.Attempt, j.ID)
	}
}

func testFinish(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "done", "retry", "dead"))
	jobs := map[string]*queue.Job{}
	for _, j := range claim(t, s, "w", 3) {
		jobs[j.Target] = j
	}
	at := now()
	runAt := at.Add(time.Hour)
	rec := finish(t, s,
		done(jobs["done"], at),
		retry(jobs["retry"], runAt, "503 from upstream"),
		dead(jobs["dead"], "400 from upstream"),
	)
	if !slices.Equal(rec, []bool{true, true, true}) {
		t.Fatalf("recorded = %v, want all", rec)
	}
	tests := []struct {
		target string
		status queue.Status
		err    string
		runAt  time.Time
	}{
		{"done", queue.StatusDone, "", time.Time{}},
		{"retry", queue.StatusPending, "503 from upstream", runAt},
		{"dead", queue.StatusDead, "400 from upstream", time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			d := get(t, s, jobs[tt.target].ID)
			if d.Status != tt.status || d.LastError != tt.err || d.Attempts != 1 || d.LeaseOwner != "" || !d.LeaseUntil.IsZero() {
				t.Errorf("job %+v, want %s with error %q, 1 attempt, no lease", d.JobSummary, tt.status, tt.err)
			}
			if tt.status == queue.StatusPending && !d.FinishedAt.IsZero() {
				t.Errorf("retried job finished at %v, want unset", d.FinishedAt)
			}
			if tt.status == queue.StatusDone && !d.FinishedAt.Equal(at) {
				t.Errorf("finished at %v, want %v", d.FinishedAt, at)
			}
			if !tt.runAt.IsZero() && !d.RunAt.Equal(tt.runAt) {
				t.Errorf("run at %v, want %v", d.RunAt, tt.runAt)
			}
			if len(d.History) != 1 || d.History[0].Attempt != 1 || d.History[0].Outcome != tt.status ||
				d.History[0].Error != tt.err || d.History[0].Duration != time.Millisecond || d.History[0].Started.IsZero() {
				t.Errorf("history %+v, want one attempt with outcome %s", d.History, tt.status)
			}
		})
	}
	// Nothing is claimable before the retry is due; the retry is after.
	if got := claimAt(t, s, "w", 10, runAt.Add(-time.Second)); len(got) != 0 {
		t.Errorf("claimed %v before the retry was due", ids(got))
	}
	if got := claimAt(t, s, "w", 10, runAt.Add(24*time.Hour)); len(got) != 1 || got[0].ID != jobs["retry"].ID || got[0].Attempt != 2 {
		t.Errorf("claim when due = %v, want only the retry, attempt 2", ids(got))
	}
}

func testHistory(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "mail"))
	const attempts = queue.MaxHistory + 5
	var id int64
	for i := range attempts {
		j := claimOne(t, s, "w")
		id = j.ID
		if !finish(t, s, retry(j, now(), fmt.Sprint("attempt ", i+1)))[0] {
			t.Fatal("retry not recorded")
		}
	}
	h := get(t, s, id).History
	if len(h) != queue.MaxHistory {
		t.Fatalf("history has %d entries, want %d", len(h), queue.MaxHistory)
	}
	if h[0].Attempt != attempts-queue.MaxHistory+1 || h[len(h)-1].Attempt != attempts || h[len(h)-1].Error != fmt.Sprint("attempt ", attempts) {
		t.Errorf("history runs %d..%d (last error %q), want the newest %d..%d", h[0].Attempt, h[len(h)-1].Attempt, h[len(h)-1].Error, attempts-queue.MaxHistory+1, attempts)
	}
}

func testTruncate(t *testing.T, s queue.Store) {
	tests := []struct {
		name string
		msg  string
	}{
		{"ascii", strings.Repeat("x", 3*queue.MaxErrorLen)},
		{"multibyte at the boundary", "x" + strings.Repeat("é", queue.MaxErrorLen)},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enqueue(t, s, event("shop", fmt.Sprint("d", i), "mail"))
			j := claimOne(t, s, "w")
			finish(t, s, dead(j, tt.msg))
			d := get(t, s, j.ID)
			if len(d.LastError) > queue.MaxErrorLen || len(d.LastError) < queue.MaxErrorLen-3 ||
				!strings.HasPrefix(tt.msg, d.LastError) || !utf8.ValidString(d.LastError) {
				t.Errorf("stored error of %d bytes (valid UTF-8: %v), want a prefix of at most %d", len(d.LastError), utf8.ValidString(d.LastError), queue.MaxErrorLen)
			}
			if len(d.History) != 1 || d.History[0].Error != d.LastError {
				t.Errorf("history error is not the truncated error")
			}
		})
	}
}

func testReplay(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "mail", "chat"))
	jobs := claim(t, s, "w", 2)
	finish(t, s, dead(jobs[0], "boom"))
	tests := []struct {
		name string
		id   int64
		want error
	}{
		{"unknown job", 1 << 40, queue.ErrNotFound},
		{"running job", jobs[1].ID, queue.ErrNotDead},
		{"dead job", jobs[0].ID, nil},
		{"replayed job is pending", jobs[0].ID, queue.ErrNotDead},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.Replay(t.Context(), tt.id); !errors.Is(err, tt.want) {
				t.Errorf("Replay(%d) = %v, want %v", tt.id, err, tt.want)
			}
		})
	}
	d := get(t, s, jobs[0].ID)
	if d.Status != queue.StatusPending || d.Attempts != 0 || d.RunAt.After(now()) || !d.FinishedAt.IsZero() {
		t.Errorf("replayed job %+v, want pending, 0 attempts, due now", d.JobSummary)
	}
	if j := claimOne(t, s, "w"); j.ID != jobs[0].ID || j.Attempt != 1 {
		t.Errorf("claim after replay = job %d attempt %d, want job %d attempt 1", j.ID, j.Attempt, jobs[0].ID)
	}
}

func testReplayDead(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "mail", "chat"))
	enqueue(t, s, event("forge", "d1", "mail"))
	enqueue(t, s, event("forge", "d2", "mail"))
	for _, j := range claim(t, s, "w", 10) {
		finish(t, s, dead(j, "boom"))
	}
	tests := []struct {
		name   string
		filter queue.Filter
		want   int
	}{
		{"source and target", queue.Filter{Source: "shop", Target: "chat"}, 1},
		{"no match", queue.Filter{Source: "shop", Target: "sms"}, 0},
		{"target", queue.Filter{Target: "mail", Status: queue.StatusDone}, 3}, // Status is ignored
		{"all", queue.Filter{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := s.ReplayDead(t.Context(), tt.filter)
			if err != nil || n != tt.want {
				t.Errorf("ReplayDead(%+v) = %d, %v; want %d", tt.filter, n, err, tt.want)
			}
		})
	}
	st := stats(t, s, now())
	if count(st, queue.StatusDead) != 0 || count(st, queue.StatusPending) != 4 {
		t.Errorf("Stats = %+v, want the 4 jobs pending", st)
	}
	for _, j := range claim(t, s, "w", 10) {
		if j.Attempt != 1 {
			t.Errorf("job %d replayed at attempt %d, want 1", j.ID, j.Attempt)
		}
	}
}

func testDiscard(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "mail", "chat"))
	jobs := claim(t, s, "w", 2)
	finish(t, s, dead(jobs[0], "boom"))
	steps := []struct {
		name   string
		id     int64
		want   error
		events int64
	}{
		{"unknown job", 1 << 40, queue.ErrNotFound, 1},
		{"running job refused", jobs[1].ID, queue.ErrRunning, 1},
		{"dead job, event kept for its sibling", jobs[0].ID, nil, 1},
		{"gone", jobs[0].ID, queue.ErrNotFound, 1},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if err := s.Discard(t.Context(), st.id); !errors.Is(err, st.want) {
				t.Errorf("Discard(%d) = %v, want %v", st.id, err, st.want)
			}
			if got := stats(t, s, now()).Events; got != st.events {
				t.Errorf("events = %d, want %d", got, st.events)
			}
		})
	}
	if _, err := s.GetJob(t.Context(), jobs[0].ID); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("GetJob of a discarded job = %v, want ErrNotFound", err)
	}
	finish(t, s, dead(jobs[1], "boom"))
	if err := s.Discard(t.Context(), jobs[1].ID); err != nil {
		t.Fatal(err)
	}
	if got := stats(t, s, now()); got.Events != 0 || count(got, "") != 0 {
		t.Errorf("after discarding the last job: %+v, want no event, no job", got)
	}
	// The event went with its last job, so the delivery is new again.
	if res := enqueue(t, s, event("shop", "d1", "mail")); res.Duplicate {
		t.Error("the discarded event still dedupes")
	}
}

func testPurge(t *testing.T, s queue.Store) {
	start := now()
	old := start.Add(-2 * time.Hour)
	enqueue(t, s, event("shop", "old", "mail", "chat")) // both done long ago
	enqueue(t, s, event("shop", "mixed", "mail", "chat"))
	enqueue(t, s, event("shop", "recent", "mail"))
	enqueue(t, s, event("shop", "bare"))            // no target: dedupe memory only
	enqueue(t, s, event("shop", "waiting", "mail")) // still pending
	jobs := map[string][]*queue.Job{}
	for _, j := range claim(t, s, "w", 6) {
		jobs[j.DeliveryID] = append(jobs[j.DeliveryID], j)
	}
	finish(t, s, done(jobs["old"][0], old), done(jobs["old"][1], old), done(jobs["mixed"][0], old), done(jobs["recent"][0], start))
	finish(t, s, dead(jobs["mixed"][1], "boom"))
	if err := s.HandBack(t.Context(), "w", ids(jobs["waiting"])); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name   string
		cutoff time.Time
		purged int
		gone   []string // deliveries no longer deduped
		kept   []string
	}{
		{"older than an hour", start.Add(-time.Hour), 3, []string{"old"}, []string{"mixed", "recent", "bare", "waiting"}},
		{"everything done", start.Add(time.Hour), 1, []string{"recent", "bare"}, []string{"mixed", "waiting"}},
		{"again", start.Add(time.Hour), 0, nil, []string{"mixed", "waiting"}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			n, err := s.Purge(t.Context(), st.cutoff, 100)
			if err != nil || n != st.purged {
				t.Fatalf("Purge = %d, %v; want %d", n, err, st.purged)
			}
			if got := stats(t, s, now()).Events; got != int64(len(st.kept)) {
				t.Errorf("events = %d, want %d (%v)", got, len(st.kept), st.kept)
			}
		})
	}
	// The kept events still dedupe; the purged ones are accepted anew.
	for _, id := range []string{"mixed", "waiting"} {
		if !enqueue(t, s, event("shop", id, "mail")).Duplicate {
			t.Errorf("%s: purged while it still had a job", id)
		}
	}
	for _, id := range []string{"old", "recent", "bare"} {
		if enqueue(t, s, event("shop", id, "mail")).Duplicate {
			t.Errorf("%s: kept after its purge", id)
		}
	}
	if st := stats(t, s, now()); count(st, queue.StatusDead) != 1 || count(st, queue.StatusDone) != 0 {
		t.Errorf("Stats = %+v, want the dead job kept and no done job", st)
	}
}

func testPurgeLimit(t *testing.T, s queue.Store) {
	for i := range 5 {
		enqueue(t, s, event("shop", fmt.Sprint("d", i), "mail"))
	}
	at := now()
	for _, j := range claim(t, s, "w", 5) {
		finish(t, s, done(j, at))
	}
	for i, want := range []int{2, 2, 1, 0} {
		n, err := s.Purge(t.Context(), at.Add(time.Second), 2)
		if err != nil || n != want {
			t.Errorf("Purge #%d = %d, %v; want %d", i+1, n, err, want)
		}
	}
	if st := stats(t, s, now()); st.Events != 0 || count(st, "") != 0 {
		t.Errorf("Stats = %+v, want empty", st)
	}
}

func testStats(t *testing.T, s queue.Store) {
	if st := stats(t, s, now()); len(st.Counts) != 0 || st.OldestPending != 0 || st.Events != 0 {
		t.Errorf("empty store: %+v", st)
	}
	before := now()
	enqueue(t, s, event("shop", "d1", "mail", "chat"))
	enqueue(t, s, event("forge", "d1", "mail"))
	after := now()
	j := claim(t, s, "w", 1)[0] // shop/mail or shop/chat, by id
	finish(t, s, done(j, now()))

	at := after.Add(time.Hour)
	st := stats(t, s, at)
	if st.Events != 2 {
		t.Errorf("events = %d, want 2", st.Events)
	}
	if st.OldestPending < at.Sub(after) || st.OldestPending > at.Sub(before) {
		t.Errorf("oldest pending age %v, want between %v and %v", st.OldestPending, at.Sub(after), at.Sub(before))
	}
	want := map[string]int64{"shop/" + j.Target + "/done": 1, "forge/mail/pending": 1}
	for _, tg := range []string{"mail", "chat"} {
		if tg != j.Target {
			want["shop/"+tg+"/pending"] = 1
		}
	}
	got := map[string]int64{}
	for _, c := range st.Counts {
		got[c.Source+"/"+c.Target+"/"+string(c.Status)] += c.Jobs
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("counts = %v, want %v", got, want)
	}
	// A retry that is not yet due is not waiting.
	for _, j := range claim(t, s, "w", 10) {
		finish(t, s, retry(j, at.Add(time.Hour), "later"))
	}
	if st := stats(t, s, at); st.OldestPending != 0 {
		t.Errorf("oldest pending age %v with nothing due, want 0", st.OldestPending)
	}
}

func testList(t *testing.T, s queue.Store) {
	for i := range 5 {
		enqueue(t, s, event("shop", fmt.Sprint("d", i), "mail"))
	}
	enqueue(t, s, event("forge", "d0", "chat"))
	j := claimOne(t, s, "w")
	finish(t, s, dead(j, "boom"))

	all := list(t, s, queue.ListParams{})
	if len(all.Jobs) != 6 || all.NextCursor != 0 {
		t.Fatalf("list all = %d jobs, cursor %d; want 6, 0", len(all.Jobs), all.NextCursor)
	}
	if !slices.IsSortedFunc(all.Jobs, func(a, b queue.JobSummary) int { return int(b.ID - a.ID) }) {
		t.Errorf("list is not newest first: %v", all.Jobs)
	}
	tests := []struct {
		name string
		f    queue.Filter
		want int
	}{
		{"status", queue.Filter{Status: queue.StatusDead}, 1},
		{"source", queue.Filter{Source: "forge"}, 1},
		{"target", queue.Filter{Target: "mail"}, 5},
		{"source and status", queue.Filter{Source: "shop", Status: queue.StatusPending}, 4},
		{"no match", queue.Filter{Source: "forge", Target: "mail"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page := list(t, s, queue.ListParams{Filter: tt.f})
			if len(page.Jobs) != tt.want {
				t.Fatalf("%d jobs, want %d", len(page.Jobs), tt.want)
			}
			for _, j := range page.Jobs {
				if (tt.f.Status != "" && j.Status != tt.f.Status) || (tt.f.Source != "" && j.Source != tt.f.Source) || (tt.f.Target != "" && j.Target != tt.f.Target) {
					t.Errorf("job %+v does not match %+v", j, tt.f)
				}
			}
		})
	}
	t.Run("paging", func(t *testing.T) {
		var got []int64
		cursor, pages := int64(0), 0
		for {
			page := list(t, s, queue.ListParams{Filter: queue.Filter{Target: "mail"}, Limit: 2, Cursor: cursor})
			pages++
			for _, j := range page.Jobs {
				got = append(got, j.ID)
			}
			if page.NextCursor == 0 || pages > 5 {
				break
			}
			cursor = page.NextCursor
		}
		var want []int64
		for _, j := range all.Jobs {
			if j.Target == "mail" {
				want = append(want, j.ID)
			}
		}
		if pages != 3 || !slices.Equal(got, want) {
			t.Errorf("paged %v in %d pages, want %v in 3", got, pages, want)
		}
	})
	if _, err := s.ListJobs(t.Context(), queue.ListParams{Filter: queue.Filter{Status: "lost"}}); err == nil {
		t.Error("ListJobs with an unknown status succeeded")
	}
}

func testGet(t *testing.T, s queue.Store) {
	if _, err := s.GetJob(t.Context(), 1<<40); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("GetJob(unknown) = %v, want ErrNotFound", err)
	}
	ev := event("shop", "d1", "mail")
	ev.Payload = []byte{0, 1, 2, 0xff, '\n'}
	enqueue(t, s, ev)
	at := now()
	j := claimAt(t, s, "w", 1, at)[0]
	d := get(t, s, j.ID)
	if d.LeaseOwner != "w" || !d.LeaseUntil.Equal(at.Add(lease)) || d.Status != queue.StatusRunning {
		t.Errorf("running job %+v, want leased to w until %v", d, at.Add(lease))
	}
	finish(t, s, retry(j, at, "503"))
	d = get(t, s, j.ID)
	if string(d.Payload) != string(ev.Payload) || !slices.Equal(d.Headers, ev.Headers) || d.DeliveryID != "d1" ||
		d.EventType != ev.EventType || d.Source != "shop" || d.Target != "mail" || d.LastError != "503" ||
		d.EventID != j.EventID || d.CreatedAt.IsZero() || d.LeaseOwner != "" {
		t.Errorf("GetJob = %+v, want the event's payload, headers and the last error", d)
	}
	if len(d.History) != 1 || d.History[0].Outcome != queue.StatusPending || d.History[0].Error != "503" {
		t.Errorf("history = %+v, want one retried attempt", d.History)
	}
}

func testReady(t *testing.T, s queue.Store) {
	drain := func() {
		select {
		case <-s.Ready():
		default:
		}
	}
	signalled := func() bool {
		select {
		case <-s.Ready():
			return true
		default:
			return false
		}
	}
	drain()
	steps := []struct {
		name  string
		write func(t *testing.T)
		want  bool // a signal must be waiting when the write returns
	}{
		{"enqueue with a target", func(t *testing.T) { enqueue(t, s, event("shop", "d1", "mail")) }, true},
		{"enqueue without a target", func(t *testing.T) { enqueue(t, s, event("shop", "d2")) }, false},
		{"duplicate", func(t *testing.T) { enqueue(t, s, event("shop", "d1", "mail")) }, false},
		{"claim", func(t *testing.T) { claimOne(t, s, "w") }, false},
		{"hand-back", func(t *testing.T) {
			if err := s.HandBack(t.Context(), "w", []int64{list(t, s, queue.ListParams{}).Jobs[0].ID}); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"retry not yet due", func(t *testing.T) { finish(t, s, retry(claimOne(t, s, "w"), now().Add(time.Hour), "x")) }, false},
		{"dead", func(t *testing.T) {
			enqueue(t, s, event("shop", "d3", "mail"))
			drain()
			finish(t, s, dead(claimOne(t, s, "w"), "x"))
		}, false},
		{"replay", func(t *testing.T) {
			if _, err := s.ReplayDead(t.Context(), queue.Filter{}); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"retry due now", func(t *testing.T) { finish(t, s, retry(claimOne(t, s, "w"), now(), "x")) }, true},
	}
	// Only the signals that must come are checked: a backend that also
	// hears its own notifications (Postgres LISTEN/NOTIFY) may add a late,
	// merged signal after any write, which is harmless.
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			drain()
			st.write(t)
			if got := signalled(); st.want && !got {
				t.Error("Ready not signalled")
			}
		})
	}
}

func testClose(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "mail"))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ctx := t.Context()
	calls := []struct {
		name string
		call func() error
	}{
		{"Enqueue", func() error { _, err := s.Enqueue(ctx, event("shop", "d2", "mail")); return err }},
		{"Claim", func() error {
			_, err := s.Claim(ctx, queue.ClaimParams{Owner: "w", Limit: 1, Lease: lease, Now: now()})
			return err
		}},
		{"Replay", func() error { return s.Replay(ctx, 1) }},
		{"Stats", func() error { _, err := s.Stats(ctx, now()); return err }},
		{"ListJobs", func() error { _, err := s.ListJobs(ctx, queue.ListParams{}); return err }},
		{"GetJob", func() error { _, err := s.GetJob(ctx, 1); return err }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			if err := c.call(); !errors.Is(err, queue.ErrClosed) {
				t.Errorf("%s after Close = %v, want ErrClosed", c.name, err)
			}
		})
	}
}

// testWorkers runs many workers over thousands of jobs, with a producer
// enqueueing while they claim, and retries on a share of the attempts. It
// checks that each job finishes done exactly once, that no job is claimed
// while another worker holds its lease, and that the counts add up.
func testWorkers(t *testing.T, s queue.Store) {
	const (
		events    = 1000
		targets   = 2
		total     = events * targets
		workers   = 8
		producers = 4 // enqueueing while the workers claim
	)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	var (
		mu        sync.Mutex
		holder    = map[int64]string{} // job -> worker holding its lease
		doneCount = map[int64]int{}
		finished  atomic.Int64
		errs      = make(chan error, workers+1)
	)
	go func() {
		var wg sync.WaitGroup
		var failed atomic.Pointer[error]
		for p := range producers {
			wg.Go(func() {
				for i := p; i < events; i += producers {
					if _, err := s.Enqueue(ctx, event("shop", fmt.Sprint("d", i), "mail", "chat")); err != nil {
						err = fmt.Errorf("enqueue: %w", err)
						failed.CompareAndSwap(nil, &err)
						return
					}
				}
			})
		}
		wg.Wait()
		if err := failed.Load(); err != nil {
			errs <- *err
			return
		}
		errs <- nil
	}()
	var wg sync.WaitGroup
	for w := range workers {
		owner := fmt.Sprint("worker-", w)
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), 1))
			for finished.Load() < total {
				jobs, err := s.Claim(ctx, queue.ClaimParams{Owner: owner, Limit: 1 + rnd.IntN(16), Lease: time.Hour, Now: time.Now()})
				if err != nil {
					errs <- fmt.Errorf("%s: claim: %w", owner, err)
					return
				}
				if len(jobs) == 0 {
					select {
					case <-s.Ready():
					case <-time.After(5 * time.Millisecond): // another worker took the signal
					case <-ctx.Done():
						errs <- fmt.Errorf("%s: %w with %d of %d finished", owner, ctx.Err(), finished.Load(), total)
						return
					}
					continue
				}
				mu.Lock()
				for _, j := range jobs {
					if h, ok := holder[j.ID]; ok {
						mu.Unlock()
						errs <- fmt.Errorf("job %d claimed by %s while %s held its lease", j.ID, owner, h)
						return
					}
					holder[j.ID] = owner
				}
				mu.Unlock()
				// The jobs are held outside the lock while their outcomes
				// are decided, as a handler would run, so that another
				// worker's claim of one of them is seen above.
				runtime.Gosched()
				cs := make([]queue.Completion, len(jobs))
				for i, j := range jobs {
					status := queue.StatusDone
					if rnd.IntN(4) == 0 && j.Attempt < 3 {
						status = queue.StatusPending
					}
					at := time.Now()
					cs[i] = queue.Completion{JobID: j.ID, Owner: owner, Status: status, RunAt: at, Error: "retry", Started: at, Now: at}
				}
				// The lease is released by the Finish below; forget the
				// holder first so that a legitimate re-claim is not flagged.
				mu.Lock()
				for _, j := range jobs {
					delete(holder, j.ID)
				}
				mu.Unlock()
				rec, err := s.Finish(ctx, cs)
				if err != nil {
					errs <- fmt.Errorf("%s: finish: %w", owner, err)
					return
				}
				mu.Lock()
				for i, c := range cs {
					if !rec[i] {
						mu.Unlock()
						errs <- fmt.Errorf("job %d: finish by its lease holder %s not recorded", c.JobID, owner)
						return
					}
					if c.Status == queue.StatusDone {
						doneCount[c.JobID]++
						finished.Add(1)
					}
				}
				mu.Unlock()
			}
			errs <- nil
		})
	}
	wg.Wait()
	for range workers + 1 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if len(doneCount) != total {
		t.Errorf("%d distinct jobs done, want %d", len(doneCount), total)
	}
	for id, n := range doneCount {
		if n != 1 {
			t.Errorf("job %d finished done %d times", id, n)
		}
	}
	st := stats(t, s, time.Now())
	if count(st, queue.StatusDone) != total || count(st, "") != total || st.Events != events {
		t.Errorf("Stats = %+v, want %d done jobs of %d events", st, total, events)
	}
}
