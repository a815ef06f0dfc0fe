package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
)

// purgeRecorder is a HousekeeperObserver that forwards each pass.
type purgeRecorder struct {
	t      *testing.T
	passes chan int
}

func (r *purgeRecorder) Purged(jobs int, cutoff time.Time) { r.passes <- jobs }
func (r *purgeRecorder) StoreError(op string, err error) {
	r.t.Errorf("store error in %s: %v", op, err)
}

func newHousekeeper(t *testing.T, cfg queue.HousekeeperConfig) *queue.Housekeeper {
	t.Helper()
	h, err := queue.NewHousekeeper(cfg)
	if err != nil {
		t.Fatalf("new housekeeper: %v", err)
	}
	t.Cleanup(func() {
		if err := h.Stop(context.WithoutCancel(t.Context())); err != nil {
			t.Errorf("stop housekeeper: %v", err)
		}
	})
	return h
}

// TestHousekeeperPurgesOnlyOldDoneJobs: done jobs past the retention go, in
// one pass; recent done jobs, dead jobs and pending jobs of any age stay.
func TestHousekeeperPurgesOnlyOldDoneJobs(t *testing.T) {
	clk := newClock()
	s := setup(t, clk.Now)
	rec := newRecorder(t, 20)
	p := newPool(t, queue.PoolConfig{
		Store: s, Now: clk.Now, Observer: rec, Workers: 8,
		// Jobs for "waiting" are never claimed: they stay pending.
		Routes: []queue.Route{{Source: "src", Target: "t"}, {Source: "src", Target: "dead"}},
		Handler: queue.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
			if job.Target == "dead" {
				return queue.Permanent(errors.New("400"))
			}
			return nil
		}),
	})
	handle := func(n int) {
		t.Helper()
		runOnce(t, p, n)
		for range n {
			if f := rec.nextFinished(t); !f.recorded {
				t.Fatalf("job %d not recorded", f.job.ID)
			}
		}
	}

	var oldDone []int64
	for i := range 5 {
		oldDone = append(oldDone, enqueue(t, s, fmt.Sprint("old-", i), "t"))
	}
	oldDead := enqueue(t, s, "old-dead", "dead")
	oldPending := enqueue(t, s, "old-waiting", "waiting")
	handle(6)

	clk.Advance(8 * 24 * time.Hour)
	recent := []int64{enqueue(t, s, "new-0", "t"), enqueue(t, s, "new-1", "t")}
	handle(2)

	h := newHousekeeper(t, queue.HousekeeperConfig{Store: s, Now: clk.Now})
	n, err := h.RunOnce(t.Context())
	if err != nil || n != len(oldDone) {
		t.Fatalf("first pass: %d purged, %v; want %d", n, err, len(oldDone))
	}
	for _, id := range oldDone {
		if _, err := s.GetJob(t.Context(), id); !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("old done job %d: %v, want ErrNotFound", id, err)
		}
	}
	for _, id := range append([]int64{oldDead, oldPending}, recent...) {
		getJob(t, s, id)
	}
	if n, err := h.RunOnce(t.Context()); err != nil || n != 0 {
		t.Fatalf("second pass: %d purged, %v; want 0", n, err)
	}

	// A day short of the default retention, the recent jobs stay.
	clk.Advance(6 * 24 * time.Hour)
	h = newHousekeeper(t, queue.HousekeeperConfig{Store: s, Now: clk.Now})
	if n, err := h.RunOnce(t.Context()); err != nil || n != 0 {
		t.Fatalf("within retention: %d purged, %v; want 0", n, err)
	}
}

func TestHousekeeperStartStop(t *testing.T) {
	s := setup(t, nil)
	rec := &purgeRecorder{t: t, passes: make(chan int, 10)}
	h := newHousekeeper(t, queue.HousekeeperConfig{Store: s, Observer: rec})
	if err := h.Stop(t.Context()); err != nil {
		t.Fatalf("Stop before Start = %v, want nil", err)
	}
	if err := h.Start(t.Context()); err != nil {
		t.Fatalf("start: %v", err)
	}
	if err := h.Start(t.Context()); err == nil {
		t.Fatal("second Start = nil, want an error")
	}
	if n := testutil.Receive(t, rec.passes); n != 0 {
		t.Fatalf("first pass on an empty store purged %d", n)
	}
	for i := range 2 {
		if err := h.Stop(t.Context()); err != nil {
			t.Fatalf("Stop #%d = %v", i+1, err)
		}
	}
}

func TestNewHousekeeperValidates(t *testing.T) {
	s := setup(t, nil)
	tests := []struct {
		name  string
		cfg   queue.HousekeeperConfig
		field string
	}{
		{"defaults", queue.HousekeeperConfig{Store: s}, ""},
		{"no store", queue.HousekeeperConfig{}, "Store"},
		{"negative retention", queue.HousekeeperConfig{Store: s, Retention: -1}, "Retention"},
		{"negative interval", queue.HousekeeperConfig{Store: s, Interval: -1}, "Interval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := queue.NewHousekeeper(tt.cfg)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("NewHousekeeper = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("NewHousekeeper error = %v, want one naming %s", err, tt.field)
			}
		})
	}
}
