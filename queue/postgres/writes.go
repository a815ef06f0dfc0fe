package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/storekit"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// The write statements. Each is one statement, so one implicit
// transaction and one round trip; pgx prepares each once per connection
// and reuses it, so nothing is re-parsed on the hot path.
const (
	// sqlEnqueue inserts the event and, only if it is new, one job per
	// target. A duplicate returns no row. $6 is the targets in order, $8
	// the trace context ('' stores NULL).
	sqlEnqueue = `WITH ev AS (
	INSERT INTO events (source, delivery_id, event_type, headers, payload, targets, created_at, trace, sealed)
	VALUES ($1, $2, $3, $4, $5, cardinality($6::text[]), $7, nullif($8::text, ''), $9)
	ON CONFLICT (source, delivery_id) DO NOTHING
	RETURNING id
), jb AS (
	INSERT INTO jobs (event_id, source, target, run_at, created_at)
	SELECT ev.id, $1, t.target, $7, $7
	FROM ev, unnest($6::text[]) WITH ORDINALITY AS t (target, n)
	ORDER BY t.n
	RETURNING 1
)
SELECT id, (SELECT count(*) FROM jb) FROM ev`

	sqlEventID = `SELECT id FROM events WHERE source = $1 AND delivery_id = $2`

	// sqlClaim leases the first $4 ready jobs in (run_at, id) order:
	// pending and due, or running with an expired lease. Pending jobs are
	// read route by route: for each (source, target) asked for ($6/$7
	// when $5 is true; otherwise every route that has pending jobs, found
	// by a loose scan of the index, one probe per route), the lateral
	// subquery walks that route's range of the pending index in order and
	// locks up to $4 rows as it goes, skipping rows another claimer holds
	// (SKIP LOCKED). Pending jobs of routes not asked for are never read,
	// so the cost depends neither on the backlog nor on how many jobs the
	// claim cannot take. Expired leases come from their own partial index,
	// filtered by route: running jobs are few. The merge keeps $4 of the
	// locked rows; the rest are released at commit, a moment later. With
	// ClaimParams.Quotas ($9, one per route of $6/$7), each route's walk
	// stops at its quota, and the merge numbers the candidates per route
	// so that expired leases count against it too. The
	// update finds the picked rows through the primary key (an array, so
	// the planner cannot choose to scan the table for a join). Payload
	// and headers come from the events in the same statement.
	//
	// Leases are timed by clock: $8, or the server's own clock when $8 is
	// NULL, so instances whose clocks disagree still agree on when a lease
	// ends (the pool passes NULL). $2 is the lease in milliseconds. Due
	// times stay on the caller's clock ($3), the clock they were written
	// with.
	sqlClaim = `WITH RECURSIVE clock AS (
	SELECT coalesce($8::timestamptz, date_trunc('milliseconds', now())) AS now
), pending_routes (source, target) AS (
	(SELECT source, target FROM jobs WHERE status = 'pending' AND NOT $5 ORDER BY source, target LIMIT 1)
	UNION ALL
	SELECT n.source, n.target FROM pending_routes AS p CROSS JOIN LATERAL (
		SELECT source, target FROM jobs
		WHERE status = 'pending' AND (source, target) > (p.source, p.target)
		ORDER BY source, target LIMIT 1) AS n
), asked (source, target, quota) AS (
	SELECT s, t, least(coalesce(q, $4), $4) FROM unnest($6::text[], $7::text[], $9::int[]) AS a (s, t, q) WHERE $5
), routes (source, target, quota) AS (
	SELECT * FROM asked
	UNION ALL
	SELECT source, target, $4 FROM pending_routes
), due AS (
	SELECT d.id, d.run_at, r.source, r.target, r.quota FROM routes AS r CROSS JOIN LATERAL (
		SELECT id, run_at FROM jobs
		WHERE status = 'pending' AND source = r.source AND target = r.target AND run_at <= $3
		ORDER BY run_at, id
		LIMIT r.quota
		FOR UPDATE SKIP LOCKED) AS d
), expired AS (
	SELECT id, run_at, source, target, attempts, claimed_at, lease_until FROM jobs
	WHERE status = 'running' AND lease_until <= (SELECT now FROM clock)
		AND (NOT $5 OR (source, target) IN (SELECT source, target FROM asked))
	ORDER BY lease_until, id
	LIMIT $4
	FOR UPDATE SKIP LOCKED
), pick AS (
	SELECT id FROM (
		SELECT id, run_at, quota, row_number() OVER (PARTITION BY source, target ORDER BY run_at, id) AS n
		FROM (
			SELECT id, run_at, source, target, quota FROM due
			UNION ALL
			SELECT e.id, e.run_at, e.source, e.target, coalesce(a.quota, $4) FROM expired AS e
			LEFT JOIN asked AS a ON a.source = e.source AND a.target = e.target) AS c) AS c
	WHERE n <= quota
	ORDER BY run_at, id
	LIMIT $4
), claimed AS (
	UPDATE jobs AS j
	SET status = 'running', attempts = j.attempts + 1, fence = j.fence + 1, lease_owner = $1,
		lease_until = (SELECT now FROM clock) + $2::bigint * interval '1 millisecond',
		claimed_at = (SELECT now FROM clock)
	WHERE j.id = ANY (ARRAY(SELECT id FROM pick))
	RETURNING j.id, j.event_id, j.source, j.target, j.attempts, j.run_at, j.created_at,
		j.fence, j.replays, j.replay_base, j.lease_until
), lost AS (
	-- An expired lease taken again is a claim that never finished: its
	-- process ended, stalled or lost the store. Its attempt is recorded
	-- with its start and, as its duration, the time until its lease's
	-- last end (jobs claimed before version 10 have no start: the lease's
	-- end, no duration).
	INSERT INTO attempts (job_id, attempt, started_at, duration_ns, outcome, error)
	SELECT e.id, e.attempts, coalesce(e.claimed_at, e.lease_until),
		greatest((extract(epoch FROM e.lease_until - coalesce(e.claimed_at, e.lease_until)) * 1e9)::bigint, 0),
		'` + string(queue.OutcomeLeaseLost) + `', '` + queue.LeaseLostError + `'
	FROM expired AS e WHERE e.id = ANY (ARRAY(SELECT id FROM claimed))
)
SELECT c.id, c.event_id, c.source, e.delivery_id, e.event_type, c.target, e.headers, e.payload, c.attempts, c.created_at,
	c.fence, c.replays, c.replay_base, c.lease_until, coalesce(e.trace, ''), e.sealed
FROM claimed AS c JOIN events AS e ON e.id = c.event_id
ORDER BY c.run_at, c.id`

	// sqlExtend extends the claims ($1 ids, $2 their fence tokens) still
	// held by $3, to $5 milliseconds past $4 or, when $4 is NULL, past the
	// server's clock (see sqlClaim). Its rows are locked in id order first,
	// as every fenced write locks them (see lockInOrder).
	sqlExtend = `WITH ` + lockInOrder + `
UPDATE jobs AS j
SET lease_until = coalesce($4::timestamptz, date_trunc('milliseconds', now())) + $5::bigint * interval '1 millisecond'
FROM unnest($1::bigint[], $2::bigint[]) AS c (id, fence)
WHERE j.id = ANY (ARRAY(SELECT id FROM lk)) AND j.id = c.id AND j.fence = c.fence AND j.lease_owner = $3
RETURNING j.id`

	// A replay keeps the attempts counting (history and X-Webhook-Attempt
	// number across replays) and starts a new budget from them.
	sqlReplay = `UPDATE jobs
SET status = 'pending', replays = replays + 1, replay_base = attempts, run_at = $2,
	lease_owner = NULL, lease_until = NULL, finished_at = NULL
WHERE id = $1 AND status = 'dead'`

	sqlJobStatus = `SELECT status FROM jobs WHERE id = $1`

	// sqlDiscard deletes a job that is not running and its history, then
	// its event if no other job is left; the statement's snapshot still
	// sees the deleted job, hence the id <> $1.
	sqlDiscard = `WITH d AS (
	DELETE FROM jobs WHERE id = $1 AND status <> 'running' RETURNING event_id
), h AS (
	DELETE FROM attempts WHERE job_id = $1 AND EXISTS (SELECT 1 FROM d)
), e AS (
	DELETE FROM events WHERE id IN (SELECT event_id FROM d)
	AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.event_id = events.id AND jobs.id <> $1)
)
SELECT count(*) FROM d`

	// sqlPurgeJobs deletes the oldest done jobs through their partial
	// index, then the events left without a job, reaching both by index
	// (arrays, so the planner cannot choose to scan a table for a join).
	// Rows locked by another purger are skipped, so two instances purging
	// at once split the work.
	sqlPurgeJobs = `WITH pick AS (
	SELECT id FROM jobs WHERE status = 'done' AND finished_at < $1
	ORDER BY finished_at LIMIT $2
	FOR UPDATE SKIP LOCKED
), d AS (
	DELETE FROM jobs WHERE id = ANY (ARRAY(SELECT id FROM pick))
	RETURNING id, event_id
), h AS (
	DELETE FROM attempts WHERE job_id = ANY (ARRAY(SELECT id FROM d))
), e AS (
	DELETE FROM events WHERE id = ANY (ARRAY(SELECT event_id FROM d))
	AND NOT EXISTS (SELECT 1 FROM jobs
		WHERE jobs.event_id = events.id AND jobs.id <> ALL (ARRAY(SELECT id FROM d)))
)
SELECT count(*) FROM d`

	// sqlPurgeBareEvents deletes events stored without any job once they
	// are older than the cutoff: until then they are dedupe memory.
	sqlPurgeBareEvents = `DELETE FROM events WHERE id IN (
	SELECT id FROM events WHERE targets = 0 AND created_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`
)

