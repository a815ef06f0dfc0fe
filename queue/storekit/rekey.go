package storekit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/seal"
)

// A rekey walks the tables that hold sealed values, in primary-key order
// and in chunks: it reads a chunk through the store's readers, skips the
// values already where they should be (seal.KeyID, no decryption), opens
// and seals the rest in its own goroutine, and sends the chunk's updates
// as one transaction, each a compare-and-swap (a row that changed or went
// meanwhile is left alone), with the walk's position written in the same
// transaction. Stopped for any reason, it resumes from that position; a
// position written for another first key starts the walk again. After
// each chunk it waits as long as the chunk took, so a rekey takes at most
// about half of the writer's time. The walk is written once, here, over
// the Rekeyer each Store implements.

// RekeyTables are the tables a rekey walks, in order: the ordering-key
// secret's one row first (a store whose secret is under an old key cannot
// open without that key), then events, jobs (their last error) and
// attempts (their errors).
var RekeyTables = []string{"secret", "events", "jobs", "attempts"}

// RekeyChunk bounds the rows of one chunk of a rekey; a Store's
// RekeyRead also stops once it has read RekeyChunkBytes of values.
const (
	RekeyChunk      = 256
	RekeyChunkBytes = 4 << 20
)

// RekeyCursor is where a walk stands: the last row of a table it walked.
type RekeyCursor struct {
	// Target is the key id the walk seals under, "" for plain text. A
	// cursor of another target is not resumed.
	Target string
	// Table indexes RekeyTables.
	Table int
	// After is the primary key of the last row walked (two columns for
	// SQLite's attempts, one elsewhere).
	After [2]int64
}

// RekeyState is what a Store keeps for its rekeys.
type RekeyState struct {
	// Cursor is the stored position, nil when no walk is under way.
	Cursor *RekeyCursor
	// PlainRows is set while rows may hold values written plain: set
	// when the store is opened or given keys that write plain, cleared
	// by a complete walk that seals. PlainGen counts the times it was
	// set, so a walk clears only what it saw.
	PlainRows bool
	PlainGen  int64
	// Residue is set while the SQLite file may keep plain text in its
	// free pages (set with PlainRows, cleared by a VACUUM under
	// secure_delete). Postgres keeps it false.
	Residue bool
}

// RekeyRow is one row a rekey reads.
type RekeyRow struct {
	Key [2]int64
	// Events: the dedupe key (the associated data), the plain columns,
	// and Value, the sealed column (nil for a plain row). The secret:
	// Value, the stored secret.
	Source, DeliveryID string
	Headers, Payload   []byte
	Value              []byte
	// Jobs and attempts: the job and the stored text.
	JobID int64
	Text  string
}

// Bytes is what r holds of values, which a RekeyRead counts against
// RekeyChunkBytes.
func (r *RekeyRow) Bytes() int {
	return len(r.Headers) + len(r.Payload) + len(r.Value) + len(r.Text)
}

// RekeySwap replaces a row's value, if the row still holds what was read
// (Old): for events the headers, payload and sealed columns (New.Value nil
// writes the row plain), for the secret its value, for jobs and attempts
// the text.
type RekeySwap struct {
	Old, New RekeyRow
}

// Rekeyer is what a Store gives RunRekey.
type Rekeyer interface {
	// RekeyState reads the stored position and flags.
	RekeyState(ctx context.Context) (RekeyState, error)
	// RekeyRemaining returns, from the counts (constant time), the values
	// not under target, with the plain events when target is a key; all
	// sealed values when target is "".
	RekeyRemaining(ctx context.Context, target string) (int64, error)
	// RekeyRead returns up to limit rows of table after the key after,
	// in key order, stopping early past RekeyChunkBytes of values.
	RekeyRead(ctx context.Context, table string, after [2]int64, limit int) ([]RekeyRow, error)
	// RekeyApply writes the swaps that still match and the cursor, in
	// one transaction, and returns how many it wrote.
	RekeyApply(ctx context.Context, table string, swaps []RekeySwap, cursor RekeyCursor) (int, error)
	// RekeyEnd ends a complete walk: it drops the cursor and, when target
	// seals and the flag was not set again since (plainGen), clears
	// PlainRows.
	RekeyEnd(ctx context.Context, target string, plainGen int64) error
	// RekeyCompact runs the store's last step of a rekey that seals: for
	// SQLite a TRUNCATE checkpoint, after a VACUUM when vacuum is true
	// (which clears Residue); before a VACUUM it calls estimate with the
	// seconds it will hold the write lock. It returns what RekeyProgress.Vacuum
	// says.
	RekeyCompact(ctx context.Context, vacuum bool, estimate func(seconds float64)) (string, error)
}

