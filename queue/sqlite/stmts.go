package sqlite

import (
	"context"
	"database/sql/driver"
	"fmt"
	"strconv"

	"github.com/caddywebhook/caddywebhook/queue"
)

// The write statements, prepared once per write connection: the writer
// never re-parses SQL on the hot path. The two of every enqueue take
// anonymous parameters: the driver reads a numbered parameter's name into
// a new Go string on every bind.
const (
	// sqlInsertEvent inserts an event the writer found no duplicate of
	// (see dedupe.go): no index on its key, so no random page per event.
	sqlInsertEvent = `INSERT INTO events (source, delivery_id, event_type, headers, payload, targets, created_at, trace, sealed)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`

	sqlInsertJob = `INSERT INTO jobs (event_id, source, target, run_at, created_at) VALUES (?, ?, ?, ?, ?)`

	// sqlInsertKeyedJob inserts a job of an event with an ordering key,
	// pending or blocked as the key's head says (sqlKeyHead). Events
	// without a key keep to sqlInsertJob, which binds less.
	sqlInsertKeyedJob = `INSERT INTO jobs (event_id, source, target, run_at, created_at, status, ordering_key, ordering_hold)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)`

	// sqlKeyHead reads the head of a (source, target, key): the one job
	// of the key that is not blocked and holds it (pending, running,
	// waiting to retry, or dead with ordering_hold).
	sqlKeyHead = `SELECT job_id FROM ordering_heads WHERE source = ?1 AND target = ?2 AND ordering_key = ?3`

	sqlSetHead = `INSERT INTO ordering_heads (source, target, ordering_key, job_id) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (source, target, ordering_key) DO UPDATE SET job_id = excluded.job_id`

	// sqlPromote makes the next blocked job of a key pending, due ?5, if
	// job ?4 is the key's head: the first step of handing the key on
	// once its head finished or was discarded. It reads one entry of the
	// blocked index, however many jobs wait behind the key.
	sqlPromote = `UPDATE jobs SET status = 'pending', run_at = ?5
WHERE id = (SELECT id FROM jobs INDEXED BY jobs_blocked
		WHERE status = 'blocked' AND source = ?1 AND target = ?2 AND ordering_key = ?3 ORDER BY id LIMIT 1)
	AND EXISTS (SELECT 1 FROM ordering_heads WHERE source = ?1 AND target = ?2 AND ordering_key = ?3 AND job_id = ?4)
RETURNING id`

	// sqlDropHead frees a key whose head ?4 finished with no job behind it.
	sqlDropHead = `DELETE FROM ordering_heads WHERE source = ?1 AND target = ?2 AND ordering_key = ?3 AND job_id = ?4`

	// sqlRehead and sqlReblock put a replayed job of a key back in its
	// chain: it becomes the head of a free key, and is blocked behind
	// another head (a job that released the key when it went dead).
	sqlRehead = `INSERT INTO ordering_heads (source, target, ordering_key, job_id)
SELECT source, target, ordering_key, id FROM jobs WHERE id = ?1 AND ordering_key IS NOT NULL
ON CONFLICT (source, target, ordering_key) DO NOTHING`

	sqlReblock = `UPDATE jobs SET status = 'blocked'
WHERE id = ?1 AND status = 'pending' AND ordering_key IS NOT NULL
	AND id <> (SELECT job_id FROM ordering_heads AS h
		WHERE h.source = jobs.source AND h.target = jobs.target AND h.ordering_key = jobs.ordering_key)`

	// sqlJobKey reads a job's key, before a discard deletes it.
	sqlJobKey = `SELECT source, target, ordering_key FROM jobs WHERE id = ?1`

	// sqlClaim takes the first ?4 ready jobs in (run_at, id) order: pending
	// and due, or running with an expired lease. ?5 is a JSON array of the
	// [source, target] pairs to take pending jobs of, each with its quota
	// as a third element when the claim has ClaimParams.Quotas; for each,
	// the subquery reads that route's range of the pending index, up to
	// ?4 rows, so pending jobs of routes not asked for are never read and
	// the cost does not depend on the backlog. Expired leases are read
	// from their own partial index, up to ?4 rows, filtered by ?6, the
	// same pairs or NULL for any route: running jobs are few (at most the
	// workers of the pools that claimed them). The candidates, at most
	// (routes+1)×?4 rows, are numbered per route in (run_at, id) order and
	// each route keeps its quota (?4 without one) before the outer ORDER
	// BY keeps ?4. (SQLite's LIMIT cannot read a column of the outer
	// query, hence the numbering rather than a LIMIT per route.)
	//
	// The limits are written "?4 + 0", not "?4": SQLite's planner reads a
	// bare bound LIMIT and then re-prepares the statement whenever its
	// value changes, and the pool's limit (its idle workers) changes on
	// nearly every claim. That re-prepare cost more than the claim itself
	// (312 µs against 68 µs a claim, measured for docs/BENCHMARKS-LOG.md).
	//
	// A running job taken again (its lease ran out) counts a history entry:
	// the jobs_lease_lost trigger writes its claim that never finished.
	sqlClaim = `UPDATE jobs
SET status = 'running', attempts = attempts + 1, fence = fence + 1, lease_owner = ?1, lease_until = ?2,
	claimed_at = ?3, history = history + (status = 'running')
WHERE id IN (
	SELECT id FROM (
		SELECT id, run_at, quota, row_number() OVER (PARTITION BY source, target ORDER BY run_at, id) AS n FROM (
			SELECT j.id, j.run_at, j.source, j.target, coalesce(r.value ->> 2, ?4) AS quota
			FROM json_each(?5) AS r, jobs AS j
			WHERE j.id IN (
				SELECT id FROM jobs INDEXED BY jobs_pending
				WHERE status = 'pending' AND source = r.value ->> 0 AND target = r.value ->> 1 AND run_at <= ?3
				ORDER BY run_at, id LIMIT ?4 + 0)
			UNION ALL
			SELECT e.id, e.run_at, e.source, e.target, coalesce((SELECT r.value ->> 2 FROM json_each(?6) AS r
				WHERE r.value ->> 0 = e.source AND r.value ->> 1 = e.target), ?4)
			FROM (
				SELECT id, run_at, source, target FROM jobs INDEXED BY jobs_leased
				WHERE status = 'running' AND lease_until <= ?3
					AND (?6 IS NULL OR EXISTS (SELECT 1 FROM json_each(?6) AS r
						WHERE r.value ->> 0 = jobs.source AND r.value ->> 1 = jobs.target))
				ORDER BY lease_until LIMIT ?4 + 0) AS e
		)
	)
	WHERE n <= quota
	ORDER BY run_at, id LIMIT ?4 + 0
)
RETURNING id, event_id, source, target, attempts, run_at, created_at, fence, replays, replay_base`

	// sqlPendingRoutes lists the routes that have pending jobs, for a
	// claim of any route, as sqlClaim's ?5.
	sqlPendingRoutes = `SELECT coalesce(json_group_array(json_array(source, target)), '[]')
FROM job_counts WHERE status = 'pending' AND jobs > 0`

	// sqlCountJobs and sqlCountEvents add what a transaction's enqueues
	// inserted to the counts (see writer.flushCounts).
	sqlCountJobs = `INSERT INTO job_counts (source, target, status, jobs) VALUES (?1, ?2, ?4, ?3)
ON CONFLICT (source, target, status) DO UPDATE SET jobs = jobs + excluded.jobs`

	sqlCountEvents = `INSERT INTO event_count (id, events) VALUES (1, ?1)
ON CONFLICT (id) DO UPDATE SET events = events + excluded.events`

	// sqlCountSealed adds the events a transaction inserted sealed under
	// key ?1 to seal_counts; the schema's triggers count the rest.
	sqlCountSealed = `INSERT INTO seal_counts (key_id, kind, n) VALUES (?1, 'event', ?2)
ON CONFLICT (key_id, kind) DO UPDATE SET n = n + excluded.n`

	// sqlClaimEvents reads the events of the claimed jobs, ?1 a JSON array
	// of their ids: one statement however many jobs were claimed.
	sqlClaimEvents = `SELECT id, delivery_id, event_type, headers, payload, trace, sealed FROM events
WHERE id IN (SELECT value FROM json_each(?1))`

	// sqlExtend, sqlFinish and sqlHandBack match the claim, not only the
	// owner: the fence token tells a pool's current claim from its stale
	// one after a pause longer than the lease.
	sqlExtend = `UPDATE jobs SET lease_until = ?1 WHERE id = ?2 AND lease_owner = ?3 AND fence = ?4 AND status = 'running'`

	// sqlFinish records an outcome under the fence. A retry (pending) gets
	// its run_at and no finished_at; done and dead are stamped finished.
	// A run handed back (?8 = 1) gives its attempt back and keeps the job's
	// last error, which its stop did not cause.
	sqlFinish = `UPDATE jobs
SET status = ?1,
	run_at = CASE WHEN ?1 = 'pending' THEN ?2 ELSE run_at END,
	last_error = CASE WHEN ?8 THEN last_error ELSE ?3 END,
	attempts = max(attempts - ?8, 0),
	lease_owner = NULL, lease_until = NULL,
	finished_at = CASE WHEN ?1 = 'pending' THEN NULL ELSE ?4 END,
	history = history + 1
WHERE id = ?5 AND lease_owner = ?6 AND fence = ?7 AND status = 'running'
RETURNING ordering_key, ordering_hold, source, target`

	// sqlHandBack returns a claim whose delivery never began: no attempt,
	// no history entry.
	sqlHandBack = `UPDATE jobs
SET status = 'pending', run_at = ?1, attempts = max(attempts - 1, 0), lease_owner = NULL, lease_until = NULL
WHERE id = ?2 AND lease_owner = ?3 AND fence = ?4 AND status = 'running'`

	// A replay keeps the attempts counting (history and X-Webhook-Attempt
	// number across replays) and starts a new budget from them.
	sqlReplay = `UPDATE jobs
SET status = 'pending', replays = replays + 1, replay_base = attempts, run_at = ?1,
	lease_owner = NULL, lease_until = NULL, finished_at = NULL
WHERE id = ?2 AND status = 'dead'
RETURNING ordering_key`

	sqlJobState = `SELECT status, event_id FROM jobs WHERE id = ?1`

	// sqlReplayDead replays up to ?4 dead jobs matching the filter: one
	// chunk of a bulk replay. The routes come from job_counts (a few rows),
	// and each is one range of the dead jobs' partial index, so a chunk
	// never reads past the rows it changes, however many dead jobs other
	// routes hold or earlier chunks replayed.
	sqlReplayDead = `UPDATE jobs
SET status = 'pending', replays = replays + 1, replay_base = attempts, run_at = ?1,
	lease_owner = NULL, lease_until = NULL, finished_at = NULL
WHERE id IN (
	SELECT j.id FROM job_counts AS c CROSS JOIN jobs AS j INDEXED BY jobs_dead
	WHERE c.status = 'dead' AND c.jobs > 0 AND (?2 = '' OR c.source = ?2) AND (?3 = '' OR c.target = ?3)
		AND j.status = 'dead' AND j.source = c.source AND j.target = c.target
	LIMIT ?4)
RETURNING id, ordering_key`

	// sqlDiscardDead and sqlDiscardPending delete up to ?3 jobs of the
	// status matching the filter, as sqlReplayDead finds them: one chunk
	// of a bulk discard. Their attempts go by ON DELETE CASCADE; the
	// caller deletes the events left without a job. sqlDiscardPending
	// keeps ?4, a JSON array of the jobs that the discard's earlier chunks
	// made pending by handing on the ordering keys of the heads they
	// deleted: those were blocked when the discard began, and they go
	// ahead.
	sqlDiscardDead = `DELETE FROM jobs WHERE id IN (
	SELECT j.id FROM job_counts AS c CROSS JOIN jobs AS j INDEXED BY jobs_dead
	WHERE c.status = 'dead' AND c.jobs > 0 AND (?1 = '' OR c.source = ?1) AND (?2 = '' OR c.target = ?2)
		AND j.status = 'dead' AND j.source = c.source AND j.target = c.target
	LIMIT ?3)
RETURNING event_id, id, source, target, ordering_key`

	sqlDiscardPending = `DELETE FROM jobs WHERE id IN (
	SELECT j.id FROM job_counts AS c CROSS JOIN jobs AS j INDEXED BY jobs_pending
	WHERE c.status = 'pending' AND c.jobs > 0 AND (?1 = '' OR c.source = ?1) AND (?2 = '' OR c.target = ?2)
		AND j.status = 'pending' AND j.source = c.source AND j.target = c.target
		AND j.id NOT IN (SELECT value FROM json_each(?4))
	LIMIT ?3)
RETURNING event_id, id, source, target, ordering_key`

	sqlDeleteJob = `DELETE FROM jobs WHERE id = ?1`

	sqlDeleteEventIfEmpty = `DELETE FROM events WHERE id = ?1 AND NOT EXISTS (SELECT 1 FROM jobs WHERE event_id = ?1)`

	// sqlPurgeJobs deletes the oldest done jobs through their partial
	// index; their attempts go by ON DELETE CASCADE.
	sqlPurgeJobs = `DELETE FROM jobs WHERE id IN (
	SELECT id FROM jobs INDEXED BY jobs_done
	WHERE status = 'done' AND finished_at < ?1 ORDER BY finished_at LIMIT ?2)
RETURNING event_id`

	// sqlPurgeBareEvents deletes events stored without any job once they
	// are older than the cutoff: until then they are dedupe memory.
	sqlPurgeBareEvents = `DELETE FROM events WHERE id IN (
	SELECT id FROM events INDEXED BY events_no_jobs WHERE targets = 0 AND created_at < ?1 LIMIT ?2)`
)

