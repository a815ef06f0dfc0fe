package queuetest

import (
	"slices"
	"testing"

	"github.com/caddywebhook/caddywebhook/queue"
)

// testReplayNumbering: attempts keep counting across replays, so the
// history numbers every delivery once and a handler can tell a resend from
// a first delivery; each replay starts a new budget.
func testReplayNumbering(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "mail"))
	j := claimOne(t, s, "w")
	finish(t, s, retry(j, now(), "transient"))
	j = claimOne(t, s, "w")
	finish(t, s, dead(j, "gave up"))
	steps := []struct {
		name                    string
		attempt, replays, based int
	}{
		{"first replay", 3, 1, 2},
		{"second replay", 4, 2, 3},
	}
	for _, st := range steps {
		if err := s.Replay(t.Context(), j.ID); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		j = claimOne(t, s, "w")
		if j.Attempt != st.attempt || j.Replays != st.replays || j.ReplayBase != st.based {
			t.Errorf("%s: claimed attempt %d replays %d base %d, want %d, %d, %d",
				st.name, j.Attempt, j.Replays, j.ReplayBase, st.attempt, st.replays, st.based)
		}
		finish(t, s, dead(j, st.name))
	}
	d := get(t, s, j.ID)
	var numbers []int
	for _, a := range d.History {
		numbers = append(numbers, a.Attempt)
	}
	if !slices.Equal(numbers, []int{1, 2, 3, 4}) || d.Attempts != 4 || d.Replays != 2 {
		t.Errorf("history numbered %v, %d attempts, %d replays; want 1 2 3 4, 4 attempts, 2 replays", numbers, d.Attempts, d.Replays)
	}
	if page := list(t, s, queue.ListParams{}); len(page.Jobs) != 1 || page.Jobs[0].Replays != 2 {
		t.Errorf("listing %+v, want the job with 2 replays", page.Jobs)
	}
}
