package queuetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

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
	for _, c := range st.Counts {
		switch {
		case c.Status != queue.StatusPending && c.OldestPending != 0:
			t.Errorf("%s/%s/%s: oldest pending age %v, want 0", c.Source, c.Target, c.Status, c.OldestPending)
		case c.Status == queue.StatusPending && (c.OldestPending < at.Sub(after) || c.OldestPending > at.Sub(before)):
			t.Errorf("%s/%s: oldest pending age %v, want between %v and %v", c.Source, c.Target, c.OldestPending, at.Sub(after), at.Sub(before))
		}
	}
	// Each route its own age: a job of a new route, due later, is younger.
	enqueue(t, s, event("late", "d1", "mail"))
	for _, c := range stats(t, s, at).Counts {
		if c.Source == "late" && c.OldestPending > at.Sub(after) {
			t.Errorf("late/mail: oldest pending age %v, want at most %v", c.OldestPending, at.Sub(after))
		}
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
