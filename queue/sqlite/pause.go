package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/storekit"
)

// Pauses are operators' writes, rare and off the hot path: each runs on
// the writer between batches (writeTx), in its own transaction.
const (
	// An existing pause keeps its paused_at.
	sqlPause = `INSERT INTO pauses (source, target, paused_at) VALUES (?1, ?2, ?3)
ON CONFLICT (source, target) DO NOTHING`

	// An empty target lifts every pause of the source.
	sqlResume = `DELETE FROM pauses WHERE source = ?1 AND (?2 = '' OR target = ?2)`

	sqlListPauses = `SELECT source, target, paused_at FROM pauses ORDER BY source, target`
)

// Pause pauses target of source, or the whole source when target is empty.
func (s *Store) Pause(ctx context.Context, source, target string) error {
	if err := storekit.CheckPause("pause", source); err != nil {
		return err
	}
	err := s.writeTx(ctx, func(tx *sql.Tx) (bool, error) {
		_, err := tx.ExecContext(ctx, sqlPause, source, target, ms(s.cfg.Now()))
		return false, err
	})
	if err != nil {
		return fmt.Errorf("pause %s: %w", storekit.PauseName(source, target), err)
	}
	return nil
}

// Resume lifts the pause of target of source, or every pause of source
// when target is empty.
func (s *Store) Resume(ctx context.Context, source, target string) error {
	if err := storekit.CheckPause("resume", source); err != nil {
		return err
	}
	err := s.writeTx(ctx, func(tx *sql.Tx) (bool, error) {
		res, err := tx.ExecContext(ctx, sqlResume, source, target)
		if err != nil {
			return false, err
		}
		n, err := res.RowsAffected()
		return n > 0, err
	})
	if err != nil {
		return fmt.Errorf("resume %s: %w", storekit.PauseName(source, target), err)
	}
	return nil
}

// ListPauses returns every pause, by source, then target.
func (s *Store) ListPauses(ctx context.Context) ([]queue.Pause, error) {
	var out []queue.Pause
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, sqlListPauses)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var p queue.Pause
			var at int64
			if err := rows.Scan(&p.Source, &p.Target, &at); err != nil {
				return err
			}
			p.Since = fromMS(at)
			out = append(out, p)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("list pauses: %w", err)
	}
	return out, nil
}
