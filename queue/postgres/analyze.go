package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Statistics for new tables.
//
// A prepared statement's plan is made from the tables' statistics, and a
// new install has none worth the name: autovacuum analyzes a table only
// once its changes pass a threshold, and looks at most once a minute. A
// backlog that fills empty tables in seconds then runs on plans made for
// empty tables. So every few seconds (with the counts' fold) the store
// analyzes each of its tables that has changed by more than twice the rows
// the last analysis counted, and by at least analyzeMin rows: a table
// that is filling is analyzed at 1,000 rows, 3,000, 9,000…, and one at its
// working size is left to autovacuum. One instance at a time does it.

// analyzeMin is the least number of changed rows that makes a table worth
// analyzing here.
const analyzeMin = 1000

// sqlGrownTables lists the store's tables that changed by more than twice
// their rows at the last analysis (none: never analyzed), and by
// analyzeMin rows or more.
const sqlGrownTables = `SELECT c.relname::text FROM pg_class AS c
JOIN pg_stat_user_tables AS s ON s.relid = c.oid
WHERE c.relnamespace = current_schema()::regnamespace AND c.relname IN ('jobs', 'events', 'attempts')
	AND s.n_mod_since_analyze >= $1 AND s.n_mod_since_analyze > 2 * greatest(c.reltuples, 0)`

// analyzeGrown analyzes the tables sqlGrownTables lists, under an advisory
// lock that another instance holding it makes this one skip; a table that
// autovacuum is analyzing is skipped too.
func (s *Store) analyzeGrown(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, sqlGrownTables, analyzeMin)
	if err != nil {
		return s.fail("find grown tables", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return s.fail("find grown tables", err)
	}
	if len(tables) == 0 {
		return nil
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var ok bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtextextended('caddywebhook analyze ' || current_schema(), 0))`).Scan(&ok); err != nil || !ok {
			return err
		}
		for _, t := range tables {
			// The names come from the list above, fixed words.
			if _, err := tx.Exec(ctx, "ANALYZE (SKIP_LOCKED) "+pgx.Identifier{t}.Sanitize()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return s.fail("analyze grown tables", err)
	}
	return nil
}
