package queue_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/caddywebhook/caddywebhook/queue"
)

// TestPoolSkipsPaused: a paused route's jobs are not claimed, so not
// charged an attempt, while the other routes' are; after the resume the
// next claim takes them. Whole sources and single targets both pause.
func TestPoolSkipsPaused(t *testing.T) {
	tests := []struct {
		name           string
		source, target string // the pause
		claimed        []string
	}{
		{"one target", "src", "a", []string{"b"}},
		{"whole source", "src", "", nil},
		{"another source", "other", "", []string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := setup(t, nil)
			ctx := t.Context()
			var set atomic.Pointer[queue.Pauses]
			refresh := func() {
				ps, err := s.ListPauses(ctx)
				if err != nil {
					t.Fatalf("list pauses: %v", err)
				}
				set.Store(queue.NewPauses(ps))
			}
			handled := make(chan string, 4)
			p := newPool(t, queue.PoolConfig{
				Store:  s,
				Routes: []queue.Route{{Source: "src", Target: "a"}, {Source: "src", Target: "b"}},
				Paused: func(r queue.Route) bool { return set.Load().Paused(r) },
				Handler: queue.HandlerFunc(func(_ context.Context, job *queue.Job) error {
					handled <- job.Target
					return nil
				}),
			})
			if err := s.Pause(ctx, tt.source, tt.target); err != nil {
				t.Fatalf("pause: %v", err)
			}
			refresh()
			ids := map[string]int64{"a": enqueue(t, s, "d-a", "a"), "b": enqueue(t, s, "d-b", "b")}
			runOnce(t, p, len(tt.claimed))
			for range tt.claimed {
				<-handled
			}
			for target, id := range ids {
				j := getJob(t, s, id)
				skipped := j.Status == queue.StatusPending && j.Attempts == 0
				want := true
				for _, c := range tt.claimed {
					if c == target {
						want = false
					}
				}
				if skipped != want {
					t.Errorf("job of %s: %s with %d attempts; paused = %v", target, j.Status, j.Attempts, want)
				}
			}
			if err := s.Resume(ctx, tt.source, tt.target); err != nil {
				t.Fatalf("resume: %v", err)
			}
			refresh()
			runOnce(t, p, 2-len(tt.claimed))
		})
	}
}
