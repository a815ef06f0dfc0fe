package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/jackc/pgx/v5"
)

// FIFO per ordering key (see queue.Event.OrderingKey). A key's head, in
// ordering_heads, is the one job of its (source, target, key) that is not
// blocked and holds the key; the jobs behind it are blocked, outside the
// pending index, so they cost the claim nothing.
//
// Instances race on a key: an enqueue may block a job behind a head that
// a finish is releasing at the same moment. Both lock the head row first
// (the enqueue's upsert, the finish's sqlLockHeads) and read the blocked
// jobs only in a later statement, whose snapshot, under READ COMMITTED,
// sees what the other committed while it waited. So the releaser either
// sees the blocked job and promotes it, or deletes the head before the
// enqueue's upsert, which then makes its job the head.

const (
	// sqlEnqueueKeyed inserts a keyed event and its jobs, all blocked; a
	// duplicate returns no row. sqlClaimHeads then makes each job the
	// head of a free key.
	sqlEnqueueKeyed = `WITH ev AS (
	INSERT INTO events (source, delivery_id, event_type, headers, payload, targets, created_at, trace, sealed)
	VALUES ($1, $2, $3, $4, $5, cardinality($6::text[]), $7, nullif($10::text, ''), $11)
	ON CONFLICT (source, delivery_id) DO NOTHING
	RETURNING id
), jb AS (
	INSERT INTO jobs (event_id, source, target, run_at, created_at, status, ordering_key, ordering_hold)
	SELECT ev.id, $1, t.target, $7, $7, 'blocked', $8, $9
	FROM ev, unnest($6::text[]) WITH ORDINALITY AS t (target, n)
	ORDER BY t.n
	RETURNING id
)
SELECT id, ARRAY(SELECT id FROM jb) FROM ev`

	// sqlClaimHeads makes the oldest of the jobs $1 (pending or blocked,
	// with a key) the head of its key if the key is free, and blocks
	// every other one behind its key's head. The upsert locks a head row
	// that exists (the no-op update), so a finish releasing that head
	// waits for this transaction; the blocking runs in sqlBlockBehind,
	// a later statement.
	sqlClaimHeads = `WITH h AS (
	INSERT INTO ordering_heads (source, target, ordering_key, job_id)
	SELECT DISTINCT ON (source, target, ordering_key) source, target, ordering_key, id
	FROM jobs WHERE id = ANY ($1::bigint[]) AND ordering_key IS NOT NULL AND status IN ('pending', 'blocked')
	ORDER BY source, target, ordering_key, id
	ON CONFLICT (source, target, ordering_key) DO UPDATE SET job_id = ordering_heads.job_id
	RETURNING job_id
)
SELECT count(*) FROM h`

	// sqlBlockBehind sets each of the jobs $1 to pending, due $2, if it
	// is its key's head, and to blocked otherwise.
	sqlBlockBehind = `UPDATE jobs AS j
SET status = CASE WHEN h.job_id = j.id THEN 'pending' ELSE 'blocked' END,
	run_at = CASE WHEN h.job_id = j.id THEN $2 ELSE j.run_at END
FROM ordering_heads AS h
WHERE j.id = ANY ($1::bigint[]) AND j.status IN ('pending', 'blocked')
	AND h.source = j.source AND h.target = j.target AND h.ordering_key = j.ordering_key
	AND j.status <> CASE WHEN h.job_id = j.id THEN 'pending' ELSE 'blocked' END
RETURNING j.status`

	// sqlLockHeads locks the heads held by the jobs $1, before
	// sqlReleaseHeads reads what is blocked behind them. It locks them in
	// key order, as sqlClaimHeads's upsert does, whatever plan the
	// session has cached: a Finish's hand-on and another instance's
	// sweep lock overlapping sets, and a sequential scan in one and the
	// job-id index in the other would take them in opposite orders and
	// deadlock (TestLockHeadsOneOrder).
	sqlLockHeads = `SELECT 1 FROM ordering_heads WHERE job_id = ANY ($1::bigint[])
ORDER BY source, target, ordering_key FOR UPDATE`

	// sqlStrandedHeads lists the heads whose job no longer holds its key
	// (see sqlReleaseHeads): left by a Finish whose hand-on never ran (a
	// crash between its two commits). A few rows, one per key in use.
	sqlStrandedHeads = `SELECT coalesce(array_agg(h.job_id), '{}') FROM ordering_heads AS h
WHERE NOT EXISTS (
	SELECT 1 FROM jobs AS j WHERE j.id = h.job_id
	AND (j.status IN ('pending', 'running', 'blocked') OR (j.status = 'dead' AND j.ordering_hold)))`

	// sqlReleaseHeads hands on each key whose head is one of the jobs $1
	// and no longer holds it (done, dead without ordering_hold, or
	// deleted): the next blocked job, the lowest id through jobs_blocked,
	// becomes pending, due $2, and the head; a key with none waiting is
	// freed. It returns the jobs made pending, as an array. Most finishes
	// release nothing (no job of theirs has a key): the EXISTS gates the
	// update of jobs, so its scan of jobs never runs then, whatever plan
	// the table's statistics choose for it. A plan cached while the table
	// was small scans the whole table for the ids: 1 ms a finish at 11,000
	// jobs in the load test.
	sqlReleaseHeads = `WITH rel AS (
	SELECT h.source, h.target, h.ordering_key FROM ordering_heads AS h
	WHERE h.job_id = ANY ($1::bigint[]) AND NOT EXISTS (
		SELECT 1 FROM jobs AS j WHERE j.id = h.job_id
		AND (j.status IN ('pending', 'running', 'blocked') OR (j.status = 'dead' AND j.ordering_hold)))
), nxt AS (
	SELECT rel.*, n.id FROM rel LEFT JOIN LATERAL (
		SELECT id FROM jobs
		WHERE status = 'blocked' AND source = rel.source AND target = rel.target AND ordering_key = rel.ordering_key
		ORDER BY id LIMIT 1) AS n ON true
), up AS (
	UPDATE jobs SET status = 'pending', run_at = $2
	WHERE id = ANY (ARRAY(SELECT id FROM nxt WHERE id IS NOT NULL))
		AND EXISTS (SELECT 1 FROM nxt WHERE id IS NOT NULL)
	RETURNING id
), moved AS (
	UPDATE ordering_heads AS h SET job_id = nxt.id FROM nxt
	WHERE nxt.id IS NOT NULL AND h.source = nxt.source AND h.target = nxt.target AND h.ordering_key = nxt.ordering_key
), freed AS (
	DELETE FROM ordering_heads AS h USING nxt
	WHERE nxt.id IS NULL AND h.source = nxt.source AND h.target = nxt.target AND h.ordering_key = nxt.ordering_key
)
SELECT ARRAY(SELECT id FROM up)`
)

