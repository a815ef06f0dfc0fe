package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/storekit"
)

// Reads run on the read-only pool, beside the writer. Each is one read
// transaction, so its parts agree with each other.

const (
	// The counts are kept by the writer and the schema's triggers, in the
	// transactions that change them (see schema.go), so Stats reads a few
	// rows however many jobs there are.
	sqlCounts = `SELECT source, target, status, jobs FROM job_counts
WHERE jobs <> 0 ORDER BY source, target, status`

	// The oldest due pending job of each route that has pending jobs: the
	// first due entry of the route's range of the pending index, one seek
	// per route.
	sqlOldestPending = `SELECT source, target, due FROM (
	SELECT c.source, c.target, (SELECT run_at FROM jobs INDEXED BY jobs_pending
		WHERE status = 'pending' AND source = c.source AND target = c.target AND run_at <= ?1
		ORDER BY run_at LIMIT 1) AS due
	FROM job_counts AS c WHERE c.status = 'pending' AND c.jobs > 0)
WHERE due IS NOT NULL`

	sqlEventCount = `SELECT coalesce((SELECT events FROM event_count WHERE id = 1), 0)`

	sqlList = `SELECT ` + jobCols + `
FROM jobs AS j JOIN events AS e ON e.id = j.event_id
WHERE (?1 = '' OR j.status = ?1) AND (?2 = '' OR j.source = ?2) AND (?3 = '' OR j.target = ?3)
	AND (?4 = 0 OR j.id < ?4)
ORDER BY j.id DESC LIMIT ?5`

	sqlGet = `SELECT ` + jobCols + `,
	e.headers, e.payload, e.sealed, coalesce(j.lease_owner, ''), coalesce(j.lease_until, 0)
FROM jobs AS j JOIN events AS e ON e.id = j.event_id
WHERE j.id = ?1`

	sqlHistory = `SELECT attempt, started_at, duration_ns, outcome, error, status FROM attempts
WHERE job_id = ?1 ORDER BY seq`
)

// readTx runs f in a read transaction on the read pool.
func (s *Store) readTx(ctx context.Context, f func(tx *sql.Tx) error) error {
	if s.isClosed() {
		return queue.ErrClosed
	}
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// Stats counts jobs by source, target and status, and measures how long
// the oldest due pending job has waited since it became due.
func (s *Store) Stats(ctx context.Context, now time.Time) (queue.Stats, error) {
	var st queue.Stats
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, sqlCounts)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c queue.Count
			if err := rows.Scan(&c.Source, &c.Target, &c.Status, &c.Jobs); err != nil {
				return err
			}
			st.Counts = append(st.Counts, c)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		oldest := make(map[queue.Route]time.Time)
		rows, err = tx.QueryContext(ctx, sqlOldestPending, ms(now))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r queue.Route
			var due int64
			if err := rows.Scan(&r.Source, &r.Target, &due); err != nil {
				return err
			}
			oldest[r] = fromMS(due)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		storekit.SetOldestPending(&st, oldest, now)
		if err := tx.QueryRowContext(ctx, sqlEventCount).Scan(&st.Events); err != nil {
			return err
		}
		c, err := sealCounts(ctx, tx)
		if err != nil {
			return err
		}
		storekit.SetSealStats(&st, s.sealer.Load(), c)
		return nil
	})
	if err != nil {
		return queue.Stats{}, fmt.Errorf("read stats: %w", err)
	}
	return st, nil
}

// ListJobs pages through jobs matching p, newest first.
func (s *Store) ListJobs(ctx context.Context, p queue.ListParams) (queue.JobPage, error) {
	limit, err := storekit.PageSize(p)
	if err != nil {
		return queue.JobPage{}, err
	}
	if storekit.Filtered(p) {
		return s.listJobsFiltered(ctx, p, limit)
	}
	// One row more than the page tells whether another page follows.
	return s.listJobs(ctx, limit, sqlList, string(p.Status), p.Source, p.Target, p.Cursor, limit+1)
}

// listJobs reads a page of at most limit jobs with query, which selects
// jobCols, newest first, and at most limit+1 rows.
func (s *Store) listJobs(ctx context.Context, limit int, query string, args ...any) (queue.JobPage, error) {
	var jobs []queue.JobSummary
	sl := s.sealer.Load()
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		jobs = make([]queue.JobSummary, 0, limit+1)
		for rows.Next() {
			var j queue.JobSummary
			if err := scanSummary(rows, &j); err != nil {
				return err
			}
			j.LastError = sl.DecodeText(j.LastError, storekit.ColumnLastError, j.ID)
			jobs = append(jobs, j)
		}
		return rows.Err()
	})
	if err != nil {
		return queue.JobPage{}, fmt.Errorf("list jobs: %w", err)
	}
	return storekit.TrimPage(jobs, limit), nil
}

// scanSummary scans the columns shared by sqlList and sqlGet, followed by
// extra destinations.
func scanSummary(sc interface{ Scan(...any) error }, j *queue.JobSummary, extra ...any) error {
	var runAt, created, finished int64
	dest := append([]any{&j.ID, &j.EventID, &j.Source, &j.DeliveryID, &j.EventType, &j.Target, &j.Status,
		&j.Attempts, &j.Replays, &runAt, &j.LastError, &created, &finished}, extra...)
	if err := sc.Scan(dest...); err != nil {
		return err
	}
	j.RunAt, j.CreatedAt, j.FinishedAt = fromMS(runAt), fromMS(created), fromMS(finished)
	return nil
}

// GetJob returns one job with its payload, headers and history.
func (s *Store) GetJob(ctx context.Context, id int64) (queue.JobDetail, error) {
	var d queue.JobDetail
	sl := s.sealer.Load()
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		var hdr, sealed []byte
		var leaseUntil int64
		err := scanSummary(tx.QueryRowContext(ctx, sqlGet, id), &d.JobSummary, &hdr, &d.Payload, &sealed, &d.LeaseOwner, &leaseUntil)
		if errors.Is(err, sql.ErrNoRows) {
			return queue.ErrNotFound
		}
		if err != nil {
			return err
		}
		d.LeaseUntil = fromMS(leaseUntil)
		d.LastError = sl.DecodeText(d.LastError, storekit.ColumnLastError, d.ID)
		d.Headers, d.Payload, d.ReadError = storekit.ReadStored(sl, d.Source, d.DeliveryID, hdr, d.Payload, sealed)
		rows, err := tx.QueryContext(ctx, sqlHistory, id)
		if err != nil {
			return err
		}
		defer rows.Close()
		d.History = []queue.Attempt{}
		for rows.Next() {
			var a queue.Attempt
			var started, dur int64
			var code sql.NullInt32
			if err := rows.Scan(&a.Attempt, &started, &dur, &a.Outcome, &a.Error, &code); err != nil {
				return err
			}
			a.Started, a.Duration = fromMS(started), time.Duration(dur)
			a.Error = sl.DecodeText(a.Error, storekit.ColumnAttemptError, id)
			if code.Valid {
				a.Code = queue.CodeOf(int(code.Int32))
			}
			d.History = append(d.History, a)
		}
		return rows.Err()
	})
	if err != nil {
		return queue.JobDetail{}, fmt.Errorf("get job %d: %w", id, err)
	}
	return d, nil
}
