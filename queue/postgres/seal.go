package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/storekit"
)

// Encryption at rest: the store's keys, its counts of sealed values, and
// the rekey's reads and writes (storekit.RunRekey walks them). The
// sealing itself happens where values are written and read, through the
// store's storekit.Sealer.
//
// What a rekey reaches: every value readable through SQL (SELECT,
// pg_dump, COPY, logical replication) is sealed once it ends. What it
// cannot: an UPDATE leaves the old row version in the table's files until
// vacuum frees the space and new rows overwrite it, and the WAL, its
// archives, base backups and physical replicas keep what was written
// before. Those need the server's own disk and backup encryption, and a
// VACUUM FULL of events, jobs and attempts if old row versions must go
// (docs/OPERATIONS.md).

const (
	sqlSecret = `SELECT value FROM store_secrets WHERE name = 'ordering'`

	// sqlMarkPlain notes that the store writes plain values from now on;
	// $1 counts a new generation even when the flag is set already.
	sqlMarkPlain = `UPDATE seal_state SET plain_rows = true, plain_gen = plain_gen + 1
WHERE id = 1 AND ($1 OR NOT plain_rows)`

	sqlSealCounts = `SELECT key_id, kind, sum(n)::bigint FROM seal_counts GROUP BY key_id, kind HAVING sum(n) <> 0`

	sqlSealState = `SELECT plain_rows, plain_gen, rekey_target, rekey_table, rekey_after FROM seal_state WHERE id = 1`

	sqlRekeyEvents = `SELECT id, source, delivery_id, headers, payload, sealed FROM events
WHERE id > $1 ORDER BY id LIMIT $2`
	sqlRekeyJobs = `SELECT id, last_error FROM jobs
WHERE id > $1 AND last_error <> '' ORDER BY id LIMIT $2`
	sqlRekeyAttempts = `SELECT id, job_id, error FROM attempts
WHERE id > $1 AND error <> '' ORDER BY id LIMIT $2`

	// The rekey's compare-and-swaps, a chunk in one statement each: a row
	// is written only if it still holds what the walk read. Jobs are
	// locked in id order first, as every fenced write locks them (see
	// lockInOrder), so a chunk never deadlocks with a Finish.
	sqlSwapSecret = `UPDATE store_secrets SET value = $1 WHERE name = 'ordering' AND value = $2`
	sqlSwapEvents = `UPDATE events AS e SET headers = s.headers, payload = s.payload, sealed = s.sealed
FROM unnest($1::bigint[], $2::bytea[], $3::bytea[], $4::bytea[], $5::bytea[]) AS s (id, headers, payload, sealed, old)
WHERE e.id = s.id AND e.sealed IS NOT DISTINCT FROM s.old`
	sqlSwapJobs = `WITH ` + lockInOrder + `
UPDATE jobs AS j SET last_error = s.text
FROM unnest($1::bigint[], $2::text[], $3::text[]) AS s (id, text, old)
WHERE j.id = ANY (ARRAY(SELECT id FROM lk)) AND j.id = s.id AND j.last_error = s.old`
	sqlSwapAttempts = `UPDATE attempts AS a SET error = s.text
FROM unnest($1::bigint[], $2::text[], $3::text[]) AS s (id, text, old)
WHERE a.id = s.id AND a.error = s.old`
	sqlRekeyCursor = `UPDATE seal_state SET rekey_target = $1, rekey_table = $2, rekey_after = $3 WHERE id = 1`
	sqlRekeyEnd    = `UPDATE seal_state SET rekey_target = NULL, rekey_table = 0, rekey_after = 0,
	plain_rows = CASE WHEN $1 <> '' AND plain_gen = $2 THEN false ELSE plain_rows END
WHERE id = 1`

	// sqlRekeyLock is the session lock that lets one instance rekey the
	// schema at a time.
	sqlRekeyLock   = `SELECT pg_try_advisory_lock(hashtextextended('caddywebhook rekey ' || current_schema(), 0))`
	sqlRekeyUnlock = `SELECT pg_advisory_unlock(hashtextextended('caddywebhook rekey ' || current_schema(), 0))`
)