// Bulk replay and discard run in chunks of up to $3 jobs (bulkChunk),
// each its own statement and transaction. A chunk takes the routes
// matching the filter ($1 source, $2 target, empty: any) from job_counts
// (a few rows once folded) and reads each route's range of the status's
// partial index in the index's order, from where the previous chunk
// stopped (the keyset after $4, or ($4, $5) for pending jobs): the rows
// earlier chunks replayed or deleted keep their index entries until
// vacuum, and a chunk that started each range again walked past all of
// them (a 500,000-job replay took 70 s that way, 15-18 s now). The status
// is written into each statement, not bound: a prepared statement's
// generic plan cannot use a partial index for a bound status.

// sqlReplayDead replays one chunk of dead jobs, due at $5, and returns how
// many and the id to continue after.
var sqlReplayDead = `WITH ` + pickByRoute(queue.StatusDead) + `, u AS (
	UPDATE jobs
	SET status = 'pending', replays = replays + 1, replay_base = attempts, run_at = $5,
		lease_owner = NULL, lease_until = NULL, finished_at = NULL
	WHERE id = ANY (ARRAY(SELECT id FROM pick))
	RETURNING id
)
SELECT count(*), coalesce(max(id), $4), ARRAY(SELECT id FROM u) FROM u`

// sqlDiscardDead and sqlDiscardPending delete one chunk of jobs and the
// events left without a job, and return how many and the keyset to
// continue after. The statement's snapshot still sees the deleted jobs,
// hence the id list.
var (
	sqlDiscardDead = `WITH ` + pickByRoute(queue.StatusDead) + discardPicked + `
SELECT (SELECT count(*) FROM d), ARRAY(SELECT id FROM d), coalesce((SELECT max(id) FROM pick), $4)`

	sqlDiscardPending = `WITH ` + pickByRoute(queue.StatusPending) + discardPicked + `
SELECT (SELECT count(*) FROM d), ARRAY(SELECT id FROM d),
	coalesce((SELECT run_at FROM pick ORDER BY run_at DESC, id DESC LIMIT 1), $4),
	coalesce((SELECT id FROM pick ORDER BY run_at DESC, id DESC LIMIT 1), $5)`
)

