package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestLockHeadsOneOrder: sqlLockHeads takes its row locks in one order
// whatever plan a session runs it with. A Finish's hand-on and another
// instance's sweep of stranded heads lock overlapping sets of heads; each
// connection caches its own plan, so one may walk ordering_heads in
// physical order (a sequential scan) while the other walks it by job id
// (the index). Locked in those two orders, the sets deadlock, and
// PostgreSQL aborts one (seen in TestOrderingTwoInstances's server log).
// The heads here are stored with job ids falling, so the two plans meet
// from opposite ends.
func TestLockHeadsOneOrder(t *testing.T) {
	a, _ := pair(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const heads = 400
	ids := make([]int64, heads)
	for i := range heads {
		ids[i] = int64(heads - i)
		if _, err := a.pool.Exec(ctx, `INSERT INTO ordering_heads (source, target, ordering_key, job_id) VALUES ('shop', 'mail', $1, $2)`,
			fmt.Sprintf("key%03d", rand.IntN(1000)*1000+i), ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	plans := []struct {
		name string
		set  string
	}{
		{"sequential scan", `SET enable_indexscan = off; SET enable_bitmapscan = off`},
		{"index scan", `SET enable_seqscan = off; SET enable_bitmapscan = off`},
	}
	const rounds = 150
	var wg sync.WaitGroup
	errs := make(chan error, len(plans)*2)
	for _, p := range plans {
		// Two sessions of each plan, each on a connection of its own.
		for range 2 {
			conn, err := a.pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			if _, err := conn.Exec(ctx, p.set); err != nil {
				t.Fatal(err)
			}
			set := append([]int64(nil), ids[rand.IntN(heads/4):]...)
			rand.Shuffle(len(set), func(i, j int) { set[i], set[j] = set[j], set[i] })
			wg.Go(func() {
				for range rounds {
					err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
						_, err := tx.Exec(ctx, sqlLockHeads, set)
						return err
					})
					if err != nil {
						errs <- fmt.Errorf("%s: %w", p.name, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "40P01" {
			t.Errorf("locking heads deadlocked: %v", err)
			continue
		}
		t.Error(err)
	}
}
