package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/storekit"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Reads run in one read-only REPEATABLE READ transaction each, so their
// parts agree with each other; they take no row locks and never wait for
// the writers.

const (
	// The counts are delta rows the schema's triggers append in the
	// transactions that change the jobs, folded every few seconds (see
	// counts.go), so Stats sums a few hundred rows however many jobs
	// there are.
	sqlCounts = `SELECT source, target, status, sum(jobs)::bigint FROM job_counts
GROUP BY source, target, status HAVING sum(jobs) <> 0 ORDER BY source, target, status`

	// The oldest due pending job of each route that has pending jobs: the
	// first due entry of the route's range of the pending index, one seek
	// per route.
	sqlOldestPending = `SELECT source, target, due FROM (
	SELECT c.source, c.target, (SELECT run_at FROM jobs
		WHERE status = 'pending' AND source = c.source AND target = c.target AND run_at <= $1
		ORDER BY run_at, id LIMIT 1) AS due
	FROM (SELECT source, target FROM job_counts WHERE status = 'pending'
		GROUP BY source, target HAVING sum(jobs) > 0) AS c) AS r
WHERE due IS NOT NULL`

	sqlEventCount = `SELECT coalesce(sum(events), 0)::bigint FROM event_counts`

	sqlList = `SELECT ` + jobCols + `
FROM jobs AS j JOIN events AS e ON e.id = j.event_id
WHERE ($1 = '' OR j.status = $1) AND ($2 = '' OR j.source = $2) AND ($3 = '' OR j.target = $3)
	AND ($4 = 0 OR j.id < $4)
ORDER BY j.id DESC LIMIT $5`

	sqlGet = `SELECT ` + jobCols + `,
	e.headers, e.payload, e.sealed, coalesce(j.lease_owner, ''), j.lease_until
FROM jobs AS j JOIN events AS e ON e.id = j.event_id
WHERE j.id = $1`

	sqlHistory = `SELECT attempt, started_at, duration_ns, outcome, error, status FROM attempts
WHERE job_id = $1 ORDER BY id`
)

// readTx runs f in a read-only transaction.
func (s *Store) readTx(ctx context.Context, f func(tx pgx.Tx) error) error {
	if s.isClosed() {
		return queue.ErrClosed
	}
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, f)
}

// Stats counts jobs by source, target and status, and measures how long
// the oldest due pending job has waited since it became due.
func (s *Store) Stats(ctx context.Context, now time.Time) (queue.Stats, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var st queue.Stats
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, sqlCounts)
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
		rows, err = tx.Query(ctx, sqlOldestPending, ms(now))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r queue.Route
			var due time.Time
			if err := rows.Scan(&r.Source, &r.Target, &due); err != nil {
				return err
			}
			oldest[r] = due
		}
		if err := rows.Err(); err != nil {
			return err
		}
		storekit.SetOldestPending(&st, oldest, now)
		if err := tx.QueryRow(ctx, sqlEventCount).Scan(&st.Events); err != nil {
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
		return queue.Stats{}, s.readFail("read stats", err)
	}
	return st, nil
}

// readFail wraps a read's error; ErrNotFound and ErrClosed stay
// recognisable.
func (s *Store) readFail(op string, err error) error {
	if errors.Is(err, queue.ErrNotFound) || errors.Is(err, queue.ErrClosed) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.fail(op, err)
}

// ListJobs pages through jobs matching p, newest first.
func (s *Store) ListJobs(ctx context.Context, p queue.ListParams) (queue.JobPage, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
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
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, query, args...)
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
		return queue.JobPage{}, s.readFail("list jobs", err)
	}
	return storekit.TrimPage(jobs, limit), nil
}

// scanSummary scans the columns shared by sqlList and sqlGet, followed by
// extra destinations.
func scanSummary(row pgx.Row, j *queue.JobSummary, extra ...any) error {
	var finished pgtype.Timestamptz
	dest := append([]any{&j.ID, &j.EventID, &j.Source, &j.DeliveryID, &j.EventType, &j.Target, &j.Status,
		&j.Attempts, &j.Replays, &j.RunAt, &j.LastError, &j.CreatedAt, &finished}, extra...)
	if err := row.Scan(dest...); err != nil {
		return err
	}
	j.FinishedAt = timeOf(finished)
	return nil
}

// timeOf is t's time, the zero time for NULL.
func timeOf(t pgtype.Timestamptz) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time
}

// GetJob returns one job with its payload, headers and history.
func (s *Store) GetJob(ctx context.Context, id int64) (queue.JobDetail, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var d queue.JobDetail
	sl := s.sealer.Load()
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		var headers, sealed []byte
		var leaseUntil pgtype.Timestamptz
		err := scanSummary(tx.QueryRow(ctx, sqlGet, id), &d.JobSummary, &headers, &d.Payload, &sealed, &d.LeaseOwner, &leaseUntil)
		if errors.Is(err, pgx.ErrNoRows) {
			return queue.ErrNotFound
		}
		if err != nil {
			return err
		}
		d.LeaseUntil = timeOf(leaseUntil)
		d.LastError = sl.DecodeText(d.LastError, storekit.ColumnLastError, d.ID)
		d.Headers, d.Payload, d.ReadError = storekit.ReadStored(sl, d.Source, d.DeliveryID, headers, d.Payload, sealed)
		rows, err := tx.Query(ctx, sqlHistory, id)
		if err != nil {
			return err
		}
		defer rows.Close()
		d.History = []queue.Attempt{}
		for rows.Next() {
			var a queue.Attempt
			var dur int64
			var code pgtype.Int4
			if err := rows.Scan(&a.Attempt, &a.Started, &dur, &a.Outcome, &a.Error, &code); err != nil {
				return err
			}
			a.Duration = time.Duration(dur)
			a.Error = sl.DecodeText(a.Error, storekit.ColumnAttemptError, id)
			if code.Valid {
				a.Code = queue.CodeOf(int(code.Int32))
			}
			d.History = append(d.History, a)
		}
		return rows.Err()
	})
	if err != nil {
		return queue.JobDetail{}, s.readFail(fmt.Sprintf("get job %d", id), err)
	}
	return d, nil
}
