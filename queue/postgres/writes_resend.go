package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/storekit"
	"github.com/jackc/pgx/v5"
)

// The operators' writes that deliver a stored event again. They are rare
// and not on the hot path: each is one short transaction.
const (
	// sqlResendDone makes a done job dead so that sqlReplay, in the same
	// transaction, replays it: a resend is a replay, with whatever a
	// replay does to the attempt count, the history and the budget. FOR
	// UPDATE is implied by the UPDATE; a running job is left alone.
	sqlResendDone = `UPDATE jobs SET status = 'dead' WHERE id = $1 AND status = 'done'`

	// sqlAddJob adds a job for an event and counts it in events.targets,
	// so the event leaves events_no_jobs and is never purged as a bare
	// event while a job refers to it. No row: no such event.
	sqlAddJob = `WITH ev AS (
	UPDATE events SET targets = targets + 1 WHERE id = $1 RETURNING id, source
)
INSERT INTO jobs (event_id, source, target, run_at, created_at)
SELECT id, source, $2, $3, $3 FROM ev
RETURNING id`

	// sqlRequeueJobs is sqlReplay for a chunk of done and dead jobs ($1),
	// each due at its time of $2, locked in id order first as the fenced
	// writes lock theirs. It returns the jobs it queued and whether each
	// has an ordering key.
	sqlRequeueJobs = `WITH ` + lockInOrder + `
UPDATE jobs AS j
SET status = 'pending', replays = j.replays + 1, replay_base = j.attempts, run_at = v.run_at,
	lease_owner = NULL, lease_until = NULL, finished_at = NULL
FROM unnest($1::bigint[], $2::timestamptz[]) AS v (id, run_at)
WHERE j.id = ANY (ARRAY(SELECT id FROM lk)) AND j.id = v.id AND j.status IN ('done', 'dead')
RETURNING j.id, j.ordering_key IS NOT NULL`

	// sqlRequeueAdds adds a job for each (event $1, target $2) of a chunk,
	// due at $3, created at $4, and counts them in events.targets as
	// sqlAddJob does; an event that is gone adds nothing. It returns each
	// job with the index of its item ($5).
	sqlRequeueAdds = `WITH v AS (
	SELECT * FROM unnest($1::bigint[], $2::text[], $3::timestamptz[], $5::int[]) AS v (event_id, target, run_at, item)
), ev AS (
	UPDATE events AS e SET targets = e.targets + c.n
	FROM (SELECT event_id, count(*) AS n FROM v GROUP BY event_id ORDER BY event_id) AS c
	WHERE e.id = c.event_id
	RETURNING e.id, e.source
)
INSERT INTO jobs (event_id, source, target, run_at, created_at)
SELECT v.event_id, ev.source, v.target, v.run_at, $4 FROM v JOIN ev ON ev.id = v.event_id
ORDER BY v.item
RETURNING id, event_id, target`
)

// Resend gives the done or dead job id a fresh attempt budget, due now.
func (s *Store) Resend(ctx context.Context, id int64) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if s.isClosed() {
		return queue.ErrClosed
	}
	op := fmt.Sprintf("resend job %d", id)
	var replayed bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlResendDone, id); err != nil {
			return err
		}
		now := ms(s.cfg.Now())
		tag, err := tx.Exec(ctx, sqlReplay, id, now)
		if err != nil {
			return err
		}
		// A resent job of an ordering key goes back in its chain.
		if replayed = tag.RowsAffected() == 1; replayed {
			_, err = rechain(ctx, tx, []int64{id}, now)
		}
		return err
	})
	if err != nil {
		return s.fail(op, err)
	}
	if replayed {
		s.madeReady()
		return nil
	}
	status, err := s.jobStatus(ctx, id)
	if err != nil {
		return s.fail(op, err)
	}
	return fmt.Errorf("%s: %w: it is %s", op, queue.ErrNotFinished, status)
}

// Requeue delivers stored events again, each item due at its RunAt, in
// chunks of queue.RequeueChunk items, each its own transaction.
func (s *Store) Requeue(ctx context.Context, items []queue.Requeue) ([]int64, error) {
	if err := storekit.CheckRequeue(items); err != nil {
		return nil, err
	}
	if s.isClosed() {
		return nil, queue.ErrClosed
	}
	queued := make([]int64, len(items))
	err := storekit.InChunks(ctx, len(items), queue.RequeueChunk, func(lo, hi int) error {
		ctx, cancel := s.bound(ctx)
		defer cancel()
		now := ms(s.cfg.Now())
		var jobIDs, eventIDs []int64
		var jobAt, addAt []time.Time
		var targets []string
		var jobItem, addItem []int32
		for i, it := range items[lo:hi] {
			at := now
			if !it.RunAt.IsZero() {
				at = ms(it.RunAt)
			}
			if it.JobID != 0 {
				jobIDs, jobAt, jobItem = append(jobIDs, it.JobID), append(jobAt, at), append(jobItem, int32(i))
			} else {
				eventIDs, targets, addAt, addItem = append(eventIDs, it.EventID), append(targets, it.Target), append(addAt, at), append(addItem, int32(i))
			}
		}
		ids := make([]int64, hi-lo)
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if len(jobIDs) > 0 {
				rows, err := tx.Query(ctx, sqlRequeueJobs, jobIDs, jobAt)
				if err != nil {
					return err
				}
				at := make(map[int64]int32, len(jobIDs))
				for k, id := range jobIDs {
					at[id] = jobItem[k]
				}
				var keyed []int64
				var id int64
				var hasKey bool
				if _, err := pgx.ForEachRow(rows, []any{&id, &hasKey}, func() error {
					ids[at[id]] = id
					if hasKey {
						keyed = append(keyed, id)
					}
					return nil
				}); err != nil {
					return err
				}
				// A job of an ordering key goes back in its chain.
				if _, err := rechain(ctx, tx, keyed, now); err != nil {
					return err
				}
			}
			if len(eventIDs) > 0 {
				rows, err := tx.Query(ctx, sqlRequeueAdds, eventIDs, targets, addAt, now, addItem)
				if err != nil {
					return err
				}
				// Each row is matched to its item by event and target: an
				// event that is gone has none.
				type add struct {
					event  int64
					target string
				}
				waiting := make(map[add][]int32, len(eventIDs))
				for k := range eventIDs {
					a := add{eventIDs[k], targets[k]}
					waiting[a] = append(waiting[a], addItem[k])
				}
				var id int64
				var a add
				if _, err := pgx.ForEachRow(rows, []any{&id, &a.event, &a.target}, func() error {
					if w := waiting[a]; len(w) > 0 {
						ids[w[0]], waiting[a] = id, w[1:]
					}
					return nil
				}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return s.fail("requeue", err)
		}
		copy(queued[lo:hi], ids)
		for _, id := range ids {
			if id != 0 {
				s.madeReady()
				break
			}
		}
		return nil
	})
	return queued, err
}

// AddJob makes a new pending job, due now, delivering event eventID to
// target.
func (s *Store) AddJob(ctx context.Context, eventID int64, target string) (int64, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if s.isClosed() {
		return 0, queue.ErrClosed
	}
	var id int64
	err := s.pool.QueryRow(ctx, sqlAddJob, eventID, target, ms(s.cfg.Now())).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("add job for event %d: %w", eventID, queue.ErrEventNotFound)
	}
	if err != nil {
		return 0, s.fail(fmt.Sprintf("add job for event %d", eventID), err)
	}
	s.madeReady()
	return id, nil
}
