package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/storekit"
)

// The operators' writes that deliver a stored event again. They are rare
// and not on the hot path, so they run on the writer between batches
// (onWriter), each in its own transaction, rather than as request kinds
// of the group commit.
const (
	// sqlResendDone makes a done job dead so that sqlReplay, in the same
	// transaction, replays it: a resend is a replay, with whatever a
	// replay does to the attempt count, the history and the budget.
	sqlResendDone = `UPDATE jobs SET status = 'dead' WHERE id = ?1 AND status = 'done'`

	sqlEventSource = `SELECT source FROM events WHERE id = ?1`

	sqlAddJob = `INSERT INTO jobs (event_id, source, target, run_at, created_at) VALUES (?1, ?2, ?3, ?4, ?5)`

	// sqlCountJob counts the added job in events.targets, so the event
	// leaves events_no_jobs and is never purged as a bare event while a
	// job refers to it.
	sqlCountJob = `UPDATE events SET targets = targets + 1 WHERE id = ?1`

	// sqlRequeue is sqlReplay for a done job as well as a dead one, due
	// at ?1: one item of a Requeue.
	sqlRequeue = `UPDATE jobs
SET status = 'pending', replays = replays + 1, replay_base = attempts, run_at = ?1,
	lease_owner = NULL, lease_until = NULL, finished_at = NULL
WHERE id = ?2 AND status IN ('done', 'dead')
RETURNING ordering_key`
)

// writeTx runs f in a transaction on the write connection, between the
// writer's batches, and signals Ready after the commit if ready is set.
func (s *Store) writeTx(ctx context.Context, f func(tx *sql.Tx) (ready bool, err error)) error {
	return s.onWriter(ctx, func(w *writer) error {
		tx, err := w.conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		ready, err := f(tx)
		if err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		if ready {
			s.signalReady()
		}
		return nil
	})
}

// Resend gives the done or dead job id a fresh attempt budget, due now.
func (s *Store) Resend(ctx context.Context, id int64) error {
	err := s.writeTx(ctx, func(tx *sql.Tx) (bool, error) {
		if _, err := tx.ExecContext(ctx, sqlResendDone, id); err != nil {
			return false, err
		}
		res, err := tx.ExecContext(ctx, sqlReplay, ms(s.cfg.Now()), id)
		if err != nil {
			return false, err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			// A resent job of an ordering key goes back in its chain.
			for _, q := range []string{sqlRehead, sqlReblock} {
				if _, err := tx.ExecContext(ctx, q, id); err != nil {
					return false, err
				}
			}
			return true, nil
		}
		var status string
		err = tx.QueryRowContext(ctx, sqlJobState, id).Scan(&status, new(int64))
		if errors.Is(err, sql.ErrNoRows) {
			return false, queue.ErrNotFound
		}
		if err != nil {
			return false, err
		}
		return false, fmt.Errorf("%w: it is %s", queue.ErrNotFinished, status)
	})
	if err != nil {
		return fmt.Errorf("resend job %d: %w", id, err)
	}
	return nil
}

// AddJob makes a new pending job, due now, delivering event eventID to
// target.
func (s *Store) AddJob(ctx context.Context, eventID int64, target string) (int64, error) {
	var id int64
	err := s.writeTx(ctx, func(tx *sql.Tx) (bool, error) {
		now := ms(s.cfg.Now())
		var err error
		id, err = addJob(ctx, tx, eventID, target, now, now)
		return err == nil, err
	})
	if err != nil {
		return 0, fmt.Errorf("add job for event %d: %w", eventID, err)
	}
	return id, nil
}

// addJob adds a pending job for event eventID and target, due at runAt,
// inside tx; queue.ErrEventNotFound if there is no such event.
func addJob(ctx context.Context, tx *sql.Tx, eventID int64, target string, runAt, now int64) (int64, error) {
	var source string
	err := tx.QueryRowContext(ctx, sqlEventSource, eventID).Scan(&source)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, queue.ErrEventNotFound
	}
	if err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, sqlAddJob, eventID, source, target, runAt, now)
	if err != nil {
		return 0, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, sqlCountJob, eventID); err != nil {
		return 0, err
	}
	// Enqueue's jobs are counted by the writer once per commit; this one
	// is counted here, in its own transaction.
	if _, err := tx.ExecContext(ctx, sqlCountJobs, source, target, 1, string(queue.StatusPending)); err != nil {
		return 0, err
	}
	return id, nil
}

// Requeue delivers stored events again, each item due at its RunAt, in
// chunks of queue.RequeueChunk items, each its own transaction on the
// writer between its batches.
func (s *Store) Requeue(ctx context.Context, items []queue.Requeue) ([]int64, error) {
	if err := storekit.CheckRequeue(items); err != nil {
		return nil, err
	}
	queued := make([]int64, len(items))
	err := storekit.InChunks(ctx, len(items), queue.RequeueChunk, func(lo, hi int) error {
		ids := make([]int64, hi-lo)
		err := s.writeTx(ctx, func(tx *sql.Tx) (bool, error) {
			now := ms(s.cfg.Now())
			ready := false
			for i, it := range items[lo:hi] {
				runAt := now
				if !it.RunAt.IsZero() {
					runAt = ms(it.RunAt)
				}
				ready = ready || runAt <= now
				if it.JobID == 0 {
					id, err := addJob(ctx, tx, it.EventID, it.Target, runAt, now)
					if errors.Is(err, queue.ErrEventNotFound) {
						continue // purged since the caller read it
					}
					if err != nil {
						return false, err
					}
					ids[i] = id
					continue
				}
				var key sql.NullString
				err := tx.QueryRowContext(ctx, sqlRequeue, runAt, it.JobID).Scan(&key)
				if errors.Is(err, sql.ErrNoRows) {
					continue // no longer done or dead
				}
				if err != nil {
					return false, err
				}
				ids[i] = it.JobID
				if key.Valid {
					// A job of an ordering key goes back in its chain.
					for _, q := range []string{sqlRehead, sqlReblock} {
						if _, err := tx.ExecContext(ctx, q, it.JobID); err != nil {
							return false, err
						}
					}
				}
			}
			return ready, nil
		})
		if err != nil {
			return err
		}
		copy(queued[lo:hi], ids)
		return nil
	})
	if err != nil {
		return queued, fmt.Errorf("requeue: %w", err)
	}
	return queued, nil
}
