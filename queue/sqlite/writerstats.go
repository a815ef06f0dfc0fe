package sqlite

import (
	"context"
	"sync/atomic"

	msqlite "modernc.org/sqlite"

	"github.com/caddywebhook/caddywebhook/queue"
)

// writerCounts are the writer's counters as it publishes them after each
// commit, so that a reader (a /metrics scrape, the load test's cost table)
// waits for no batch: through the writer, a scrape under load waited a
// batch or two, 5 to 10 ms more at a million jobs. Publishing costs a
// commit three atomic stores and one read of the connection's status.
type writerCounts struct {
	commits, requests, walPages atomic.Int64
}

// publish stores w's counters; only the writer calls it.
func (c *writerCounts) publish(w *writer) {
	c.commits.Store(w.batches)
	c.requests.Store(w.requests)
	c.walPages.Store(w.walPages)
}

// walPages reads the pages the driver connection dc has written to the WAL
// since it opened (SQLITE_DBSTATUS_CACHE_WRITE), one frame each.
func walPages(dc any) (int64, bool) {
	ds, ok := dc.(msqlite.DBStatus)
	if !ok {
		return 0, false
	}
	pages, _, err := ds.Status(msqlite.DBStatusCacheWrite, false)
	return int64(pages), err == nil
}

// WriterStats returns the writer's counters as of its last commit.
func (s *Store) WriterStats(context.Context) (queue.WriterStats, error) {
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return queue.WriterStats{}, queue.ErrClosed
	}
	return queue.WriterStats{
		Commits:  s.written.commits.Load(),
		Requests: s.written.requests.Load(),
		WALPages: s.written.walPages.Load(),
	}, nil
}
