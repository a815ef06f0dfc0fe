package queuetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

// tick waits until the wall clock has passed t by a millisecond, the
// stores' precision, and returns the new time: events stored after it are
// stamped later than t. It waits on the clock, not on a state.
func tick(t time.Time) time.Time {
	for {
		if n := now(); n.After(t) {
			return n
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func listEvents(t *testing.T, s queue.Store, p queue.EventListParams) queue.EventPage {
	t.Helper()
	page, err := s.ListEvents(t.Context(), p)
	if err != nil {
		t.Fatalf("ListEvents(%+v): %v", p, err)
	}
	return page
}

func eventIDs(page queue.EventPage) []string {
	out := make([]string, len(page.Events))
	for i, e := range page.Events {
		out[i] = e.Source + "/" + e.DeliveryID
	}
	return out
}

func testListEvents(t *testing.T, s queue.Store) {
	yes, no := true, false
	t0 := now()
	enqueue(t, s, event("shop", "d1", "mail", "chat"))
	ping := event("shop", "ping") // no target wants it
	ping.EventType = "ping"
	enqueue(t, s, ping)
	mid := tick(now())
	enqueue(t, s, event("forge", "d1", "mail"))
	enqueue(t, s, event("shop", "d2", "mail"))
	end := tick(now())

	all := listEvents(t, s, queue.EventListParams{})
	if got, want := eventIDs(all), []string{"shop/d2", "forge/d1", "shop/ping", "shop/d1"}; !slices.Equal(got, want) || all.NextCursor != 0 {
		t.Fatalf("all events = %v cursor %d, want %v, newest first, no cursor", got, all.NextCursor, want)
	}
	first := all.Events[3]
	if len(first.Jobs) != 2 || first.Jobs[0].Target != "mail" || first.Jobs[1].Target != "chat" ||
		first.Jobs[0].Status != queue.StatusPending || first.Jobs[0].ID >= first.Jobs[1].ID {
		t.Errorf("jobs of shop/d1 = %+v, want mail then chat, pending", first.Jobs)
	}
	if all.Events[2].Jobs == nil || len(all.Events[2].Jobs) != 0 {
		t.Errorf("jobs of shop/ping = %#v, want an empty list", all.Events[2].Jobs)
	}
	if first.CreatedAt.Before(t0) || first.CreatedAt.After(mid) {
		t.Errorf("created_at %v not in [%v, %v]", first.CreatedAt, t0, mid)
	}

	tests := []struct {
		name string
		f    queue.EventFilter
		want []string
	}{
		{"source", queue.EventFilter{Source: "forge"}, []string{"forge/d1"}},
		{"event type", queue.EventFilter{EventType: "ping"}, []string{"shop/ping"}},
		{"without target", queue.EventFilter{HasTarget: &no}, []string{"shop/ping"}},
		{"with target", queue.EventFilter{HasTarget: &yes, Source: "shop"}, []string{"shop/d2", "shop/d1"}},
		{"delivery id", queue.EventFilter{Source: "shop", DeliveryID: "d1"}, []string{"shop/d1"}},
		{"delivery id of another source", queue.EventFilter{Source: "forge", DeliveryID: "ping"}, []string{}},
		{"delivery id and type", queue.EventFilter{Source: "shop", DeliveryID: "d1", EventType: "ping"}, []string{}},
		{"since", queue.EventFilter{Since: mid}, []string{"shop/d2", "forge/d1"}},
		{"until", queue.EventFilter{Until: mid}, []string{"shop/ping", "shop/d1"}},
		{"since and until", queue.EventFilter{Since: t0, Until: mid, Source: "shop"}, []string{"shop/ping", "shop/d1"}},
		{"after everything", queue.EventFilter{Since: end}, []string{}},
		{"delivery id since", queue.EventFilter{Source: "shop", DeliveryID: "d1", Since: mid}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page := listEvents(t, s, queue.EventListParams{EventFilter: tt.f})
			if got := eventIDs(page); !slices.Equal(got, tt.want) {
				t.Errorf("events = %v, want %v", got, tt.want)
			}
		})
	}

	t.Run("bad filters", func(t *testing.T) {
		for _, f := range []queue.EventFilter{
			{DeliveryID: "d1"},       // no source
			{Since: mid, Until: t0},  // empty range
			{Since: mid, Until: mid}, // empty range
		} {
			if _, err := s.ListEvents(t.Context(), queue.EventListParams{EventFilter: f}); err == nil {
				t.Errorf("ListEvents(%+v) = nil error", f)
			}
		}
	})

	t.Run("paging", func(t *testing.T) {
		var got []string
		var p queue.EventListParams
		p.Limit = 1
		for pages := 0; ; pages++ {
			if pages > 4 {
				t.Fatalf("more than 4 pages of 1: %v", got)
			}
			page := listEvents(t, s, p)
			got = append(got, eventIDs(page)...)
			if page.NextCursor == 0 {
				break
			}
			p.Cursor = page.NextCursor
		}
		if want := eventIDs(all); !slices.Equal(got, want) {
			t.Errorf("paged = %v, want %v", got, want)
		}
	})
}

func testGetEvent(t *testing.T, s queue.Store) {
	res := enqueue(t, s, event("shop", "d1", "mail"))
	j := claimOne(t, s, "w")
	finish(t, s, done(j, now()))
	ev := event("shop", "d1")
	for _, tt := range []struct {
		name string
		get  func() (queue.EventDetail, error)
	}{
		{"by id", func() (queue.EventDetail, error) { return s.GetEvent(t.Context(), res.EventID) }},
		{"by delivery id", func() (queue.EventDetail, error) { return s.FindEvent(t.Context(), "shop", "d1") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, err := tt.get()
			if err != nil {
				t.Fatal(err)
			}
			if d.ID != res.EventID || d.Source != "shop" || d.DeliveryID != "d1" || d.EventType != ev.EventType ||
				string(d.Payload) != string(ev.Payload) || fmt.Sprint(d.Headers) != fmt.Sprint(ev.Headers) {
				t.Errorf("event = %+v, want %+v", d, ev)
			}
			if len(d.Jobs) != 1 || d.Jobs[0].ID != j.ID || d.Jobs[0].Status != queue.StatusDone || d.Jobs[0].Attempts != 1 {
				t.Errorf("jobs = %+v, want job %d done after 1 attempt", d.Jobs, j.ID)
			}
		})
	}
	for _, tt := range []struct {
		name string
		get  func() (queue.EventDetail, error)
	}{
		{"unknown id", func() (queue.EventDetail, error) { return s.GetEvent(t.Context(), res.EventID+100) }},
		{"unknown delivery id", func() (queue.EventDetail, error) { return s.FindEvent(t.Context(), "shop", "d2") }},
		{"delivery id of another source", func() (queue.EventDetail, error) { return s.FindEvent(t.Context(), "forge", "d1") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.get(); !errors.Is(err, queue.ErrEventNotFound) {
				t.Errorf("err = %v, want ErrEventNotFound", err)
			}
		})
	}
}

func testListJobsFilters(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "mail", "chat"))
	mid := tick(now())
	ping := event("shop", "d2", "mail")
	ping.EventType = "ping"
	enqueue(t, s, ping)
	enqueue(t, s, event("forge", "d1", "mail"))

	key := func(page queue.JobPage) []string {
		out := make([]string, len(page.Jobs))
		for i, j := range page.Jobs {
			out[i] = j.Source + "/" + j.DeliveryID + "/" + j.Target
		}
		return out
	}
	tests := []struct {
		name string
		p    queue.ListParams
		want []string
	}{
		{"event type", queue.ListParams{EventType: "ping"}, []string{"shop/d2/mail"}},
		{"delivery id", queue.ListParams{Filter: queue.Filter{Source: "shop"}, DeliveryID: "d1"}, []string{"shop/d1/chat", "shop/d1/mail"}},
		{"delivery id and target", queue.ListParams{Filter: queue.Filter{Source: "shop", Target: "chat"}, DeliveryID: "d1"}, []string{"shop/d1/chat"}},
		{"since", queue.ListParams{Since: mid}, []string{"forge/d1/mail", "shop/d2/mail"}},
		{"since and source", queue.ListParams{Since: mid, Filter: queue.Filter{Source: "forge"}}, []string{"forge/d1/mail"}},
		{"until", queue.ListParams{Until: mid}, []string{"shop/d1/chat", "shop/d1/mail"}},
		{"until and type", queue.ListParams{Until: mid, EventType: "ping"}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := key(list(t, s, tt.p)); !slices.Equal(got, tt.want) {
				t.Errorf("jobs = %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("paging with a filter", func(t *testing.T) {
		p := queue.ListParams{Limit: 1, Filter: queue.Filter{Source: "shop"}, DeliveryID: "d1"}
		page := list(t, s, p)
		if got := key(page); !slices.Equal(got, []string{"shop/d1/chat"}) || page.NextCursor == 0 {
			t.Fatalf("first page = %v cursor %d", got, page.NextCursor)
		}
		p.Cursor = page.NextCursor
		if page = list(t, s, p); !slices.Equal(key(page), []string{"shop/d1/mail"}) || page.NextCursor != 0 {
			t.Errorf("second page = %v cursor %d", key(page), page.NextCursor)
		}
	})
	t.Run("delivery id needs source", func(t *testing.T) {
		if _, err := s.ListJobs(t.Context(), queue.ListParams{DeliveryID: "d1"}); err == nil {
			t.Error("ListJobs with a delivery id and no source = nil error")
		}
	})
}

func testResend(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "mail", "chat", "sms"))
	jobs := claim(t, s, "w", 2) // mail, chat running; sms pending
	finish(t, s, done(jobs[0], now()), dead(jobs[1], "boom"))
	pending := list(t, s, queue.ListParams{Filter: queue.Filter{Status: queue.StatusPending}}).Jobs[0]

	tests := []struct {
		name string
		id   int64
		want error
	}{
		{"unknown job", 1 << 40, queue.ErrNotFound},
		{"pending job", pending.ID, queue.ErrNotFinished},
		{"done job", jobs[0].ID, nil},
		{"dead job", jobs[1].ID, nil},
		{"resent job is pending", jobs[0].ID, queue.ErrNotFinished},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.Resend(t.Context(), tt.id); !errors.Is(err, tt.want) {
				t.Errorf("Resend(%d) = %v, want %v", tt.id, err, tt.want)
			}
		})
	}
	for _, j := range jobs {
		d := get(t, s, j.ID)
		if d.Status != queue.StatusPending || d.RunAt.After(now()) || !d.FinishedAt.IsZero() {
			t.Errorf("resent job %+v, want pending, due now", d.JobSummary)
		}
		if len(d.History) != 1 {
			t.Errorf("history of resent job %d = %+v, want the earlier attempt kept", j.ID, d.History)
		}
	}
	got := claim(t, s, "w", 3)
	if len(got) != 3 {
		t.Fatalf("claim after resend = %d jobs, want 3", len(got))
	}
	running := got[0]
	if err := s.Resend(t.Context(), running.ID); !errors.Is(err, queue.ErrNotFinished) {
		t.Errorf("Resend(running) = %v, want ErrNotFinished", err)
	}
	finish(t, s, done(running, now()))
	if d := get(t, s, running.ID); len(d.History) < 1 || d.History[len(d.History)-1].Outcome != queue.StatusDone {
		t.Errorf("history after the resent delivery = %+v", d.History)
	}
}

