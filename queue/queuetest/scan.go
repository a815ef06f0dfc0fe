package queuetest

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

func scan(t *testing.T, s queue.Store, p queue.ScanParams) queue.ScanPage {
	t.Helper()
	page, err := s.ScanEvents(t.Context(), p)
	if err != nil {
		t.Fatalf("ScanEvents(%+v): %v", p, err)
	}
	return page
}

// scanAll reads every page of p and returns the events' source/delivery
// names in the order read, and the number of pages.
func scanAll(t *testing.T, s queue.Store, p queue.ScanParams) ([]string, int) {
	t.Helper()
	var got []string
	pages := 0
	for {
		page := scan(t, s, p)
		pages++
		for _, e := range page.Events {
			got = append(got, e.Source+"/"+e.DeliveryID)
		}
		if page.Next == 0 {
			return got, pages
		}
		if page.Next <= p.After {
			t.Fatalf("ScanEvents(%+v).Next = %d: the walk does not move on", p, page.Next)
		}
		p.After = page.Next
		if pages > 1000 {
			t.Fatalf("more than 1000 pages: %v", got)
		}
	}
}

// testScanEvents walks a store of events of several sources and types, in
// pages: every event once, oldest first, with its headers, payload and
// jobs, the filters applied; a page of events none of which match still
// moves the cursor on.
func testScanEvents(t *testing.T, s queue.Store) {
	if page := scan(t, s, queue.ScanParams{}); len(page.Events) != 0 || page.Next != 0 {
		t.Fatalf("scan of an empty store = %+v, want nothing and no cursor", page)
	}
	t0 := now()
	first := enqueue(t, s, event("shop", "d1", "mail", "chat"))
	ping := event("shop", "ping") // no target wants it
	ping.EventType = "ping"
	enqueue(t, s, ping)
	enqueue(t, s, event("forge", "f1", "mail"))
	mid := tick(now())
	for i := range 5 {
		enqueue(t, s, event("forge", fmt.Sprint("f", i+2), "mail"))
	}
	enqueue(t, s, event("shop", "d2", "mail"))
	end := tick(now())
	jobs := claim(t, s, "w", 2) // d1's mail and chat
	finish(t, s, done(jobs[0], now()), dead(jobs[1], "boom"))

	all := []string{"shop/d1", "shop/ping", "forge/f1", "forge/f2", "forge/f3", "forge/f4", "forge/f5", "forge/f6", "shop/d2"}
	page := scan(t, s, queue.ScanParams{})
	if got := eventNames(page.Events); !slices.Equal(got, all) || page.Next != 0 {
		t.Fatalf("one page of everything = %v next %d, want %v, oldest first, no cursor", got, page.Next, all)
	}
	d1 := page.Events[0]
	want := event("shop", "d1")
	if d1.ID != first.EventID || d1.EventType != want.EventType || !bytes.Equal(d1.Payload, want.Payload) ||
		fmt.Sprint(d1.Headers) != fmt.Sprint(want.Headers) || d1.CreatedAt.Before(t0) || d1.CreatedAt.After(mid) {
		t.Errorf("scanned d1 = %+v, want %+v stored between %v and %v", d1, want, t0, mid)
	}
	if got := fmt.Sprint(d1.Jobs); got != fmt.Sprintf("[{%d mail done 1} {%d chat dead 1}]", jobs[0].ID, jobs[1].ID) {
		t.Errorf("jobs of d1 = %s, want mail done and chat dead", got)
	}
	if page.Events[1].Jobs == nil || len(page.Events[1].Jobs) != 0 {
		t.Errorf("jobs of ping = %#v, want an empty list", page.Events[1].Jobs)
	}
	var summaries []string
	for _, j := range page.Jobs {
		summaries = append(summaries, fmt.Sprintf("%s/%s/%s/%s/%s", j.Source, j.DeliveryID, j.EventType, j.Target, j.Status))
	}
	if want := []string{"shop/d1/order.paid/mail/done", "shop/d1/order.paid/chat/dead", "forge/f1/order.paid/mail/pending",
		"forge/f2/order.paid/mail/pending", "forge/f3/order.paid/mail/pending", "forge/f4/order.paid/mail/pending",
		"forge/f5/order.paid/mail/pending", "forge/f6/order.paid/mail/pending", "shop/d2/order.paid/mail/pending"}; !slices.Equal(summaries, want) {
		t.Errorf("the page's jobs = %v, want %v", summaries, want)
	}
	if j := page.Jobs[1]; j.LastError != "boom" || j.Attempts != 1 || j.FinishedAt.IsZero() || j.EventID != d1.ID {
		t.Errorf("the dead job's summary = %+v, want its error, attempt and finish", j)
	}

	tests := []struct {
		name string
		p    queue.ScanParams
		want []string
	}{
		{"pages of 2", queue.ScanParams{Limit: 2}, all},
		{"source", queue.ScanParams{Source: "shop"}, []string{"shop/d1", "shop/ping", "shop/d2"}},
		{"source, pages of 2", queue.ScanParams{Source: "shop", Limit: 2}, []string{"shop/d1", "shop/ping", "shop/d2"}},
		{"event type", queue.ScanParams{EventType: "ping"}, []string{"shop/ping"}},
		{"since", queue.ScanParams{Since: mid}, all[3:]},
		{"since, pages of 3", queue.ScanParams{Since: mid, Limit: 3}, all[3:]},
		{"until", queue.ScanParams{Until: mid}, all[:3]},
		{"since and until, source", queue.ScanParams{Since: t0, Until: mid, Source: "forge"}, []string{"forge/f1"}},
		{"after everything", queue.ScanParams{Since: end}, nil},
		{"after a cursor", queue.ScanParams{After: first.EventID + 1}, all[2:]},
		{"unknown source", queue.ScanParams{Source: "nope", Limit: 2}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, _ := scanAll(t, s, tt.p); !slices.Equal(got, tt.want) {
				t.Errorf("scanned %v, want %v", got, tt.want)
			}
		})
	}

	t.Run("a page walks its events, matching or not", func(t *testing.T) {
		// The five forge events f2…f6 in the middle: a page of 2 events of
		// source shop after f1 holds nothing, and the next starts after
		// the two events it walked.
		f1 := page.Events[2].ID
		p := scan(t, s, queue.ScanParams{Source: "shop", Limit: 2, After: f1})
		if len(p.Events) != 0 || p.Next != page.Events[4].ID {
			t.Errorf("page = %v next %d, want none and next %d", eventNames(p.Events), p.Next, page.Events[4].ID)
		}
		if _, pages := scanAll(t, s, queue.ScanParams{Source: "shop", Limit: 2}); pages != 5 {
			t.Errorf("%d pages of 2 for 9 events, want 5", pages)
		}
	})

	t.Run("bad parameters", func(t *testing.T) {
		for _, p := range []queue.ScanParams{
			{Since: mid, Until: t0},
			{Since: mid, Until: mid},
			{After: -1},
		} {
			if _, err := s.ScanEvents(t.Context(), p); err == nil {
				t.Errorf("ScanEvents(%+v) = nil error", p)
			}
		}
	})
}

