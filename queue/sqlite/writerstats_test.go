package sqlite

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

// TestWriterStats enqueues one event at a time, so each is its own commit,
// and checks the counters the load test divides.
func TestWriterStats(t *testing.T) {
	tests := []struct {
		name    string
		targets []string
		events  int
	}{
		{"events with a job", []string{"t"}, 5},
		{"events with two jobs", []string{"a", "b"}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := setup(t)
			before, err := s.WriterStats(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for i := range tt.events {
				if _, err := s.Enqueue(t.Context(), testEvent(fmt.Sprint(i), tt.targets...)); err != nil {
					t.Fatal(err)
				}
			}
			after, err := s.WriterStats(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			n := int64(tt.events)
			if d := after.Commits - before.Commits; d != n {
				t.Errorf("%d commits, want %d", d, n)
			}
			if d := after.Requests - before.Requests; d != n {
				t.Errorf("%d requests, want %d", d, n)
			}
			// Each commit writes at least the events table's page.
			if d := after.WALPages - before.WALPages; d < n {
				t.Errorf("%d WAL pages for %d commits, want at least one each", d, n)
			}
		})
	}
}

// TestWriterStatsWaitsForNoBatch: the counters are read while the writer
// is held busy, as a scrape under load reads them.
func TestWriterStatsWaitsForNoBatch(t *testing.T) {
	s := setup(t)
	if _, err := s.Enqueue(t.Context(), testEvent("1", "t")); err != nil {
		t.Fatal(err)
	}
	busy, release := make(chan struct{}), make(chan struct{})
	go s.onWriter(context.Background(), func(*writer) error {
		close(busy)
		<-release
		return nil
	})
	defer close(release)
	<-busy
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	st, err := s.WriterStats(ctx)
	if err != nil || st.Commits < 1 || st.Requests < 1 || st.WALPages < 1 {
		t.Errorf("WriterStats while the writer is busy = %+v, %v; want the commit before", st, err)
	}
}

// TestWriterStatsClosed checks that a closed store reports its closing.
func TestWriterStatsClosed(t *testing.T) {
	s := setup(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriterStats(t.Context()); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("WriterStats on a closed store: %v, want queue.ErrClosed", err)
	}
}
