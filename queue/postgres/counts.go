package postgres

import (
	"context"
	"sync"
	"time"
)

// Counts in constant time.
//
// Stats must not count the jobs table: at a million jobs that took 0.5 to
// 0.8 s a scrape. The schema's statement-level triggers append, for each
// statement that changes jobs or events, one delta row per (source,
// target, status) it changed (see migration 2), so the counts are exact
// and change in the same transactions as the rows. Appending, not
// updating one row per group, keeps instances that enqueue at once from
// queueing on a shared counter row. A reader sums the rows; foldCounts
// replaces them by their sums every foldEvery, so a reader sums a few
// hundred rows at most.

// foldEvery is the time between two folds. Under a full ingest load the
// statements add a few hundred delta rows a second.
const foldEvery = 2 * time.Second

// sqlFoldJobCounts and sqlFoldEventCounts replace the delta rows by their
// sums, in one statement each. An instance that finds another folding
// (the advisory lock, keyed by the schema) skips its turn. Rows committed
// after the statement's snapshot stay for the next fold; a row is deleted
// by one fold only, and its value is inserted again by the statement that
// deleted it, so the sums never change.
const (
	sqlFoldJobCounts = `WITH lock AS (
	SELECT pg_try_advisory_xact_lock(hashtextextended('caddywebhook counts ' || current_schema(), 0)) AS ok
), d AS (
	DELETE FROM job_counts WHERE (SELECT ok FROM lock)
	RETURNING source, target, status, jobs
)
INSERT INTO job_counts (source, target, status, jobs)
SELECT source, target, status, sum(jobs) FROM d
GROUP BY source, target, status HAVING sum(jobs) <> 0`

	sqlFoldEventCounts = `WITH lock AS (
	SELECT pg_try_advisory_xact_lock(hashtextextended('caddywebhook event counts ' || current_schema(), 0)) AS ok
), d AS (
	DELETE FROM event_counts WHERE (SELECT ok FROM lock)
	RETURNING events
)
INSERT INTO event_counts (events) SELECT sum(events) FROM d HAVING sum(events) <> 0`

	sqlFoldSealCounts = `WITH lock AS (
	SELECT pg_try_advisory_xact_lock(hashtextextended('caddywebhook seal counts ' || current_schema(), 0)) AS ok
), d AS (
	DELETE FROM seal_counts WHERE (SELECT ok FROM lock)
	RETURNING key_id, kind, n
)
INSERT INTO seal_counts (key_id, kind, n)
SELECT key_id, kind, sum(n) FROM d GROUP BY key_id, kind HAVING sum(n) <> 0`
)

// foldCounts replaces the counts' delta rows by their sums.
func (s *Store) foldCounts(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, sqlFoldJobCounts); err != nil {
		return s.fail("fold job counts", err)
	}
	if _, err := s.pool.Exec(ctx, sqlFoldEventCounts); err != nil {
		return s.fail("fold event counts", err)
	}
	if _, err := s.pool.Exec(ctx, sqlFoldSealCounts); err != nil {
		return s.fail("fold seal counts", err)
	}
	return nil
}

// folder runs foldCounts, sweepHeads and analyzeGrown every foldEvery
// until stop.
type folder struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startFolder(s *Store) *folder {
	ctx, cancel := context.WithCancel(context.Background())
	f := &folder{cancel: cancel}
	f.wg.Go(func() {
		t := time.NewTicker(foldEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				// A failed fold loses nothing: the delta rows stay
				// and the next fold takes them. The same goes for the
				// sweep of stranded ordering keys and the analysis of
				// tables that filled: the next round does them.
				rctx, cancel := s.bound(ctx)
				_ = s.foldCounts(rctx)
				_, _ = s.sweepHeads(rctx)
				_ = s.analyzeGrown(rctx)
				cancel()
			}
		}
	})
	return f
}

// stop ends the loop and waits for a fold in progress.
func (f *folder) stop() {
	f.cancel()
	f.wg.Wait()
}