const discardPicked = `, d AS (
	DELETE FROM jobs WHERE id = ANY (ARRAY(SELECT id FROM pick))
	RETURNING id, event_id
), h AS (
	DELETE FROM attempts WHERE job_id = ANY (ARRAY(SELECT id FROM d))
), e AS (
	DELETE FROM events WHERE id = ANY (ARRAY(SELECT event_id FROM d))
	AND NOT EXISTS (SELECT 1 FROM jobs
		WHERE jobs.event_id = events.id AND jobs.id <> ALL (ARRAY(SELECT id FROM d)))
)`

// pickByRoute returns the CTE pick: up to $3 jobs of status matching the
// filter, after the keyset, locked, skipping rows another statement holds
// (see the bulk statements above). Pending jobs also skip $6, the jobs
// that the discard's earlier chunks made pending by handing on the
// ordering keys of the heads they deleted: those were blocked when the
// discard began, and they go ahead.
func pickByRoute(status queue.Status) string {
	after, order := "id > $4", "id"
	if status == queue.StatusPending {
		after, order = "(run_at, id) > ($4, $5) AND id <> ALL ($6::bigint[])", "run_at, id"
	}
	return `pick AS (
	SELECT j.id, j.run_at FROM (
		SELECT source, target FROM job_counts
		WHERE status = '` + string(status) + `' AND ($1 = '' OR source = $1) AND ($2 = '' OR target = $2)
		GROUP BY source, target HAVING sum(jobs) > 0
	) AS r CROSS JOIN LATERAL (
		SELECT id, run_at FROM jobs
		WHERE status = '` + string(status) + `' AND source = r.source AND target = r.target AND ` + after + `
		ORDER BY ` + order + `
		LIMIT $3
		FOR UPDATE SKIP LOCKED
	) AS j
	ORDER BY ` + order + `
	LIMIT $3
)`
}