func eventNames(events []queue.EventDetail) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.Source+"/"+e.DeliveryID)
	}
	return out
}

// testScanPageBytes: a page stops once it holds ScanPageBytes of bodies,
// and the next starts after the last event it holds.
func testScanPageBytes(t *testing.T, s queue.Store) {
	big := bytes.Repeat([]byte("x"), queue.ScanPageBytes/2)
	for i := range 5 {
		ev := event("shop", fmt.Sprint("big", i), "mail")
		ev.Payload = big
		enqueue(t, s, ev)
	}
	var sizes []int
	p := queue.ScanParams{}
	for {
		page := scan(t, s, p)
		sizes = append(sizes, len(page.Events))
		for _, e := range page.Events {
			if !bytes.Equal(e.Payload, big) {
				t.Fatalf("event %d payload of %d bytes, want %d", e.ID, len(e.Payload), len(big))
			}
		}
		if page.Next == 0 {
			break
		}
		p.After = page.Next
	}
	if !slices.Equal(sizes, []int{2, 2, 1}) {
		t.Errorf("events per page = %v, want [2 2 1]: each page stops once it holds %d bytes", sizes, queue.ScanPageBytes)
	}
}

func requeue(t *testing.T, s queue.Store, items ...queue.Requeue) []int64 {
	t.Helper()
	got, err := s.Requeue(t.Context(), items)
	if err != nil {
		t.Fatalf("Requeue(%+v): %v", items, err)
	}
	if len(got) != len(items) {
		t.Fatalf("Requeue returned %d ids for %d items", len(got), len(items))
	}
	return got
}

