package postgres

import (
	"context"

	"github.com/caddywebhook/caddywebhook/queue"
)

// WriterStats reads the batcher's counters: its committed enqueue writes
// and the events they stored or found. The server's WAL is the server's to
// report (pg_current_wal_lsn), so WALPages stays 0. With MaxBatch 1
// there is no batcher and no count.
func (s *Store) WriterStats(context.Context) (queue.WriterStats, error) {
	if s.batcher == nil {
		return queue.WriterStats{}, nil
	}
	return queue.WriterStats{Commits: s.batcher.batches.Load(), Requests: s.batcher.events.Load()}, nil
}
