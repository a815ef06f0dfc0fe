package postgres

import (
	"context"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/storekit"
	"github.com/jackc/pgx/v5"
)

// Pauses are operators' writes, rare and off the hot path: each is one
// statement. Every instance sharing the schema reads the same table.
const (
	// An existing pause keeps its paused_at.
	sqlPause = `INSERT INTO pauses (source, target, paused_at) VALUES ($1, $2, $3)
ON CONFLICT (source, target) DO NOTHING`

	// An empty target lifts every pause of the source.
	sqlResume = `DELETE FROM pauses WHERE source = $1 AND ($2 = '' OR target = $2)`

	sqlListPauses = `SELECT source, target, paused_at FROM pauses ORDER BY source, target`
)

// Pause pauses target of source, or the whole source when target is empty.
func (s *Store) Pause(ctx context.Context, source, target string) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := storekit.CheckPause("pause", source); err != nil {
		return err
	}
	if s.isClosed() {
		return queue.ErrClosed
	}
	if _, err := s.pool.Exec(ctx, sqlPause, source, target, ms(s.cfg.Now())); err != nil {
		return s.fail("pause "+storekit.PauseName(source, target), err)
	}
	return nil
}

// Resume lifts the pause of target of source, or every pause of source
// when target is empty. It wakes the pools of every instance, through
// the same NOTIFY as an enqueue, when it lifted one.
func (s *Store) Resume(ctx context.Context, source, target string) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := storekit.CheckPause("resume", source); err != nil {
		return err
	}
	if s.isClosed() {
		return queue.ErrClosed
	}
	tag, err := s.pool.Exec(ctx, sqlResume, source, target)
	if err != nil {
		return s.fail("resume "+storekit.PauseName(source, target), err)
	}
	if tag.RowsAffected() > 0 {
		s.madeReady()
	}
	return nil
}

// ListPauses returns every pause, by source, then target.
func (s *Store) ListPauses(ctx context.Context) ([]queue.Pause, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var out []queue.Pause
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, sqlListPauses)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (queue.Pause, error) {
			var p queue.Pause
			err := row.Scan(&p.Source, &p.Target, &p.Since)
			return p, err
		})
		return err
	})
	if err != nil {
		return nil, s.fail("list pauses", err)
	}
	return out, nil
}