// useKeys makes the Sealer of k and, when k writes plain, marks the
// schema as holding plain values before the store writes any. bump counts
// a new generation of the mark (see sqlMarkPlain).
func (s *Store) useKeys(ctx context.Context, k queue.Keys, bump bool) error {
	var stored []byte
	if err := s.pool.QueryRow(ctx, sqlSecret).Scan(&stored); err != nil {
		return s.fail("read the ordering-key secret", err)
	}
	sl, err := storekit.NewSealer(k, stored)
	if err != nil {
		return fmt.Errorf("open keys: %w", err)
	}
	if !k.Sealing() {
		if _, err := s.pool.Exec(ctx, sqlMarkPlain, bump); err != nil {
			return s.fail("open keys", err)
		}
	}
	s.sealer.Store(sl)
	return nil
}

// SetKeys replaces the store's keys. It fails, changing nothing, when the
// ordering-key secret is sealed under a key k lacks.
func (s *Store) SetKeys(ctx context.Context, k queue.Keys) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if s.isClosed() {
		return queue.ErrClosed
	}
	s.keysMu.Lock()
	defer s.keysMu.Unlock()
	if err := s.useKeys(ctx, k, s.sealer.Load().Sealing()); err != nil {
		return fmt.Errorf("set keys: %w", err)
	}
	return nil
}

// sealCounts reads the sealed values per key id (with the ordering-key
// secret) and the sealed events, from the folded delta rows.
func sealCounts(ctx context.Context, tx pgx.Tx) (storekit.SealCounts, error) {
	var c storekit.SealCounts
	rows, err := tx.Query(ctx, sqlSealCounts)
	if err != nil {
		return c, err
	}
	var id, kind string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&id, &kind, &n}, func() error {
		c.Add(id, kind, n)
		return nil
	})
	if err != nil {
		return c, err
	}
	var stored []byte
	if err := tx.QueryRow(ctx, sqlSecret).Scan(&stored); err != nil {
		return c, err
	}
	c.AddSecret(stored)
	return c, nil
}

// Rekey re-seals every stored value not under the first key, or writes
// every sealed one plain (storekit.RunRekey). One instance of those
// sharing the schema runs it at a time: the others get
// queue.ErrRekeyRunning.
func (s *Store) Rekey(ctx context.Context, p queue.RekeyParams) (queue.RekeyProgress, error) {
	if s.isClosed() {
		return queue.RekeyProgress{}, queue.ErrClosed
	}
	// The lock is a session's: one connection holds it for the walk.
	lctx, cancel := s.bound(ctx)
	conn, err := s.pool.Acquire(lctx)
	cancel()
	if err != nil {
		return queue.RekeyProgress{}, s.fail("rekey", err)
	}
	defer conn.Release()
	var locked bool
	lctx, cancel = s.bound(ctx)
	err = conn.QueryRow(lctx, sqlRekeyLock).Scan(&locked)
	cancel()
	if err != nil {
		return queue.RekeyProgress{}, s.fail("rekey", err)
	}
	if !locked {
		return queue.RekeyProgress{}, queue.ErrRekeyRunning
	}
	defer func() {
		uctx, cancel := s.bound(context.WithoutCancel(ctx))
		defer cancel()
		if _, err := conn.Exec(uctx, sqlRekeyUnlock); err != nil {
			// A lock that could not be given back goes with its session.
			conn.Conn().Close(uctx)
		}
	}()
	prog, err := storekit.RunRekey(ctx, rekeyer{s}, s.sealer.Load, p)
	if err != nil {
		return prog, s.redact.Error(err)
	}
	return prog, nil
}

// rekeyer is the store's storekit.Rekeyer. Each call is bounded by the
// store's Timeout.
type rekeyer struct{ s *Store }

var _ storekit.Rekeyer = rekeyer{}

func (r rekeyer) RekeyState(ctx context.Context) (storekit.RekeyState, error) {
	ctx, cancel := r.s.bound(ctx)
	defer cancel()
	var st storekit.RekeyState
	var target *string
	var c storekit.RekeyCursor
	err := r.s.pool.QueryRow(ctx, sqlSealState).Scan(&st.PlainRows, &st.PlainGen, &target, &c.Table, &c.After[0])
	if err != nil {
		return st, err
	}
	if target != nil {
		c.Target = *target
		st.Cursor = &c
	}
	return st, nil
}

func (r rekeyer) RekeyRemaining(ctx context.Context, target string) (int64, error) {
	ctx, cancel := r.s.bound(ctx)
	defer cancel()
	var n int64
	err := r.s.readTx(ctx, func(tx pgx.Tx) error {
		c, err := sealCounts(ctx, tx)
		if err != nil {
			return err
		}
		var events int64
		if err := tx.QueryRow(ctx, sqlEventCount).Scan(&events); err != nil {
			return err
		}
		n = storekit.Remaining(c, events, target)
		return nil
	})
	return n, err
}

