package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/storekit"
)

// Encryption at rest: the store's keys, its counts of sealed values, and
// the rekey's reads and writes (storekit.RunRekey walks them). The
// sealing itself happens where values are written and read, through the
// store's storekit.Sealer.

const (
	sqlSecret = `SELECT value FROM store_secrets WHERE name = 'ordering'`

	// sqlMarkPlain notes that the store writes plain values from now on:
	// rows may hold them, and so may the file's free pages. ?1 counts a
	// new generation even when the flags are set already, so a rekey
	// that began before does not clear them.
	sqlMarkPlain = `UPDATE seal_state SET plain_rows = 1, residue = 1, plain_gen = plain_gen + 1
WHERE id = 1 AND (?1 OR plain_rows = 0 OR residue = 0)`

	sqlSealCounts = `SELECT key_id, kind, sum(n) FROM seal_counts GROUP BY key_id, kind HAVING sum(n) <> 0`

	sqlSealState = `SELECT plain_rows, plain_gen, residue, rekey_target, rekey_table, rekey_after, rekey_after2
FROM seal_state WHERE id = 1`

	sqlRekeyEvents = `SELECT id, source, delivery_id, headers, payload, sealed FROM events
WHERE id > ?1 ORDER BY id LIMIT ?2`
	sqlRekeyJobs = `SELECT id, last_error FROM jobs
WHERE id > ?1 AND last_error <> '' ORDER BY id LIMIT ?2`
	sqlRekeyAttempts = `SELECT job_id, slot, error FROM attempts
WHERE (job_id, slot) > (?1, ?2) AND error <> '' ORDER BY job_id, slot LIMIT ?3`

	// The rekey's compare-and-swaps: each writes only if the row still
	// holds what the walk read.
	sqlSwapSecret  = `UPDATE store_secrets SET value = ?1 WHERE name = 'ordering' AND value = ?2`
	sqlSwapEvent   = `UPDATE events SET headers = ?1, payload = ?2, sealed = ?3 WHERE id = ?4 AND sealed IS ?5`
	sqlSwapJob     = `UPDATE jobs SET last_error = ?1 WHERE id = ?2 AND last_error = ?3`
	sqlSwapAttempt = `UPDATE attempts SET error = ?1 WHERE job_id = ?2 AND slot = ?3 AND error = ?4`
	sqlRekeyCursor = `UPDATE seal_state SET rekey_target = ?1, rekey_table = ?2, rekey_after = ?3, rekey_after2 = ?4 WHERE id = 1`
	sqlRekeyEnd    = `UPDATE seal_state SET rekey_target = NULL, rekey_table = 0, rekey_after = 0, rekey_after2 = 0,
	plain_rows = CASE WHEN ?1 <> '' AND plain_gen = ?2 THEN 0 ELSE plain_rows END
WHERE id = 1`
	sqlClearResidue = `UPDATE seal_state SET residue = 0 WHERE id = 1 AND plain_rows = 0`
)

// vacuumPerMiB is how long a VACUUM holds the write lock per MiB of the
// file, measured on a loaded 2-core machine (docs/BENCHMARKS-LOG.md,
// "Encryption at rest: SQLite residue": 11.8 to 13.3 ms): for the
// estimate a rekey gives before it vacuums.
const vacuumPerMiB = 12.5e-3

// setSecureDelete sets secure_delete on conn for keys: ON whenever they
// have a ring, so that what a delete or a rewrite frees is zeroed in the
// file and its WAL. It costs nothing measurable where events are written,
// claimed and finished; purges of large bodies write more
// (docs/BENCHMARKS.md).
func setSecureDelete(ctx context.Context, conn *sql.Conn, keys queue.Keys) error {
	v := "OFF"
	if keys.Ring != nil {
		v = "ON"
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA secure_delete = "+v); err != nil {
		return fmt.Errorf("set secure_delete: %w", err)
	}
	return nil
}

// openKeys makes the Sealer of keys when the store opens, on the write
// pool before the writer takes its connection.
func (s *Store) openKeys(ctx context.Context, keys queue.Keys) error {
	var stored []byte
	if err := s.wdb.QueryRowContext(ctx, sqlSecret).Scan(&stored); err != nil {
		return fmt.Errorf("read the ordering-key secret: %w", err)
	}
	sl, err := storekit.NewSealer(keys, stored)
	if err != nil {
		return fmt.Errorf("open keys: %w", err)
	}
	if !keys.Sealing() {
		if _, err := s.wdb.ExecContext(ctx, sqlMarkPlain, 0); err != nil {
			return fmt.Errorf("open keys: %w", err)
		}
	}
	s.sealer.Store(sl)
	return nil
}