// testRequeue: a dead job is replayed and a done one resent, an event gets
// a new job for a target, each due at its time; a pending job, an unknown
// job and a gone event queue nothing.
func testRequeue(t *testing.T, s queue.Store) {
	t0 := now()
	enqueue(t, s, event("shop", "d1", "mail", "chat", "sms"))
	bare := enqueue(t, s, event("shop", "bare"))
	jobs := claim(t, s, "w", 2) // mail, chat
	finish(t, s, done(jobs[0], t0), dead(jobs[1], "boom"))
	sms := list(t, s, queue.ListParams{Filter: queue.Filter{Status: queue.StatusPending}}).Jobs[0]
	later := t0.Add(time.Hour)

	got := requeue(t, s,
		queue.Requeue{JobID: jobs[0].ID},                                   // done: resent
		queue.Requeue{JobID: jobs[1].ID, RunAt: later},                     // dead: replayed, due later
		queue.Requeue{JobID: sms.ID},                                       // pending: nothing
		queue.Requeue{JobID: 1 << 40},                                      // unknown: nothing
		queue.Requeue{EventID: bare.EventID, Target: "mail"},               // a new job
		queue.Requeue{EventID: bare.EventID + 100, Target: "mail"},         // no such event
		queue.Requeue{EventID: bare.EventID, Target: "chat", RunAt: later}, // a new job, due later
	)
	if got[0] != jobs[0].ID || got[1] != jobs[1].ID || got[2] != 0 || got[3] != 0 || got[4] == 0 || got[5] != 0 || got[6] == 0 || got[4] == got[6] {
		t.Fatalf("Requeue = %v, want the done and dead jobs, 0, 0, a new job, 0, another new job", got)
	}
	for _, c := range []struct {
		id      int64
		runAt   time.Time
		replays int
	}{{jobs[0].ID, t0, 1}, {jobs[1].ID, later, 1}, {got[4], t0, 0}, {got[6], later, 0}} {
		d := get(t, s, c.id)
		if d.Status != queue.StatusPending || d.Replays != c.replays || !d.FinishedAt.IsZero() ||
			d.RunAt.Before(c.runAt) || d.RunAt.After(c.runAt.Add(time.Minute)) {
			t.Errorf("job %d after Requeue = %+v, want pending with %d replays, due at %v", c.id, d.JobSummary, c.replays, c.runAt)
		}
	}
	if d := get(t, s, jobs[1].ID); len(d.History) != 1 || d.Attempts != 1 {
		t.Errorf("the replayed job's history = %+v, want its dead attempt kept", d.History)
	}
	if d := get(t, s, got[4]); d.EventID != bare.EventID || d.Target != "mail" || d.Source != "shop" || d.DeliveryID != "bare" {
		t.Errorf("added job = %+v", d.JobSummary)
	}
	st := stats(t, s, now())
	if p, d, dn := count(st, queue.StatusPending), count(st, queue.StatusDead), count(st, queue.StatusDone); p != 5 || d != 0 || dn != 0 {
		t.Errorf("stats after Requeue: %d pending, %d dead, %d done; want 5, 0, 0 (%+v)", p, d, dn, st.Counts)
	}
	// Due now: the resent job, the pending sms and the new mail job; the
	// two due later wait for their time.
	dueNow := claimAt(t, s, "w2", 10, now())
	if got := claimedDeliveries(dueNow); !slices.Equal(got, []string{"bare/mail", "d1/mail", "d1/sms"}) {
		t.Errorf("claimed now %v, want bare/mail, d1/mail, d1/sms", got)
	}
	for _, j := range dueNow {
		finish(t, s, done(j, now()))
	}
	if got := claimedDeliveries(claimAt(t, s, "w3", 10, later.Add(time.Second))); !slices.Equal(got, []string{"bare/chat", "d1/chat"}) {
		t.Errorf("claimed at the later time %v, want bare/chat, d1/chat", got)
	}
	if yes := true; len(listEvents(t, s, queue.EventListParams{EventFilter: queue.EventFilter{HasTarget: &yes}}).Events) != 2 {
		t.Error("the event with new jobs still counts as without a target")
	}

	t.Run("bad items", func(t *testing.T) {
		for _, it := range []queue.Requeue{{}, {JobID: 1, Target: "mail"}, {EventID: 1}, {JobID: 1, EventID: 1, Target: "mail"}} {
			if _, err := s.Requeue(t.Context(), []queue.Requeue{it}); err == nil {
				t.Errorf("Requeue(%+v) = nil error", it)
			}
		}
	})
}