func testAddJob(t *testing.T, s queue.Store) {
	res := enqueue(t, s, event("shop", "bare")) // no target wanted it
	if _, err := s.AddJob(t.Context(), res.EventID+100, "mail"); !errors.Is(err, queue.ErrEventNotFound) {
		t.Errorf("AddJob(unknown event) = %v, want ErrEventNotFound", err)
	}
	id, err := s.AddJob(t.Context(), res.EventID, "mail")
	if err != nil {
		t.Fatal(err)
	}
	d := get(t, s, id)
	if d.EventID != res.EventID || d.Source != "shop" || d.Target != "mail" || d.Status != queue.StatusPending || d.DeliveryID != "bare" {
		t.Errorf("added job = %+v", d.JobSummary)
	}
	yes := true
	if page := listEvents(t, s, queue.EventListParams{EventFilter: queue.EventFilter{HasTarget: &yes}}); len(page.Events) != 1 || len(page.Events[0].Jobs) != 1 {
		t.Errorf("events with a target = %+v, want the event with its added job", page.Events)
	}
	// The event is no longer bare: purging bare events leaves it.
	if _, err := s.Purge(t.Context(), now().Add(time.Hour), 100); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetEvent(t.Context(), res.EventID); err != nil {
		t.Errorf("event purged while a job refers to it: %v", err)
	}
	j := claimOne(t, s, "w")
	if j.ID != id || string(j.Payload) != string(event("shop", "bare").Payload) {
		t.Errorf("claimed job %d payload %q, want the added job with the event's payload", j.ID, j.Payload)
	}
	// A second job for the same target is a further delivery, not refused.
	if _, err := s.AddJob(t.Context(), res.EventID, "mail"); err != nil {
		t.Errorf("second AddJob for the same target: %v", err)
	}
	// The added jobs are counted like enqueued ones: one running, one
	// pending.
	st, err := s.Stats(t.Context(), now())
	if err != nil {
		t.Fatal(err)
	}
	if p, r := count(st, queue.StatusPending), count(st, queue.StatusRunning); p != 1 || r != 1 {
		t.Errorf("stats after two added jobs, one claimed: %d pending, %d running, want 1 and 1 (%+v)", p, r, st.Counts)
	}
}