// sqlInsertAttempt writes entry history-1 (the update just counted it)
// into its ring slot, replacing the entry queue.MaxHistory before it. An
// upsert, not INSERT OR REPLACE: the replaced entry's sealed error is
// taken out of seal_counts by the update trigger, where a REPLACE fires
// no trigger for the row it deletes.
var sqlInsertAttempt = `INSERT INTO attempts (job_id, slot, seq, attempt, started_at, duration_ns, outcome, error, status)
SELECT id, (history - 1) % ` + strconv.Itoa(queue.MaxHistory) + `, history - 1, attempts + ?2, ?3, ?4, ?5, ?6, ?7
FROM jobs WHERE id = ?1
ON CONFLICT (job_id, slot) DO UPDATE SET seq = excluded.seq, attempt = excluded.attempt, started_at = excluded.started_at,
	duration_ns = excluded.duration_ns, outcome = excluded.outcome, error = excluded.error, status = excluded.status`

// stmts are the writer's prepared statements.
type stmts struct {
	begin, commit, rollback, savepoint, release, rollbackTo *stmt

	insertEvent, insertJob                 *stmt
	keyOwner, allKeys, newKeys, countKeys  *stmt
	goneKeys, clearGone, dataVersion       *stmt
	claim, claimEvents, extend             *stmt
	finish, insertAttempt                  *stmt
	handBack, replay, jobState, replayDead *stmt
	deleteJob, deleteEventIfEmpty          *stmt
	purgeJobs, purgeBareEvents             *stmt
	pendingRoutes, countJobs, countEvents  *stmt
	countSealed                            *stmt
	discardDead, discardPending            *stmt
	insertKeyedJob, keyHead, setHead       *stmt
	promote, dropHead, rehead, reblock     *stmt
	jobKey                                 *stmt
}

