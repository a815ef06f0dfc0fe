package queuetest

import (
	"strings"
	"testing"

	"github.com/caddywebhook/caddywebhook/queue"
)

// testTrace checks that an event's trace context comes back, byte for
// byte, on every claimed job of the event, through each way a store
// inserts an event (alone, keyed, concurrently batched), and that an
// event without one claims with none.
func testTrace(t *testing.T, s queue.Store) {
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	long := parent + "\n" + strings.Repeat("k=v,", 128)[:512]
	tests := []struct {
		name  string
		trace string
		key   string
	}{
		{"none", "", ""},
		{"traceparent", parent, ""},
		{"with tracestate", parent + "\nrojo=00f067aa0ba902b7,congo=t61rcWkgMzE", ""},
		{"longest", long[:queue.MaxTraceLen], ""},
		{"ordering key", parent, "k1"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := event("shop", "trace-"+string(rune('a'+i)), "mail", "chat")
			ev.Trace, ev.OrderingKey = tt.trace, tt.key
			enqueue(t, s, ev)
			jobs := claim(t, s, "w", 10)
			if len(jobs) != 2 {
				t.Fatalf("Claim = %d jobs, want 2", len(jobs))
			}
			for _, j := range jobs {
				if j.Trace != tt.trace {
					t.Errorf("job %d (%s): Trace = %q, want %q", j.ID, j.Target, j.Trace, tt.trace)
				}
				finish(t, s, done(j, now()))
			}
		})
	}
	t.Run("too long", func(t *testing.T) {
		ev := event("shop", "trace-long", "mail")
		ev.Trace = long + "x"
		if _, err := s.Enqueue(t.Context(), ev); err == nil {
			t.Fatalf("Enqueue with a %d-byte trace context succeeded, want an error", len(ev.Trace))
		}
	})
	t.Run("concurrent enqueues", func(t *testing.T) {
		const n = 16
		errs := make(chan error, n)
		for i := range n {
			go func() {
				ev := event("forge", "c"+strings.Repeat("x", i), "mail")
				if i%2 == 0 {
					ev.Trace = parent
				}
				_, err := s.Enqueue(t.Context(), ev)
				errs <- err
			}()
		}
		for range n {
			if err := <-errs; err != nil {
				t.Fatalf("Enqueue: %v", err)
			}
		}
		jobs := claim(t, s, "w", 2*n)
		if len(jobs) != n {
			t.Fatalf("Claim = %d jobs, want %d", len(jobs), n)
		}
		for _, j := range jobs {
			want := ""
			if (len(j.DeliveryID)-1)%2 == 0 {
				want = parent
			}
			if j.Trace != want {
				t.Errorf("job of %s: Trace = %q, want %q", j.DeliveryID, j.Trace, want)
			}
		}
	})
}