// lockInOrder is the CTE lk that locks the jobs $1, in id order, before a
// fenced write (Finish, ExtendLeases, HandBack) changes them. These
// statements take many rows of one pool's claims each, and two of them
// that lock shared rows in different orders deadlock: an extension of
// every held job beside a Finish of some of them did, and PostgreSQL
// aborted one (the Finish, whose jobs then ran again). An UPDATE locks
// rows in whatever order its plan meets them; a SELECT … ORDER BY … FOR
// UPDATE locks them in its output order. The pool sends each call's
// claims sorted, so the scan of the primary key needs no sort.
const lockInOrder = `lk AS (
	SELECT id FROM jobs WHERE id = ANY ($1::bigint[]) ORDER BY id FOR NO KEY UPDATE
)`

// The fenced writes find their rows through the primary key alone: none
// tests status = 'running', which would let the planner read the running
// jobs' partial index (jobs_leased) instead, and a plan made while the
// statistics saw no running job walked all of them for each row of the
// batch (38 s for one Finish during a backlog). A job is running exactly
// while it has a lease owner, so the owner and the fence say as much.

// sqlHandBack returns the jobs of the claims ($1 ids, $4 their fence
// tokens) still held by $2 to pending without the attempt they were
// claimed with, and records the interrupted attempt as "running": it did
// not end, and it was not charged.
var sqlHandBack = `WITH ` + lockInOrder + `, back AS (
	UPDATE jobs AS j
	SET status = 'pending', run_at = $3, attempts = greatest(j.attempts - 1, 0), lease_owner = NULL, lease_until = NULL
	FROM unnest($1::bigint[], $4::bigint[]) AS c (id, fence)
	WHERE j.id = ANY (ARRAY(SELECT id FROM lk)) AND j.id = c.id AND j.fence = c.fence AND j.lease_owner = $2
	RETURNING j.id
)
SELECT count(*) FROM back`

// sqlFinish records a batch of outcomes under the fence, one row of the
// arrays per completion. A retry (pending) gets its run_at and no
// finished_at; done and dead are stamped finished. The statement returns
// the ids it recorded, and whether each job has an ordering key (its
// key is handed on by a second transaction, see Finish). Ids must be
// distinct within one call.
var sqlFinish = `WITH c AS (
	SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::timestamptz[], $5::text[],
		$6::timestamptz[], $7::timestamptz[], $8::bigint[], $9::bigint[], $10::integer[], $11::text[], $12::boolean[])
		AS c (id, owner, status, run_at, err, at, started, duration_ns, fence, code, aerr, back)
), ` + lockInOrder + `, upd AS (
	UPDATE jobs AS j
	SET status = c.status,
		run_at = CASE WHEN c.status = 'pending' THEN c.run_at ELSE j.run_at END,
		last_error = CASE WHEN c.back THEN j.last_error ELSE c.err END,
		attempts = CASE WHEN c.back THEN greatest(j.attempts - 1, 0) ELSE j.attempts END,
		lease_owner = NULL, lease_until = NULL,
		finished_at = CASE WHEN c.status = 'pending' THEN NULL ELSE c.at END
	FROM c
	WHERE j.id = ANY (ARRAY(SELECT id FROM lk)) AND j.id = c.id AND j.lease_owner = c.owner AND j.fence = c.fence
	RETURNING j.id, j.attempts, j.fence, j.ordering_key IS NOT NULL AS keyed, c.started, c.duration_ns, c.status, c.aerr, c.code, c.back
), hist AS (
	-- A run handed back gave its attempt back: it is recorded as the
	-- attempt it was, "running" (it did not end its job).
	INSERT INTO attempts (job_id, attempt, started_at, duration_ns, outcome, error, status)
	SELECT id, attempts + back::int, started, duration_ns, CASE WHEN back THEN 'running' ELSE status END, aerr, code FROM upd
)` + trimHistory("upd") + `
SELECT id, keyed FROM upd`

// trimHistory returns a CTE that drops, for each job in the CTE jobs (with
// id and fence columns), the history entries beyond the newest
// queue.MaxHistory once the one inserted by the same statement is counted:
// the statement's snapshot does not show that one, so it keeps
// MaxHistory-1 of the rows it sees. A claim leaves one entry at most (its
// Finish, a run handed back, or, when it never finished, the lease_lost
// entry the next claim writes), so a job claimed MaxHistory times or fewer has
// nothing to trim: the EXISTS, a one-time test, keeps the history from
// being read at all for the batches (nearly all) without such a job.
func trimHistory(jobs string) string {
	return `, trim AS (
	DELETE FROM attempts AS a
	WHERE EXISTS (SELECT 1 FROM ` + jobs + ` WHERE fence > ` + strconv.Itoa(queue.MaxHistory) + `)
		AND a.job_id = ANY (ARRAY(SELECT id FROM ` + jobs + ` WHERE fence > ` + strconv.Itoa(queue.MaxHistory) + `))
		AND a.id <= (
			SELECT h.id FROM attempts AS h WHERE h.job_id = a.job_id
			ORDER BY h.id DESC OFFSET ` + strconv.Itoa(queue.MaxHistory-1) + ` LIMIT 1)
)`
}