// SetKeys replaces the store's keys. It fails, changing nothing, when the
// ordering-key secret is sealed under a key k lacks.
func (s *Store) SetKeys(ctx context.Context, k queue.Keys) error {
	if s.isClosed() {
		return queue.ErrClosed
	}
	s.keysMu.Lock()
	defer s.keysMu.Unlock()
	var stored []byte
	err := s.readTx(ctx, func(tx *sql.Tx) error { return tx.QueryRowContext(ctx, sqlSecret).Scan(&stored) })
	if err != nil {
		return fmt.Errorf("set keys: read the ordering-key secret: %w", err)
	}
	sl, err := storekit.NewSealer(k, stored)
	if err != nil {
		return fmt.Errorf("set keys: %w", err)
	}
	prev := s.sealer.Load().Keys()
	// On the writer, between two batches: the flags are set before the
	// first plain value is written, and secure_delete changes with them.
	err = s.onWriter(ctx, func(w *writer) error {
		if !k.Sealing() {
			if _, err := w.conn.ExecContext(ctx, sqlMarkPlain, prev.Sealing()); err != nil {
				return err
			}
		}
		if (prev.Ring != nil) != (k.Ring != nil) {
			if err := setSecureDelete(ctx, w.conn, k); err != nil {
				return err
			}
		}
		s.sealer.Store(sl)
		return nil
	})
	if err != nil {
		return fmt.Errorf("set keys: %w", err)
	}
	return nil
}

// sealCounts reads the sealed values per key id (with the ordering-key
// secret) and the sealed events, in a few rows however many there are.
func sealCounts(ctx context.Context, tx *sql.Tx) (storekit.SealCounts, error) {
	var c storekit.SealCounts
	rows, err := tx.QueryContext(ctx, sqlSealCounts)
	if err != nil {
		return c, err
	}
	defer rows.Close()
	for rows.Next() {
		var id, kind string
		var n int64
		if err := rows.Scan(&id, &kind, &n); err != nil {
			return c, err
		}
		c.Add(id, kind, n)
	}
	if err := rows.Err(); err != nil {
		return c, err
	}
	var stored []byte
	if err := tx.QueryRowContext(ctx, sqlSecret).Scan(&stored); err != nil {
		return c, err
	}
	c.AddSecret(stored)
	return c, nil
}

// Rekey re-seals every stored value not under the first key, or writes
// every sealed one plain (storekit.RunRekey). A rekey that seals ends
// with a TRUNCATE checkpoint, so the WAL keeps no page it rewrote, and,
// when the file may hold plain text in its free pages (it ever ran
// without keys, or was created before encryption existed), with a VACUUM
// before it, unless p.NoVacuum.
func (s *Store) Rekey(ctx context.Context, p queue.RekeyParams) (queue.RekeyProgress, error) {
	if s.isClosed() {
		return queue.RekeyProgress{}, queue.ErrClosed
	}
	if !s.rekeying.TryLock() {
		return queue.RekeyProgress{}, queue.ErrRekeyRunning
	}
	defer s.rekeying.Unlock()
	return storekit.RunRekey(ctx, rekeyer{s}, s.sealer.Load, p)
}

// rekeyer is the store's storekit.Rekeyer.
type rekeyer struct{ s *Store }

var _ storekit.Rekeyer = rekeyer{}

func (r rekeyer) RekeyState(ctx context.Context) (storekit.RekeyState, error) {
	var st storekit.RekeyState
	err := r.s.readTx(ctx, func(tx *sql.Tx) error {
		var plain, residue int64
		var target sql.NullString
		var c storekit.RekeyCursor
		err := tx.QueryRowContext(ctx, sqlSealState).Scan(&plain, &st.PlainGen, &residue, &target, &c.Table, &c.After[0], &c.After[1])
		if err != nil {
			return err
		}
		st.PlainRows, st.Residue = plain != 0, residue != 0
		if target.Valid {
			c.Target = target.String
			st.Cursor = &c
		}
		return nil
	})
	return st, err
}

func (r rekeyer) RekeyRemaining(ctx context.Context, target string) (int64, error) {
	var n int64
	err := r.s.readTx(ctx, func(tx *sql.Tx) error {
		c, err := sealCounts(ctx, tx)
		if err != nil {
			return err
		}
		var events int64
		if err := tx.QueryRowContext(ctx, sqlEventCount).Scan(&events); err != nil {
			return err
		}
		n = storekit.Remaining(c, events, target)
		return nil
	})
	return n, err
}

func (r rekeyer) RekeyRead(ctx context.Context, table string, after [2]int64, limit int) ([]storekit.RekeyRow, error) {
	var out []storekit.RekeyRow
	err := r.s.readTx(ctx, func(tx *sql.Tx) error {
		var rows *sql.Rows
		var err error
		switch table {
		case "secret":
			if after[0] > 0 {
				return nil
			}
			row := storekit.RekeyRow{Key: [2]int64{1, 0}}
			if err := tx.QueryRowContext(ctx, sqlSecret).Scan(&row.Value); err != nil {
				return err
			}
			out = append(out, row)
			return nil
		case "events":
			rows, err = tx.QueryContext(ctx, sqlRekeyEvents, after[0], limit)
		case "jobs":
			rows, err = tx.QueryContext(ctx, sqlRekeyJobs, after[0], limit)
		case "attempts":
			rows, err = tx.QueryContext(ctx, sqlRekeyAttempts, after[0], after[1], limit)
		default:
			return fmt.Errorf("no table %q", table)
		}
		if err != nil {
			return err
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
				err = rows.Scan(&row.Key[0], &row.Key[1], &row.Text)
				row.JobID = row.Key[0]
			}
			if err != nil {
				return err
			}
			size += row.Bytes()
			out = append(out, row)
		}
		return rows.Err()
	})
	return out, err
}

