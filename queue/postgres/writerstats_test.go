package postgres

import (
	"fmt"
	"testing"

	"github.com/caddywebhook/caddywebhook/queue"
)

// TestWriterStats enqueues one event at a time, each then written alone,
// and checks the counters the load test divides.
func TestWriterStats(t *testing.T) {
	tests := []struct {
		name   string
		events int
	}{
		{"one event", 1},
		{"three events in turn", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := setup(t)
			for i := range tt.events {
				ev := queue.Event{Source: "shop", DeliveryID: fmt.Sprint(i), Payload: []byte("{}"), Targets: []string{"a"}}
				if _, err := s.Enqueue(t.Context(), ev); err != nil {
					t.Fatal(err)
				}
			}
			st, err := s.WriterStats(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			n := int64(tt.events)
			if st.Commits != n || st.Requests != n || st.WALPages != 0 {
				t.Errorf("stats %+v, want %d commits and requests, no WAL pages", st, n)
			}
		})
	}
}