// Enqueue stores ev and one pending job per target, due now: the event
// is acknowledged only once its commit has returned. Concurrent calls
// share one statement and one commit, up to Config.MaxBatch of them (see
// batch.go); with MaxBatch 1 each is its own statement.
func (s *Store) Enqueue(ctx context.Context, ev queue.Event) (queue.EnqueueResult, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := storekit.CheckEvent(ev); err != nil {
		return queue.EnqueueResult{}, err
	}
	if s.isClosed() {
		return queue.EnqueueResult{}, queue.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return queue.EnqueueResult{}, err
	}
	a := enqueueArgs{
		source:     ev.Source,
		deliveryID: ev.DeliveryID,
		eventType:  ev.EventType,
		payload:    ev.Payload,
		targets:    ev.Targets,
		at:         ms(s.cfg.Now()),
		trace:      ev.Trace,
	}
	// Sealed here, in the caller's goroutine, before the batch; a sealed
	// event keeps its headers and payload in sealed alone.
	sl := s.sealer.Load()
	if a.sealed = sl.AppendEvent(nil, ev.Source, ev.DeliveryID, ev.Headers, ev.Payload); a.sealed != nil {
		a.headers, a.payload = []byte{}, []byte{}
	} else {
		// A non-nil slice, so no headers is an empty value, not NULL.
		a.headers = storekit.AppendHeaders(make([]byte, 0, 128), ev.Headers)
	}
	if a.payload == nil {
		a.payload = []byte{} // the column is NOT NULL
	}
	if a.targets == nil {
		a.targets = []string{}
	}
	if ev.OrderingKey != "" {
		return s.enqueueKeyed(ctx, &a, sl.OrderingKey(ev.Source, ev.OrderingKey), ev.OrderingHold)
	}
	if s.batcher != nil {
		return s.batcher.enqueue(ctx, a)
	}
	res, err := s.enqueueOne(ctx, s.pool, &a)
	if err == nil && res.Jobs > 0 {
		s.madeReady()
	}
	return res, err
}

// Claim leases up to p.Limit ready jobs in (run_at, id) order, in one
// statement.
func (s *Store) Claim(ctx context.Context, p queue.ClaimParams) ([]*queue.Job, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if none, err := storekit.CheckClaim(p); none || err != nil {
		return nil, err
	}
	if s.isClosed() {
		return nil, queue.ErrClosed
	}
	// Without p.Now, the lease is timed by the server's clock (nil $8).
	var leaseNow any
	now := ms(s.cfg.Now())
	if !p.Now.IsZero() {
		now = ms(p.Now)
		leaseNow = now
	}
	filter := p.Routes != nil
	sources := make([]string, len(p.Routes))
	targets := make([]string, len(p.Routes))
	for i, r := range p.Routes {
		sources[i], targets[i] = r.Source, r.Target
	}
	// Without quotas, $9 is an array of NULLs: each route takes up to $4.
	quotas := make([]*int32, len(p.Routes))
	for i := range p.Quotas {
		q := int32(min(p.Quotas[i], math.MaxInt32))
		quotas[i] = &q
	}
	rows, err := s.pool.Query(ctx, sqlClaim, p.Owner, p.Lease.Milliseconds(), now, p.Limit, filter, sources, targets, leaseNow, quotas)
	if err != nil {
		return nil, s.fail("claim", err)
	}
	defer rows.Close()
	var jobs []*queue.Job
	sl := s.sealer.Load()
	for rows.Next() {
		j := &queue.Job{LeaseOwner: p.Owner}
		var headers, payload, sealed []byte
		if err := rows.Scan(&j.ID, &j.EventID, &j.Source, &j.DeliveryID, &j.EventType, &j.Target,
			&headers, &payload, &j.Attempt, &j.CreatedAt, &j.Fence, &j.Replays, &j.ReplayBase, &j.LeaseUntil, &j.Trace, &sealed); err != nil {
			return nil, s.fail("claim", err)
		}
		// pgx scanned each value into a slice of its own: a sealed one
		// opens in place. A job whose event does not open carries the
		// error for the pool to record (Job.ReadErr).
		if j.Headers, j.Payload, err = sl.DecodeEvent(j.Source, j.DeliveryID, headers, payload, sealed); err != nil {
			j.Headers, j.Payload, j.ReadErr = nil, []byte{}, fmt.Errorf("read event %d: %w", j.EventID, err)
		}
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("claim", err)
	}
	return jobs, nil
}

