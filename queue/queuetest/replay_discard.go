package queuetest

import (
	"errors"
	"testing"

	"github.com/caddywebhook/caddywebhook/queue"
)

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
	if d.Status != queue.StatusPending || d.Attempts != 1 || d.Replays != 1 || d.RunAt.After(now()) || !d.FinishedAt.IsZero() {
		t.Errorf("replayed job %+v, want pending, 1 attempt kept, 1 replay, due now", d.JobSummary)
	}
	// The attempts keep counting; the budget starts again from them.
	if j := claimOne(t, s, "w"); j.ID != jobs[0].ID || j.Attempt != 2 || j.Replays != 1 || j.ReplayBase != 1 {
		t.Errorf("claim after replay = job %d attempt %d replays %d base %d, want job %d attempt 2 replays 1 base 1",
			j.ID, j.Attempt, j.Replays, j.ReplayBase, jobs[0].ID)
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
		if j.Attempt != 2 || j.Replays != 1 || j.ReplayBase != 1 {
			t.Errorf("job %d replayed at attempt %d replays %d base %d, want attempt 2 replays 1 base 1", j.ID, j.Attempt, j.Replays, j.ReplayBase)
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