func (r rekeyer) RekeyRead(ctx context.Context, table string, after [2]int64, limit int) ([]storekit.RekeyRow, error) {
	ctx, cancel := r.s.bound(ctx)
	defer cancel()
	var out []storekit.RekeyRow
	var rows pgx.Rows
	var err error
	switch table {
	case "secret":
		if after[0] > 0 {
			return nil, nil
		}
		row := storekit.RekeyRow{Key: [2]int64{1, 0}}
		if err := r.s.pool.QueryRow(ctx, sqlSecret).Scan(&row.Value); err != nil {
			return nil, err
		}
		return []storekit.RekeyRow{row}, nil
	case "events":
		rows, err = r.s.pool.Query(ctx, sqlRekeyEvents, after[0], limit)
	case "jobs":
		rows, err = r.s.pool.Query(ctx, sqlRekeyJobs, after[0], limit)
	case "attempts":
		rows, err = r.s.pool.Query(ctx, sqlRekeyAttempts, after[0], limit)
	default:
		return nil, fmt.Errorf("no table %q", table)
	}
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	size := 0
	for rows.Next() && size < storekit.RekeyChunkBytes {
		var row storekit.RekeyRow
		switch table {
		case "events":
			err = rows.Scan(&row.Key[0], &row.Source, &row.DeliveryID, &row.Headers, &row.Payload, &row.Value)
		case "jobs":
			err = rows.Scan(&row.Key[0], &row.Text)
			row.JobID = row.Key[0]
		case "attempts":
			err = rows.Scan(&row.Key[0], &row.JobID, &row.Text)
		}
		if err != nil {
			return nil, err
		}
		size += row.Bytes()
		out = append(out, row)
	}
	rows.Close()
	return out, rows.Err()
}

func (r rekeyer) RekeyApply(ctx context.Context, table string, swaps []storekit.RekeySwap, cursor storekit.RekeyCursor) (int, error) {
	ctx, cancel := r.s.bound(ctx)
	defer cancel()
	n := 0
	err := pgx.BeginFunc(ctx, r.s.pool, func(tx pgx.Tx) error {
		n = 0
		if len(swaps) > 0 {
			ids := make([]int64, len(swaps))
			for i, sw := range swaps {
				ids[i] = sw.Old.Key[0]
			}
			var err error
			var tag interface{ RowsAffected() int64 }
			switch table {
			case "secret":
				tag, err = tx.Exec(ctx, sqlSwapSecret, swaps[0].New.Value, swaps[0].Old.Value)
			case "events":
				headers, payloads, sealeds, olds := make([][]byte, len(swaps)), make([][]byte, len(swaps)), make([][]byte, len(swaps)), make([][]byte, len(swaps))
				for i, sw := range swaps {
					headers[i], payloads[i], sealeds[i], olds[i] = sw.New.Headers, sw.New.Payload, sw.New.Value, sw.Old.Value
				}
				tag, err = tx.Exec(ctx, sqlSwapEvents, ids, headers, payloads, sealeds, olds)
			case "jobs", "attempts":
				texts, olds := make([]string, len(swaps)), make([]string, len(swaps))
				for i, sw := range swaps {
					texts[i], olds[i] = sw.New.Text, sw.Old.Text
				}
				q := sqlSwapJobs
				if table == "attempts" {
					q = sqlSwapAttempts
				}
				tag, err = tx.Exec(ctx, q, ids, texts, olds)
			}
			if err != nil {
				return err
			}
			n = int(tag.RowsAffected())
		}
		_, err := tx.Exec(ctx, sqlRekeyCursor, cursor.Target, cursor.Table, cursor.After[0])
		return err
	})
	return n, err
}

func (r rekeyer) RekeyEnd(ctx context.Context, target string, plainGen int64) error {
	ctx, cancel := r.s.bound(ctx)
	defer cancel()
	_, err := r.s.pool.Exec(ctx, sqlRekeyEnd, target, plainGen)
	return err
}

// RekeyCompact has nothing to do: what PostgreSQL keeps of old row
// versions, its WAL and its backups are beyond the store's reach.
func (rekeyer) RekeyCompact(context.Context, bool, func(float64)) (string, error) {
	return "", nil
}