// ExtendLeases moves the lease of each claim still held, in one
// statement, and returns the ids it could not extend. Without p.Now the
// new lease is timed by the server's clock.
func (s *Store) ExtendLeases(ctx context.Context, p queue.ExtendParams) ([]int64, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if len(p.Claims) == 0 {
		return nil, nil
	}
	if s.isClosed() {
		return nil, queue.ErrClosed
	}
	ids, fences := splitClaims(p.Claims)
	var leaseNow any
	if !p.Now.IsZero() {
		leaseNow = ms(p.Now)
	}
	rows, err := s.pool.Query(ctx, sqlExtend, ids, fences, p.Owner, leaseNow, p.Lease.Milliseconds())
	if err != nil {
		return nil, s.fail("extend leases", err)
	}
	kept, err := idSet(rows)
	if err != nil {
		return nil, s.fail("extend leases", err)
	}
	var lost []int64
	for _, id := range ids {
		if !kept[id] {
			lost = append(lost, id)
		}
	}
	return lost, nil
}

// Finish records completions under the fence, the whole batch in one
// statement; the ordering keys the ended jobs held, if any, are handed
// on by a second transaction right after it.
func (s *Store) Finish(ctx context.Context, cs []queue.Completion) ([]bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := storekit.CheckCompletions(cs); err != nil {
		return nil, err
	}
	if len(cs) == 0 {
		return nil, nil
	}
	if s.isClosed() {
		return nil, queue.ErrClosed
	}
	now := ms(s.cfg.Now())
	recorded := make([]bool, len(cs))
	ready := false
	// One statement updates each job once, so a batch naming a job twice
	// runs in rounds of distinct ids, in order, as the SQLite store runs
	// them one by one: the second completion of a job meets the fence the
	// first left behind. The pool never sends such a batch; one round is
	// the rule.
	todo := make([]int, len(cs))
	for i := range todo {
		todo[i] = i
	}
	for len(todo) > 0 {
		var round, later []int
		seen := make(map[int64]bool, len(todo))
		for _, i := range todo {
			if seen[cs[i].JobID] {
				later = append(later, i)
				continue
			}
			seen[cs[i].JobID] = true
			round = append(round, i)
		}
		a := finishArgs{sealer: s.sealer.Load()}
		for _, i := range round {
			a.add(&cs[i], now)
		}
		done, err := s.finishRound(ctx, &a)
		if err != nil {
			return nil, s.fail("finish jobs", err)
		}
		var ended []int64 // done or dead, with an ordering key to hand on
		for _, i := range round {
			if done[cs[i].JobID] && cs[i].Status != queue.StatusPending {
				ended = append(ended, cs[i].JobID)
			}
		}
		if len(ended) > 0 {
			promoted, err := s.releaseKeys(ctx, ended, now)
			if err != nil {
				return nil, s.fail("finish jobs: hand on ordering keys", err)
			}
			ready = ready || len(promoted) > 0
		}
		for k, i := range round {
			if _, ok := done[cs[i].JobID]; ok {
				recorded[i] = true
				if cs[i].Status == queue.StatusPending && !a.runAts[k].After(now) {
					ready = true
				}
			}
		}
		todo = later
	}
	if ready {
		s.madeReady()
	}
	return recorded, nil
}

// finishRound runs sqlFinish for one round and returns the ids it
// recorded, each true when its job has an ordering key.
func (s *Store) finishRound(ctx context.Context, a *finishArgs) (map[int64]bool, error) {
	rows, err := s.pool.Query(ctx, sqlFinish, a.ids, a.owners, a.statuses, a.runAts, a.errs, a.ats, a.starteds, a.durations, a.fences, a.codes, a.aerrs, a.backs)
	if err != nil {
		return nil, err
	}
	done := make(map[int64]bool, len(a.ids))
	var id int64
	var keyed bool
	_, err = pgx.ForEachRow(rows, []any{&id, &keyed}, func() error {
		done[id] = keyed
		return nil
	})
	return done, err
}

// releaseKeys hands on the ordering keys that the jobs ids, just finished,
// held, in a transaction of its own, and returns the jobs made pending.
// Finishing and handing on in one transaction cost every Finish two more
// statements (a batch of three), ordering keys or not; now only the
// finishes of jobs with a key pay for them. A crash between the two
// commits leaves a key held by a finished job: sweepHeads, every few
// seconds, hands such keys on.
func (s *Store) releaseKeys(ctx context.Context, ids []int64, now time.Time) ([]int64, error) {
	var promoted []int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		promoted, err = release(ctx, tx, ids, now)
		return err
	})
	return promoted, err
}

// splitClaims returns the ids and the fence tokens of claims, as the
// arrays the fenced statements unnest.
func splitClaims(claims []queue.Claimed) (ids, fences []int64) {
	ids = make([]int64, len(claims))
	fences = make([]int64, len(claims))
	for i, c := range claims {
		ids[i], fences[i] = c.ID, c.Fence
	}
	return ids, fences
}