func (st *stmts) list() []struct {
	p   **stmt
	sql string
} {
	return []struct {
		p   **stmt
		sql string
	}{
		{&st.begin, "BEGIN IMMEDIATE"},
		{&st.commit, "COMMIT"},
		{&st.rollback, "ROLLBACK"},
		{&st.savepoint, "SAVEPOINT request"},
		{&st.release, "RELEASE request"},
		{&st.rollbackTo, "ROLLBACK TO request"},
		{&st.insertEvent, sqlInsertEvent},
		{&st.keyOwner, sqlKeyOwner},
		{&st.allKeys, sqlAllKeys},
		{&st.newKeys, sqlNewKeys},
		{&st.countKeys, sqlCountKeys},
		{&st.goneKeys, sqlGoneKeys},
		{&st.clearGone, sqlClearGone},
		{&st.dataVersion, sqlDataVersion},
		{&st.insertJob, sqlInsertJob},
		{&st.claim, sqlClaim},
		{&st.claimEvents, sqlClaimEvents},
		{&st.extend, sqlExtend},
		{&st.finish, sqlFinish},
		{&st.insertAttempt, sqlInsertAttempt},
		{&st.handBack, sqlHandBack},
		{&st.replay, sqlReplay},
		{&st.jobState, sqlJobState},
		{&st.replayDead, sqlReplayDead},
		{&st.deleteJob, sqlDeleteJob},
		{&st.deleteEventIfEmpty, sqlDeleteEventIfEmpty},
		{&st.purgeJobs, sqlPurgeJobs},
		{&st.purgeBareEvents, sqlPurgeBareEvents},
		{&st.pendingRoutes, sqlPendingRoutes},
		{&st.countJobs, sqlCountJobs},
		{&st.countEvents, sqlCountEvents},
		{&st.countSealed, sqlCountSealed},
		{&st.discardDead, sqlDiscardDead},
		{&st.discardPending, sqlDiscardPending},
		{&st.insertKeyedJob, sqlInsertKeyedJob},
		{&st.keyHead, sqlKeyHead},
		{&st.setHead, sqlSetHead},
		{&st.promote, sqlPromote},
		{&st.dropHead, sqlDropHead},
		{&st.rehead, sqlRehead},
		{&st.reblock, sqlReblock},
		{&st.jobKey, sqlJobKey},
	}
}

