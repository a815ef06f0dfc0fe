package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/caddywebhook/caddywebhook/queue"
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
