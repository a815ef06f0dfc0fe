package queuetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/caddywebhook/caddywebhook/queue"
)

// deadJobs enqueues n events with one job each for source/target and
// finishes every job dead; the enqueues run concurrently, as a receiver's
// would, so a few hundred take a few commits.
func deadJobs(t *testing.T, s queue.Store, source, target string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if _, err := s.Enqueue(t.Context(), event(source, fmt.Sprint(target, "-", i), target)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	jobs, err := s.Claim(t.Context(), queue.ClaimParams{Owner: "w", Limit: n, Lease: lease, Now: now(),
		Routes: []queue.Route{{Source: source, Target: target}}})
	if err != nil || len(jobs) != n {
		t.Fatalf("Claim = %d jobs, %v; want %d", len(jobs), err, n)
	}
	cs := make([]queue.Completion, len(jobs))
	for i, j := range jobs {
		cs[i] = dead(j, "boom")
	}
	finish(t, s, cs...)
}

// testReplayManyDead replays more dead jobs than one chunk of a bulk
// replay holds: every one is replayed, and counted once.
func testReplayManyDead(t *testing.T, s queue.Store) {
	const n = 600 // more than two chunks of 256
	deadJobs(t, s, "shop", "mail", n)
	deadJobs(t, s, "shop", "chat", 3)
	got, err := s.ReplayDead(t.Context(), queue.Filter{Source: "shop", Target: "mail"})
	if err != nil || got != n {
		t.Fatalf("ReplayDead = %d, %v; want %d", got, err, n)
	}
	st := stats(t, s, now())
	if p, d := count(st, queue.StatusPending), count(st, queue.StatusDead); p != n || d != 3 {
		t.Errorf("after replay: %d pending, %d dead; want %d, 3", p, d, n)
	}
}

// testDiscardJobs deletes jobs by filter: only those of the status and
// route asked for, with their events once no job is left, never a running
// job.
func testDiscardJobs(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "both", "mail", "gone"))
	enqueue(t, s, event("shop", "orphan", "gone"))
	enqueue(t, s, event("forge", "other", "gone"))
	enqueue(t, s, event("shop", "running", "gone"))
	if j := claimWith(t, s, queue.Route{Source: "shop", Target: "mail"}); len(j) != 1 {
		t.Fatalf("claim shop/mail = %d jobs", len(j))
	} else {
		finish(t, s, dead(j[0], "boom"))
	}
	running := claimWith(t, s, queue.Route{Source: "shop", Target: "gone"})[0] // the oldest: "both"
	tests := []struct {
		name   string
		filter queue.Filter
		want   int
		gone   []string // deliveries whose event is deleted
	}{
		{"status is required", queue.Filter{Source: "shop"}, -1, nil},
		{"running is refused", queue.Filter{Status: queue.StatusRunning, Source: "shop"}, -1, nil},
		{"no match", queue.Filter{Status: queue.StatusPending, Source: "shop", Target: "sms"}, 0, nil},
		{"pending of one route", queue.Filter{Status: queue.StatusPending, Source: "shop", Target: "gone"}, 2, []string{"orphan", "running"}},
		{"dead by target", queue.Filter{Status: queue.StatusDead, Target: "mail"}, 1, nil},
		{"pending of any source", queue.Filter{Status: queue.StatusPending, Target: "gone"}, 1, []string{"other"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := s.DiscardJobs(t.Context(), tt.filter)
			if tt.want < 0 {
				if err == nil {
					t.Fatalf("DiscardJobs(%+v) = %d, nil; want an error", tt.filter, n)
				}
				return
			}
			if err != nil || n != tt.want {
				t.Fatalf("DiscardJobs(%+v) = %d, %v; want %d", tt.filter, n, err, tt.want)
			}
			for _, id := range tt.gone {
				if res := enqueue(t, s, event(eventSource(id), id)); res.Duplicate {
					t.Errorf("event %s is still stored", id)
				}
			}
		})
	}
	if d := get(t, s, running.ID); d.Status != queue.StatusRunning {
		t.Errorf("running job is %s after the discards", d.Status)
	}
	// "both" keeps its running job, so its event stays.
	if res := enqueue(t, s, event("shop", "both")); !res.Duplicate {
		t.Errorf("event of a running job was deleted")
	}
}

// eventSource is the source testDiscardJobs enqueued delivery id under.
func eventSource(id string) string {
	if id == "other" {
		return "forge"
	}
	return "shop"
}

func claimWith(t *testing.T, s queue.Store, r queue.Route) []*queue.Job {
	t.Helper()
	jobs, err := s.Claim(t.Context(), queue.ClaimParams{Owner: "w", Limit: 1, Lease: lease, Now: now(), Routes: []queue.Route{r}})
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}