// RunRekey is every Store's Rekey: the walk over b, under the keys of
// the Sealer sealer returns (asked again at every chunk, so a config load
// that changes the first key stops the walk with queue.ErrKeysChanged).
func RunRekey(ctx context.Context, b Rekeyer, sealer func() *Sealer, p queue.RekeyParams) (queue.RekeyProgress, error) {
	s := sealer()
	keys := s.Keys()
	var target string
	switch {
	case p.ToPlainText && (keys.Ring == nil || !keys.DecryptOnly):
		return queue.RekeyProgress{}, queue.ErrRekeyNeedsDecryptOnly
	case !p.ToPlainText && !keys.Sealing():
		return queue.RekeyProgress{}, queue.ErrRekeyNoKeys
	case !p.ToPlainText:
		target = keys.Ring.Current()
	}
	prog := queue.RekeyProgress{Target: target, Phase: "walk"}
	report := func() {
		if p.Progress != nil {
			p.Progress(prog)
		}
	}
	st, err := b.RekeyState(ctx)
	if err != nil {
		return prog, fmt.Errorf("rekey: %w", err)
	}
	if prog.Remaining, err = b.RekeyRemaining(ctx, target); err != nil {
		return prog, fmt.Errorf("rekey: %w", err)
	}
	resume := st.Cursor != nil && st.Cursor.Target == target
	if prog.Remaining == 0 && (p.ToPlainText || !st.PlainRows) && !resume {
		prog.Nothing = true
	} else {
		cur := RekeyCursor{Target: target}
		if resume {
			cur = *st.Cursor
		}
		if err := walk(ctx, b, sealer, p, &prog, cur, report); err != nil {
			return prog, err
		}
		if err := b.RekeyEnd(ctx, target, st.PlainGen); err != nil {
			return prog, fmt.Errorf("rekey: %w", err)
		}
	}
	if !p.ToPlainText {
		vacuum := st.Residue && !p.NoVacuum
		prog.Phase = "vacuum"
		v, err := b.RekeyCompact(ctx, vacuum, func(sec float64) {
			prog.VacuumSeconds = sec
			report()
		})
		prog.Vacuum = v
		if st.Residue && p.NoVacuum {
			prog.Vacuum = "skipped"
		}
		if err != nil {
			return prog, fmt.Errorf("rekey: %w", err)
		}
	}
	if prog.Remaining, err = b.RekeyRemaining(ctx, target); err != nil {
		return prog, fmt.Errorf("rekey: %w", err)
	}
	prog.Phase, prog.Table = "done", ""
	report()
	return prog, nil
}

