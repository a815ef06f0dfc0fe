package queuetest

import (
	"slices"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

// testStaleClaimSameOwner: a pool paused longer than its lease claims its
// own running job again. The owner is the same, so only the fence token
// tells the stale claim from the current one: the stale claim can neither
// extend, nor finish, nor hand back the job the current claim runs.
func testStaleClaimSameOwner(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "mail"))
	at := now()
	stale := claimAt(t, s, "a", 1, at)[0]
	again := claimAt(t, s, "a", 1, at.Add(lease+time.Second))
	if len(again) != 1 || again[0].ID != stale.ID || again[0].Attempt != 2 {
		t.Fatalf("claim by the same owner after expiry = %+v, want job %d attempt 2", again, stale.ID)
	}
	fresh := again[0]
	if fresh.Fence <= stale.Fence {
		t.Fatalf("fence tokens %d then %d, want them to grow with each claim", stale.Fence, fresh.Fence)
	}
	untouched := func(t *testing.T, what string) {
		t.Helper()
		d := get(t, s, stale.ID)
		if d.Status != queue.StatusRunning || d.LeaseOwner != "a" || d.LastError != "" || !onlyLeaseLost(d.History) || d.Attempts != 2 ||
			!d.LeaseUntil.Equal(fresh.LeaseUntil) {
			t.Errorf("after stale %s: %+v, want untouched (running under a until %s, no history but the stale claim's lease_lost)", what, d, fresh.LeaseUntil)
		}
	}
	tests := []struct {
		name string
		c    queue.Completion
	}{
		{"done", done(stale, now())},
		{"retry", retry(stale, now(), "boom")},
		{"dead", dead(stale, "boom")},
	}
	for _, tt := range tests {
		t.Run("finish "+tt.name, func(t *testing.T) {
			if finish(t, s, tt.c)[0] {
				t.Fatal("the stale claim's Finish was recorded")
			}
			untouched(t, "Finish")
		})
	}
	t.Run("extend", func(t *testing.T) {
		if lost := extend(t, s, "a", claims(stale), at, time.Hour); !slices.Equal(lost, []int64{stale.ID}) {
			t.Errorf("stale ExtendLeases lost %v, want the job", lost)
		}
		untouched(t, "ExtendLeases")
	})
	t.Run("hand back", func(t *testing.T) {
		if err := s.HandBack(t.Context(), "a", claims(stale)); err != nil {
			t.Fatal(err)
		}
		untouched(t, "HandBack")
	})
	if lost := extend(t, s, "a", claims(fresh), at, time.Hour); len(lost) != 0 {
		t.Errorf("the current claim's ExtendLeases lost %v", lost)
	}
	if !finish(t, s, done(fresh, now()))[0] {
		t.Fatal("the current claim's Finish was not recorded")
	}
	if d := get(t, s, fresh.ID); len(d.History) != 2 || newest(d.History).Attempt != 2 || newest(d.History).Outcome != queue.StatusDone {
		t.Errorf("history %+v, want the stale claim's lease_lost and attempt 2 done: the result of the claim that recorded it", d.History)
	}
}

// testHandBackEndsClaim: a hand-back uncharges the attempt, so the next
// claim has the attempt number of the one handed back; its fence token is
// still new, and the claim handed back stays stale.
func testHandBackEndsClaim(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "mail"))
	first := claimOne(t, s, "a")
	if err := s.HandBack(t.Context(), "a", claims(first)); err != nil {
		t.Fatal(err)
	}
	second := claimOne(t, s, "a")
	if second.Attempt != first.Attempt || second.Fence == first.Fence {
		t.Fatalf("claims after a hand-back: attempt %d fence %d, then attempt %d fence %d; want the same attempt, a new fence",
			first.Attempt, first.Fence, second.Attempt, second.Fence)
	}
	if finish(t, s, done(first, now()))[0] {
		t.Error("the handed-back claim's Finish was recorded")
	}
	if lost := extend(t, s, "a", claims(first), now(), time.Hour); !slices.Equal(lost, []int64{first.ID}) {
		t.Errorf("the handed-back claim's ExtendLeases lost %v, want the job", lost)
	}
	if err := s.HandBack(t.Context(), "a", claims(first)); err != nil {
		t.Fatal(err)
	}
	if d := get(t, s, first.ID); d.Status != queue.StatusRunning || d.LeaseOwner != "a" {
		t.Errorf("the handed-back claim's HandBack changed the job: %+v", d)
	}
	if !finish(t, s, done(second, now()))[0] {
		t.Error("the current claim's Finish was not recorded")
	}
}
