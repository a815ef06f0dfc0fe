package sqlite

import (
	"context"
	"fmt"

	msqlite "modernc.org/sqlite"

	"github.com/caddywebhook/caddywebhook/queue"
)

// WriterStats reads the writer's counters on the writer goroutine, between
// two batches, so the write path keeps its plain counters and pays nothing
// until a benchmark asks.
func (s *Store) WriterStats(ctx context.Context) (queue.WriterStats, error) {
	var st queue.WriterStats
	err := s.onWriter(ctx, func(w *writer) error {
		st.Commits, st.Requests = w.batches, w.requests
		return w.conn.Raw(func(dc any) error {
			ds, ok := dc.(msqlite.DBStatus)
			if !ok {
				return fmt.Errorf("driver connection %T reports no status", dc)
			}
			pages, _, err := ds.Status(msqlite.DBStatusCacheWrite, false)
			st.WALPages = int64(pages)
			return err
		})
	})
	if err != nil {
		return queue.WriterStats{}, fmt.Errorf("read writer stats: %w", err)
	}
	return st, nil
}