// idSet reads a column of ids into a set.
func idSet(rows pgx.Rows) (map[int64]bool, error) {
	set := make(map[int64]bool)
	var id int64
	_, err := pgx.ForEachRow(rows, []any{&id}, func() error {
		set[id] = true
		return nil
	})
	return set, err
}

// finishArgs holds one round of completions as the arrays sqlFinish
// unnests.
type finishArgs struct {
	ids       []int64
	fences    []int64
	owners    []string
	statuses  []string
	runAts    []time.Time
	errs      []string // each job's last error, sealed when the store seals
	aerrs     []string // each attempt's error, sealed for its own column
	ats       []time.Time
	starteds  []time.Time
	durations []int64
	codes     []pgtype.Int4 // NULL for none: no pointer to allocate per completion
	backs     []bool        // Completion.HandedBack

	sealer *storekit.Sealer
}

// add appends c, with its times filled by storekit.Times.
func (a *finishArgs) add(c *queue.Completion, now time.Time) {
	at, runAt := storekit.Times(c, now)
	a.ids = append(a.ids, c.JobID)
	a.fences = append(a.fences, c.Fence)
	a.owners = append(a.owners, c.Owner)
	a.statuses = append(a.statuses, string(c.Status))
	a.runAts = append(a.runAts, ms(runAt))
	last, attempt := a.sealer.CompletionTexts(c)
	a.errs = append(a.errs, last)
	a.aerrs = append(a.aerrs, attempt)
	a.ats = append(a.ats, ms(at))
	a.starteds = append(a.starteds, ms(c.Started))
	a.durations = append(a.durations, int64(c.Duration))
	v, ok := c.Code.Value()
	a.codes = append(a.codes, pgtype.Int4{Int32: int32(v), Valid: ok})
	a.backs = append(a.backs, c.HandedBack)
}

// HandBack returns the jobs of claims still held by owner to pending, due
// now, without charging their attempt, in one statement.
func (s *Store) HandBack(ctx context.Context, owner string, claims []queue.Claimed) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if len(claims) == 0 {
		return nil
	}
	if s.isClosed() {
		return queue.ErrClosed
	}
	ids, fences := splitClaims(claims)
	var n int64
	if err := s.pool.QueryRow(ctx, sqlHandBack, ids, owner, ms(s.cfg.Now()), fences).Scan(&n); err != nil {
		return s.fail("hand back jobs", err)
	}
	if n > 0 {
		s.madeReady()
	}
	return nil
}

// Replay gives the dead job id a fresh attempt budget, due now.
func (s *Store) Replay(ctx context.Context, id int64) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if s.isClosed() {
		return queue.ErrClosed
	}
	var replayed bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		now := ms(s.cfg.Now())
		tag, err := tx.Exec(ctx, sqlReplay, id, now)
		if err != nil {
			return err
		}
		if replayed = tag.RowsAffected() == 1; replayed {
			_, err = rechain(ctx, tx, []int64{id}, now)
		}
		return err
	})
	if err != nil {
		return s.fail(fmt.Sprintf("replay job %d", id), err)
	}
	if replayed {
		s.madeReady()
		return nil
	}
	if _, err := s.jobStatus(ctx, id); err != nil {
		return s.fail(fmt.Sprintf("replay job %d", id), err)
	}
	return fmt.Errorf("replay job %d: %w", id, queue.ErrNotDead)
}

// jobStatus reads a job's status, queue.ErrNotFound if there is no such
// job.
func (s *Store) jobStatus(ctx context.Context, id int64) (queue.Status, error) {
	var status queue.Status
	err := s.pool.QueryRow(ctx, sqlJobStatus, id).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", queue.ErrNotFound
	}
	return status, err
}

// bulkChunk bounds the jobs one statement of a bulk replay or discard
// changes, as purgeChunk does for a purge.
const bulkChunk = 256

// ReplayDead replays every dead job matching f; f.Status is ignored. It
// works in chunks of bulkChunk jobs, each its own transaction; the chunks
// replayed when it fails stay replayed and are counted.
func (s *Store) ReplayDead(ctx context.Context, f queue.Filter) (int, error) {
	if s.isClosed() {
		return 0, queue.ErrClosed
	}
	var after int64
	return storekit.BulkInChunks(ctx, math.MaxInt, bulkChunk, func(n int) (int, error) {
		ctx, cancel := s.bound(ctx)
		defer cancel()
		var replayed int64
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			now := ms(s.cfg.Now())
			var ids []int64
			if err := tx.QueryRow(ctx, sqlReplayDead, f.Source, f.Target, n, after, now).Scan(&replayed, &after, &ids); err != nil {
				return err
			}
			_, err := rechain(ctx, tx, ids, now)
			return err
		})
		if err != nil {
			return 0, s.fail("replay dead jobs", err)
		}
		if replayed > 0 {
			s.madeReady()
		}
		return int(replayed), nil
	})
}

