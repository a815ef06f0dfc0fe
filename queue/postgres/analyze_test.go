package postgres

import (
	"fmt"
	"testing"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// TestAnalyzeGrown: tables that filled since their last analysis (a new
// install's first backlog) are analyzed by the store, not left to
// autovacuum's next look; a table that has not grown since is not
// analyzed again.
func TestAnalyzeGrown(t *testing.T) {
	s := setup(t)
	admin := adminConn(t)
	schema := s.cfg.Schema
	if _, err := admin.Exec(t.Context(), `
WITH ev AS (
	INSERT INTO `+schema+`.events (source, delivery_id, headers, payload, targets, created_at)
	SELECT 'shop', 'd' || g, '', '', 1, now() FROM generate_series(1, 3000) AS g
	RETURNING id
)
INSERT INTO `+schema+`.jobs (event_id, source, target, run_at, created_at)
SELECT id, 'shop', 'mail', now(), now() FROM ev`); err != nil {
		t.Fatal(err)
	}
	analyzed := func() (jobs, events int64) {
		t.Helper()
		err := admin.QueryRow(t.Context(), `SELECT
	(SELECT analyze_count FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'jobs'),
	(SELECT analyze_count FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'events')`, schema).Scan(&jobs, &events)
		if err != nil {
			t.Fatal(err)
		}
		return jobs, events
	}
	// The server counts the rows changed a moment after the commit.
	testutil.Eventually(t, func() bool {
		if err := s.analyzeGrown(t.Context()); err != nil {
			t.Fatal(err)
		}
		jobs, events := analyzed()
		return jobs >= 1 && events >= 1
	}, func() string {
		jobs, events := analyzed()
		return fmt.Sprintf("jobs analyzed %d times, events %d; want both", jobs, events)
	})
	// (The store's own round, every few seconds, may have done it too.)
	jobs, events := analyzed()
	if err := s.analyzeGrown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if j, e := analyzed(); j != jobs || e != events {
		t.Errorf("a second look with nothing changed analyzed again: jobs %d → %d, events %d → %d", jobs, j, events, e)
	}
}