func (r rekeyer) RekeyApply(ctx context.Context, table string, swaps []storekit.RekeySwap, cursor storekit.RekeyCursor) (int, error) {
	n := 0
	err := r.s.writeTx(ctx, func(tx *sql.Tx) (bool, error) {
		n = 0
		if len(swaps) > 0 {
			var q string
			switch table {
			case "secret":
				q = sqlSwapSecret
			case "events":
				q = sqlSwapEvent
			case "jobs":
				q = sqlSwapJob
			case "attempts":
				q = sqlSwapAttempt
			}
			st, err := tx.PrepareContext(ctx, q)
			if err != nil {
				return false, err
			}
			defer st.Close()
			for _, sw := range swaps {
				var res sql.Result
				switch table {
				case "secret":
					res, err = st.ExecContext(ctx, sw.New.Value, sw.Old.Value)
				case "events":
					res, err = st.ExecContext(ctx, sw.New.Headers, sw.New.Payload, sw.New.Value, sw.Old.Key[0], sw.Old.Value)
				case "jobs":
					res, err = st.ExecContext(ctx, sw.New.Text, sw.Old.Key[0], sw.Old.Text)
				case "attempts":
					res, err = st.ExecContext(ctx, sw.New.Text, sw.Old.Key[0], sw.Old.Key[1], sw.Old.Text)
				}
				if err != nil {
					return false, err
				}
				if k, _ := res.RowsAffected(); k > 0 {
					n++
				}
			}
		}
		_, err := tx.ExecContext(ctx, sqlRekeyCursor, cursor.Target, cursor.Table, cursor.After[0], cursor.After[1])
		return false, err
	})
	return n, err
}

func (r rekeyer) RekeyEnd(ctx context.Context, target string, plainGen int64) error {
	return r.s.writeTx(ctx, func(tx *sql.Tx) (bool, error) {
		_, err := tx.ExecContext(ctx, sqlRekeyEnd, target, plainGen)
		return false, err
	})
}

// RekeyCompact vacuums the file when asked, and always ends with a
// TRUNCATE checkpoint: the WAL keeps the old images of every page the
// rekey rewrote until it is reset. The VACUUM holds the write lock
// throughout, so the senders' enqueues wait (and answer 503 past the
// store's Timeout); it needs free space of about twice the file (a copy,
// and a WAL as large).
func (r rekeyer) RekeyCompact(ctx context.Context, vacuum bool, estimate func(seconds float64)) (string, error) {
	s := r.s
	outcome := ""
	if vacuum {
		size := fileSize(s.path) + fileSize(s.path+"-wal")
		if free, ok := freeSpace(filepath.Dir(s.path)); ok && free < uint64(2*size) {
			outcome = fmt.Sprintf("not run: it needs about %d MiB free, twice the file, and %d MiB are; plain text may remain in free pages",
				2*size>>20, free>>20)
		} else {
			estimate(float64(size) / (1 << 20) * vacuumPerMiB)
			err := s.onWriter(ctx, func(w *writer) error {
				if _, err := w.conn.ExecContext(ctx, "VACUUM"); err != nil {
					return fmt.Errorf("vacuum: %w", err)
				}
				if _, err := w.conn.ExecContext(ctx, sqlClearResidue); err != nil {
					return fmt.Errorf("vacuum: %w", err)
				}
				return nil
			})
			if err != nil {
				return "", err
			}
			outcome = "done"
		}
	}
	if err := s.onWriter(ctx, func(w *writer) error { return w.truncateNow(ctx) }); err != nil {
		return outcome, err
	}
	return outcome, nil
}

// truncateNow runs a TRUNCATE checkpoint, waiting for the readers of old
// snapshots up to the store's busy timeout, for a rekey's end: unlike the
// writer's own, it reports that it could not empty the WAL.
func (w *writer) truncateNow(ctx context.Context) error {
	var busy, log, done int64
	for range 3 {
		if err := w.conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &log, &done); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		if busy == 0 {
			w.commits, w.lastTruncate = 0, time.Now()
			return nil
		}
	}
	return errors.New("checkpoint: readers kept the WAL from being emptied; it is emptied at the next TRUNCATE (Caddy runs one every " +
		strconv.Itoa(int(truncateEvery/time.Minute)) + " minutes when idle)")
}

// fileSize is the size of the file at path, 0 if it cannot be read.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}