// testRequeueMany requeues more items than one chunk holds: each is
// queued once.
func testRequeueMany(t *testing.T, s queue.Store) {
	const n = queue.RequeueChunk*2 + 10
	deadJobs(t, s, "shop", "mail", n)
	page := list(t, s, queue.ListParams{Filter: queue.Filter{Status: queue.StatusDead}, Limit: queue.MaxListLimit})
	items := make([]queue.Requeue, len(page.Jobs))
	for i, j := range page.Jobs {
		items[i] = queue.Requeue{JobID: j.ID}
	}
	got := requeue(t, s, items...)
	if slices.Contains(got, 0) {
		t.Errorf("Requeue left items unqueued: %v", got)
	}
	st := stats(t, s, now())
	if p, d := count(st, queue.StatusPending), count(st, queue.StatusDead); p != n || d != 0 {
		t.Errorf("after Requeue: %d pending, %d dead; want %d, 0", p, d, n)
	}
	// A second request finds them pending: nothing more is queued.
	if again := requeue(t, s, items...); slices.ContainsFunc(again, func(id int64) bool { return id != 0 }) {
		t.Errorf("Requeue of pending jobs queued %v", again)
	}
	if got, err := s.Requeue(t.Context(), nil); err != nil || len(got) != 0 {
		t.Errorf("Requeue of nothing = %v, %v", got, err)
	}
}

// testRequeueKeyed: a dead job that holds its ordering key goes back to
// the head of its chain when requeued; the job behind it still waits.
func testRequeueKeyed(t *testing.T, s queue.Store) {
	enqueue(t, s, keyed("k1", "K", true, "mail"))
	enqueue(t, s, keyed("k2", "K", true, "mail"))
	j := wantClaim(t, s, "a", "k1/mail")[0]
	finish(t, s, dead(j, "boom"))
	wantClaim(t, s, "a") // k2 waits behind the dead k1, which holds K
	if got := requeue(t, s, queue.Requeue{JobID: j.ID}); got[0] != j.ID {
		t.Fatalf("Requeue = %v", got)
	}
	again := wantClaim(t, s, "b", "k1/mail")[0]
	finish(t, s, done(again, now()))
	wantClaim(t, s, "c", "k2/mail")
}
