package queuetest

import (
	"errors"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

func testReady(t *testing.T, s queue.Store) {
	drain := func() {
		select {
		case <-s.Ready():
		default:
		}
	}
	signalled := func() bool {
		select {
		case <-s.Ready():
			return true
		default:
			return false
		}
	}
	drain()
	var claimed *queue.Job
	steps := []struct {
		name  string
		write func(t *testing.T)
		want  bool // a signal must be waiting when the write returns
	}{
		{"enqueue with a target", func(t *testing.T) { enqueue(t, s, event("shop", "d1", "mail")) }, true},
		{"enqueue without a target", func(t *testing.T) { enqueue(t, s, event("shop", "d2")) }, false},
		{"duplicate", func(t *testing.T) { enqueue(t, s, event("shop", "d1", "mail")) }, false},
		{"claim", func(t *testing.T) { claimed = claimOne(t, s, "w") }, false},
		{"hand-back", func(t *testing.T) {
			if err := s.HandBack(t.Context(), "w", []queue.Claimed{claimed.Claimed()}); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"retry not yet due", func(t *testing.T) { finish(t, s, retry(claimOne(t, s, "w"), now().Add(time.Hour), "x")) }, false},
		{"dead", func(t *testing.T) {
			enqueue(t, s, event("shop", "d3", "mail"))
			drain()
			finish(t, s, dead(claimOne(t, s, "w"), "x"))
		}, false},
		{"replay", func(t *testing.T) {
			if _, err := s.ReplayDead(t.Context(), queue.Filter{}); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"retry due now", func(t *testing.T) { finish(t, s, retry(claimOne(t, s, "w"), now(), "x")) }, true},
	}
	// Only the signals that must come are checked: a backend that also
	// hears its own notifications (Postgres LISTEN/NOTIFY) may add a late,
	// merged signal after any write, which is harmless.
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			drain()
			st.write(t)
			if got := signalled(); st.want && !got {
				t.Error("Ready not signalled")
			}
		})
	}
}

func testClose(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "mail"))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ctx := t.Context()
	calls := []struct {
		name string
		call func() error
	}{
		{"Enqueue", func() error { _, err := s.Enqueue(ctx, event("shop", "d2", "mail")); return err }},
		{"Claim", func() error {
			_, err := s.Claim(ctx, queue.ClaimParams{Owner: "w", Limit: 1, Lease: lease, Now: now()})
			return err
		}},
		{"Replay", func() error { return s.Replay(ctx, 1) }},
		{"Stats", func() error { _, err := s.Stats(ctx, now()); return err }},
		{"ListJobs", func() error { _, err := s.ListJobs(ctx, queue.ListParams{}); return err }},
		{"GetJob", func() error { _, err := s.GetJob(ctx, 1); return err }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			if err := c.call(); !errors.Is(err, queue.ErrClosed) {
				t.Errorf("%s after Close = %v, want ErrClosed", c.name, err)
			}
		})
	}
}
