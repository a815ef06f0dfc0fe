package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/queuetest"
	"github.com/caddywebhook/caddywebhook/queue/seal"
)

// TestMigrateSeal opens, with keys, a schema of version 9 that holds an
// ordering key's chain: the migration hashes the stored keys, so an event
// of the same key enqueued after it still waits behind the old head.
func TestMigrateSeal(t *testing.T) {
	dsn := testutil.PostgresDSN(t)
	schema := testutil.FreshSchema(t, dsn)
	conn := adminConn(t)
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	qs := []string{"CREATE SCHEMA " + schema, "SET LOCAL search_path TO " + schema}
	qs = append(qs, migrations[:sealVersion-1]...)
	qs = append(qs,
		"CREATE TABLE schema_version (version integer NOT NULL)",
		fmt.Sprintf("INSERT INTO schema_version (version) VALUES (%d)", sealVersion-1),
		`INSERT INTO events (id, source, delivery_id, headers, payload, targets, created_at) OVERRIDING SYSTEM VALUE VALUES (1, 'shop', 'd1', '', '{}', 1, now())`,
		`INSERT INTO jobs (id, event_id, source, target, status, run_at, created_at, ordering_key) OVERRIDING SYSTEM VALUE VALUES (1, 1, 'shop', 'mail', 'pending', now() - interval '1 minute', now(), 'customer-42')`,
		`INSERT INTO ordering_heads (source, target, ordering_key, job_id) VALUES ('shop', 'mail', 'customer-42', 1)`,
		"SELECT setval(pg_get_serial_sequence('events', 'id'), 1)",
		"SELECT setval(pg_get_serial_sequence('jobs', 'id'), 1)",
	)
	for _, q := range qs {
		if _, err := tx.Exec(t.Context(), q); err != nil {
			t.Fatalf("%.40s: %v", q, err)
		}
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}

	s := openStore(t, Config{DSN: dsn, Schema: schema, Keys: queue.Keys{Ring: queuetest.Ring(t, "k1")}})
	var stored string
	if err := conn.QueryRow(t.Context(), `SELECT ordering_key FROM `+schema+`.jobs WHERE id = 1`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored == "customer-42" || len(stored) != seal.HashLen {
		t.Errorf("stored ordering key %q, want its hash", stored)
	}
	if _, err := s.Enqueue(t.Context(), queue.Event{Source: "shop", DeliveryID: "d2", Targets: []string{"mail"}, OrderingKey: "customer-42"}); err != nil {
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
	if st.PlainEvents != 1 || len(st.Keys) != 1 || st.Keys[0].Values != 2 {
		t.Errorf("Stats = %d plain events, keys %+v; want d1 plain, d2 and the secret under k1", st.PlainEvents, st.Keys)
	}
}