// prepare prepares every statement on the driver connection c.
func (st *stmts) prepare(ctx context.Context, c driver.ConnPrepareContext) error {
	for _, s := range st.list() {
		ds, err := c.PrepareContext(ctx, s.sql)
		if err != nil {
			return err
		}
		d, ok := ds.(driverStmt)
		if !ok {
			ds.Close()
			return fmt.Errorf("driver statement %T cannot run with a context", ds)
		}
		*s.p = &stmt{ds: d}
	}
	return nil
}

// close closes the prepared statements; their connection is going away.
// Like every use of a stmt, it runs inside the connection's Raw.
func (st *stmts) close() {
	for _, s := range st.list() {
		if *s.p != nil {
			(*s.p).ds.Close()
			*s.p = nil
		}
	}
}

// driverStmt is what the writer needs of a driver's prepared statement.
type driverStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

// stmt is a statement prepared on the write connection's driver
// connection. The writer runs it through the driver directly, inside
// sql.Conn.Raw, rather than through database/sql, whose argument
// conversion, locking and result wrappers cost about 10 allocations and
// a fifteenth of the writer's CPU per enqueue. Only the writer goroutine
// uses it, and only while it holds the connection in Raw.
type stmt struct {
	ds   driverStmt
	args []driver.NamedValue // reused by every call
}

// Exec runs the statement. Arguments must be driver values the driver
// binds as they are: int64, string, []byte or nil.
func (s *stmt) Exec(args ...driver.Value) (driver.Result, error) {
	return s.ds.ExecContext(context.Background(), s.bind(args))
}

// Query runs the statement and returns its rows; the caller closes them
// before the statement is used again.
func (s *stmt) Query(args ...driver.Value) (driver.Rows, error) {
	return s.ds.QueryContext(context.Background(), s.bind(args))
}

func (s *stmt) bind(args []driver.Value) []driver.NamedValue {
	s.args = s.args[:0]
	for i, a := range args {
		s.args = append(s.args, driver.NamedValue{Ordinal: i + 1, Value: a})
	}
	return s.args
}
