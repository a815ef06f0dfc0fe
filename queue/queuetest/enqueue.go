package queuetest

import (
	"slices"
	"testing"

	"github.com/caddywebhook/caddywebhook/queue"
)

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