// DiscardJobs deletes every job matching f, pending or dead as f.Status
// says, and the events left without a job, in chunks as ReplayDead.
func (s *Store) DiscardJobs(ctx context.Context, f queue.Filter) (int, error) {
	if err := storekit.CheckDiscardFilter(f); err != nil {
		return 0, err
	}
	if s.isClosed() {
		return 0, queue.ErrClosed
	}
	var (
		afterID int64
		afterAt time.Time // the zero time sorts before every run_at
		kept    = []int64{}
	)
	return storekit.BulkInChunks(ctx, math.MaxInt, bulkChunk, func(n int) (int, error) {
		ctx, cancel := s.bound(ctx)
		defer cancel()
		var deleted int64
		var promoted []int64
		// A deleted head of an ordering key hands it on, in the same
		// transaction; the job it makes pending is kept by the later
		// chunks.
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var ids []int64
			var err error
			if f.Status == queue.StatusPending {
				err = tx.QueryRow(ctx, sqlDiscardPending, f.Source, f.Target, n, afterAt, afterID, kept).Scan(&deleted, &ids, &afterAt, &afterID)
			} else {
				err = tx.QueryRow(ctx, sqlDiscardDead, f.Source, f.Target, n, afterID).Scan(&deleted, &ids, &afterID)
			}
			if err != nil {
				return err
			}
			promoted, err = release(ctx, tx, ids, ms(s.cfg.Now()))
			return err
		})
		if err != nil {
			return 0, s.fail("discard jobs", err)
		}
		if len(promoted) > 0 {
			kept = append(kept, promoted...)
			s.madeReady()
		}
		return int(deleted), nil
	})
}

// Discard deletes the job, unless it is running, and its event if no job
// is left.
func (s *Store) Discard(ctx context.Context, id int64) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if s.isClosed() {
		return queue.ErrClosed
	}
	n, err := s.discardOne(ctx, id)
	if err != nil {
		return s.fail(fmt.Sprintf("discard job %d", id), err)
	}
	if n == 1 {
		return nil
	}
	status, err := s.jobStatus(ctx, id)
	if err != nil {
		return s.fail(fmt.Sprintf("discard job %d", id), err)
	}
	if status == queue.StatusRunning {
		return fmt.Errorf("discard job %d: %w", id, queue.ErrRunning)
	}
	// It was running a moment ago and has just finished: try once more.
	if n, err = s.discardOne(ctx, id); err != nil {
		return s.fail(fmt.Sprintf("discard job %d", id), err)
	}
	if n == 0 {
		return fmt.Errorf("discard job %d: %w", id, queue.ErrRunning)
	}
	return nil
}

// discardOne runs sqlDiscard and, in the same transaction, hands on the
// ordering key the job held, if any; it returns the jobs deleted.
func (s *Store) discardOne(ctx context.Context, id int64) (int64, error) {
	var n int64
	var promoted []int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, sqlDiscard, id).Scan(&n); err != nil {
			return err
		}
		var err error
		if n == 1 {
			promoted, err = release(ctx, tx, []int64{id}, ms(s.cfg.Now()))
		}
		return err
	})
	if err == nil && len(promoted) > 0 {
		s.madeReady()
	}
	return n, err
}

// purgeChunk bounds the rows one purge statement deletes, so a large purge
// is many short transactions rather than one long one that holds locks
// and keeps vacuum from cleaning up behind it.
const purgeChunk = 256

// Purge deletes up to limit done jobs finished before cutoff and the
// events left without a job, then up to limit events that were stored
// without any job and are older than cutoff. It works in chunks of
// purgeChunk rows, each its own transaction, and returns the number of
// jobs deleted.
func (s *Store) Purge(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	if s.isClosed() {
		return 0, queue.ErrClosed
	}
	cutoff = ms(cutoff)
	jobs, err := storekit.BulkInChunks(ctx, limit, purgeChunk, func(n int) (int, error) {
		ctx, cancel := s.bound(ctx)
		defer cancel()
		var deleted int64
		if err := s.pool.QueryRow(ctx, sqlPurgeJobs, cutoff, n).Scan(&deleted); err != nil {
			return 0, s.fail("purge jobs", err)
		}
		return int(deleted), nil
	})
	if err != nil {
		return jobs, err
	}
	_, err = storekit.BulkInChunks(ctx, limit, purgeChunk, func(n int) (int, error) {
		ctx, cancel := s.bound(ctx)
		defer cancel()
		tag, err := s.pool.Exec(ctx, sqlPurgeBareEvents, cutoff, n)
		if err != nil {
			return 0, s.fail("purge events", err)
		}
		return int(tag.RowsAffected()), nil
	})
	return jobs, err
}
