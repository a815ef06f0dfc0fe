package sqlite

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/queuetest"
	"github.com/caddywebhook/caddywebhook/queue/seal"
)

// TestMigrateSeal opens, with keys, a database of the schema version before encryption that
// holds an ordering key's chain: the migration hashes the stored keys, so
// an event of the same key enqueued after it still waits behind the old
// head, and the database is marked as holding plain values.
func TestMigrateSeal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "queue.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range append(append([]string{}, migrations[:sealVersion-1]...),
		fmt.Sprintf("PRAGMA user_version = %d", sealVersion-1),
		`INSERT INTO events (id, source, delivery_id, headers, payload, targets, created_at) VALUES (1, 'shop', 'd1', x'', x'7b7d', 1, 0)`,
		`INSERT INTO event_count (id, events) VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET events = 1`,
		`INSERT INTO jobs (id, event_id, source, target, status, run_at, created_at, ordering_key) VALUES (1, 1, 'shop', 'mail', 'pending', 0, 0, 'customer-42')`,
		`INSERT INTO job_counts (source, target, status, jobs) VALUES ('shop', 'mail', 'pending', 1)`,
		`INSERT INTO ordering_heads (source, target, ordering_key, job_id) VALUES ('shop', 'mail', 'customer-42', 1)`,
	) {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%.40s: %v", q, err)
		}
	}
	db.Close()

	s := setup(t, func(c *Config) { c.Path = path; c.Keys = queue.Keys{Ring: queuetest.Ring(t, "k1")} })
	var stored string
	if err := s.rdb.QueryRowContext(t.Context(), `SELECT ordering_key FROM jobs WHERE id = 1`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored == "customer-42" || len(stored) != seal.HashLen {
		t.Errorf("stored ordering key %q, want its hash", stored)
	}
	ev := testEvent("d2", "mail")
	ev.OrderingKey = "customer-42"
	if _, err := s.Enqueue(t.Context(), ev); err != nil {
		t.Fatal(err)
	}
	jobs, err := s.Claim(t.Context(), queue.ClaimParams{Owner: "w", Limit: 5, Lease: time.Minute})
	if err != nil || len(jobs) != 1 || jobs[0].ID != 1 {
		t.Fatalf("Claim = %v, %v; want the old head alone, d2 behind it", jobs, err)
	}
	st, err := s.Stats(t.Context(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if st.PlainEvents != 1 || len(st.Keys) != 1 || st.Keys[0].KeyID != "k1" || st.Keys[0].Values != 2 {
		t.Errorf("Stats = %d plain events, keys %+v; want d1 plain, d2 and the secret under k1", st.PlainEvents, st.Keys)
	}
	var plainRows, residue int
	if err := s.rdb.QueryRowContext(t.Context(), `SELECT plain_rows, residue FROM seal_state`).Scan(&plainRows, &residue); err != nil || plainRows != 1 || residue != 1 {
		t.Errorf("seal_state = %d, %d, %v; want an old database marked plain", plainRows, residue, err)
	}
}