// walk runs the chunks from cur to the end of the last table.
func walk(ctx context.Context, b Rekeyer, sealer func() *Sealer, p queue.RekeyParams, prog *queue.RekeyProgress, cur RekeyCursor, report func()) error {
	for cur.Table < len(RekeyTables) {
		table := RekeyTables[cur.Table]
		prog.Table = table
		if err := ctx.Err(); err != nil {
			return err
		}
		s := sealer()
		if !sameTarget(s, cur.Target, p.ToPlainText) {
			return queue.ErrKeysChanged
		}
		began := time.Now()
		rows, err := b.RekeyRead(ctx, table, cur.After, RekeyChunk)
		if err != nil {
			return fmt.Errorf("rekey: read %s: %w", table, err)
		}
		next := cur
		if len(rows) == 0 {
			next.Table, next.After = cur.Table+1, [2]int64{}
		} else {
			next.After = rows[len(rows)-1].Key
		}
		swaps := make([]RekeySwap, 0, len(rows))
		for i := range rows {
			sw, ok, err := reseal(s, table, &rows[i], p.ToPlainText)
			if err != nil {
				prog.Skipped++
				var mk *seal.MissingKeyError
				if errors.As(err, &mk) && !slices.Contains(prog.MissingKeys, mk.KeyID) {
					prog.MissingKeys = append(prog.MissingKeys, mk.KeyID)
				}
				continue
			}
			if ok {
				swaps = append(swaps, sw)
			}
		}
		n, err := b.RekeyApply(ctx, table, swaps, next)
		if err != nil {
			return fmt.Errorf("rekey: write %s: %w", table, err)
		}
		prog.Walked += int64(len(rows))
		prog.Resealed += int64(n)
		cur = next
		if prog.Remaining, err = b.RekeyRemaining(ctx, cur.Target); err != nil {
			return fmt.Errorf("rekey: %w", err)
		}
		report()
		// As long again as the chunk took: the senders and workers get at
		// least half of the writer.
		if len(rows) > 0 {
			t := time.NewTimer(time.Since(began))
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
	}
	return nil
}

// sameTarget reports whether s still seals under target (or, for a rekey
// to plain text, still opens without sealing).
func sameTarget(s *Sealer, target string, toPlain bool) bool {
	k := s.Keys()
	if toPlain {
		return k.Ring != nil && k.DecryptOnly
	}
	return k.Sealing() && k.Ring.Current() == target
}

// reseal returns the swap that puts row's value where the rekey wants it:
// under s's first key, or plain. ok is false when the value is there
// already (or is empty); an error, when it does not open.
func reseal(s *Sealer, table string, row *RekeyRow, toPlain bool) (sw RekeySwap, ok bool, err error) {
	ring := s.Keys().Ring
	target := ""
	if !toPlain {
		target = ring.Current()
	}
	sw.Old = *row
	switch table {
	case "secret":
		// The length tells a plain secret from a sealed one (NewSealer).
		if plain := len(row.Value) == seal.HashSecretSize; plain == toPlain && (plain || KeyOf(row.Value) == target) {
			return sw, false, nil
		}
		sw.New.Value = s.StoredSecret(toPlain)
		return sw, true, nil
	case "events":
		if KeyOf(row.Value) == target && (target != "" || row.Value == nil) {
			return sw, false, nil
		}
		hs, payload := []queue.Header(nil), row.Payload
		if row.Value != nil {
			// Opened in a copy: the swap compares the stored value.
			if hs, payload, err = s.DecodeEvent(row.Source, row.DeliveryID, nil, nil, slices.Clone(row.Value)); err != nil {
				return sw, false, err
			}
		} else if hs, err = DecodeHeaders(row.Headers); err != nil {
			return sw, false, err
		}
		if toPlain {
			sw.New.Headers = AppendHeaders([]byte{}, hs)
			sw.New.Payload = payload
			return sw, true, nil
		}
		sw.New.Headers, sw.New.Payload = []byte{}, []byte{}
		sw.New.Value = AppendSealedEvent(ring, nil, row.Source, row.DeliveryID, hs, payload)
		return sw, true, nil
	default:
		if row.Text == "" || KeyOf(row.Text) == target && (target != "" || !SealedText(row.Text)) {
			return sw, false, nil
		}
		column := ColumnLastError
		if table == "attempts" {
			column = ColumnAttemptError
		}
		text, err := s.OpenText(row.Text, column, row.JobID)
		if err != nil {
			return sw, false, err
		}
		sw.New.Text = text
		if !toPlain {
			sw.New.Text = SealTextUnder(ring, text, column, row.JobID)
		}
		return sw, true, nil
	}
}

// Remaining is RekeyRemaining from a store's counts c and its number of
// events.
func Remaining(c SealCounts, events int64, target string) int64 {
	var n int64
	for id, v := range c.Values {
		if target == "" || id != target {
			n += v
		}
	}
	if target != "" {
		n += c.PlainEvents(events)
	}
	return n
}