// enqueueKeyed stores an event with an ordering key in its own
// transaction: its jobs go into their keys' chains, which a batch of
// enqueues in one statement cannot do.
func (s *Store) enqueueKeyed(ctx context.Context, a *enqueueArgs, key string, hold bool) (queue.EnqueueResult, error) {
	var res queue.EnqueueResult
	ready := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var jobs []int64
		err := tx.QueryRow(ctx, sqlEnqueueKeyed, a.source, a.deliveryID, a.eventType, a.headers, a.payload, a.targets, a.at, key, hold, a.trace, a.sealed).
			Scan(&res.EventID, &jobs)
		if errors.Is(err, pgx.ErrNoRows) {
			res.Duplicate = true
			return tx.QueryRow(ctx, sqlEventID, a.source, a.deliveryID).Scan(&res.EventID)
		}
		if err != nil {
			return err
		}
		res.Jobs = len(jobs)
		ready, err = rechain(ctx, tx, jobs, a.at)
		return err
	})
	if err != nil {
		return queue.EnqueueResult{}, s.fail("enqueue", err)
	}
	if ready {
		s.madeReady()
	}
	return res, nil
}

// rechain puts the jobs ids, new or replayed, pending or blocked, into
// their keys' chains inside tx, and reports whether one is pending. Jobs
// without a key are left alone.
func rechain(ctx context.Context, tx pgx.Tx, ids []int64, now time.Time) (bool, error) {
	if len(ids) == 0 {
		return false, nil
	}
	if _, err := tx.Exec(ctx, sqlClaimHeads, ids); err != nil {
		return false, err
	}
	rows, err := tx.Query(ctx, sqlBlockBehind, ids, now)
	if err != nil {
		return false, err
	}
	pending := false
	var status string
	_, err = pgx.ForEachRow(rows, []any{&status}, func() error {
		pending = pending || status == string(queue.StatusPending)
		return nil
	})
	return pending, err
}

// release hands on, inside tx, the keys the jobs ids held, once tx or an
// earlier commit finished or deleted those jobs, and returns the jobs made
// pending. It locks the heads first, and reads what is blocked behind them
// in a later statement (see the top of this file).
func release(ctx context.Context, tx pgx.Tx, ids []int64, now time.Time) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	if _, err := tx.Exec(ctx, sqlLockHeads, ids); err != nil {
		return nil, err
	}
	var promoted []int64
	if err := tx.QueryRow(ctx, sqlReleaseHeads, ids, now).Scan(&promoted); err != nil {
		return nil, err
	}
	return promoted, nil
}

// sweepHeads hands on the keys held by jobs that no longer hold them, and
// reports whether it made a job pending. It runs every few seconds (see
// folder): a Finish hands its keys on in a second transaction, and a
// crash between the two leaves a key stranded until then.
func (s *Store) sweepHeads(ctx context.Context) (bool, error) {
	var ids []int64
	if err := s.pool.QueryRow(ctx, sqlStrandedHeads).Scan(&ids); err != nil || len(ids) == 0 {
		return false, err
	}
	promoted, err := s.releaseKeys(ctx, ids, ms(s.cfg.Now()))
	if len(promoted) > 0 {
		s.madeReady()
	}
	return len(promoted) > 0, err
}
