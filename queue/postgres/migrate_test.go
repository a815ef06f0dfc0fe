package postgres

import (
	"slices"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/queuetest"
)

// TestMigrateFromVersion1 opens a schema of version 1 holding events and
// jobs in every status of that version: migrations 2 to 6 keep every
// row, Stats counts them all (job_counts and event_counts start from the
// rows), and a claim takes the pending job and the expired lease.
func TestMigrateFromVersion1(t *testing.T) {
	dsn := testutil.PostgresDSN(t)
	schema := testutil.FreshSchema(t, dsn)
	conn := adminConn(t)
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"CREATE SCHEMA " + schema,
		"SET LOCAL search_path TO " + schema,
		migrations[0],
		"CREATE TABLE schema_version (version integer NOT NULL)",
		"INSERT INTO schema_version (version) VALUES (1)",
		`INSERT INTO events (id, source, delivery_id, headers, payload, targets, created_at) OVERRIDING SYSTEM VALUE VALUES
			(1, 'shop', 'd1', '', '', 2, now()),
			(2, 'shop', 'd2', '', '', 2, now()),
			(3, 'billing', 'd3', '', '', 1, now()),
			(4, 'shop', 'bare', '', '', 0, now())`,
		`INSERT INTO jobs (id, event_id, source, target, status, attempts, run_at, lease_owner, lease_until, created_at, finished_at) OVERRIDING SYSTEM VALUE VALUES
			(1, 1, 'shop', 'mail', 'pending', 0, now() - interval '1 hour', NULL, NULL, now(), NULL),
			(2, 1, 'shop', 'crm', 'done', 1, now() - interval '1 hour', NULL, NULL, now(), now()),
			(3, 2, 'shop', 'mail', 'dead', 5, now() - interval '1 hour', NULL, NULL, now(), now()),
			(4, 2, 'shop', 'crm', 'running', 1, now() - interval '1 hour', 'gone', now() - interval '1 hour', now(), NULL),
			(5, 3, 'billing', 'mail', 'running', 1, now() - interval '1 hour', 'alive', now() + interval '1 day', now(), NULL)`,
		"SELECT setval(pg_get_serial_sequence('events', 'id'), 4)",
		"SELECT setval(pg_get_serial_sequence('jobs', 'id'), 5)",
	} {
		if _, err := tx.Exec(t.Context(), q); err != nil {
			t.Fatalf("%.40s: %v", q, err)
		}
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}

	s := openStore(t, Config{DSN: dsn, Schema: schema})
	got, events := queuetest.StatsLines(t, s)
	want := []string{
		"billing/mail/running=1",
		"shop/crm/done=1",
		"shop/crm/running=1",
		"shop/mail/dead=1",
		"shop/mail/pending=1",
	}
	if !slices.Equal(got, want) || events != 4 {
		t.Errorf("Stats = %v, %d events; want %v, 4 events", got, events, want)
	}

	for _, tt := range []struct {
		name   string
		routes []queue.Route
	}{
		{"routes", []queue.Route{{Source: "shop", Target: "mail"}, {Source: "shop", Target: "crm"}}},
		{"any route", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			jobs, err := s.Claim(t.Context(), queue.ClaimParams{Owner: "new", Limit: 10, Lease: time.Minute, Routes: tt.routes})
			if err != nil {
				t.Fatal(err)
			}
			var ids []int64
			for _, j := range jobs {
				ids = append(ids, j.ID)
			}
			slices.Sort(ids)
			if !slices.Equal(ids, []int64{1, 4}) {
				t.Fatalf("Claim = jobs %v, want 1 (pending) and 4 (expired lease)", ids)
			}
			for _, j := range jobs {
				if err := s.HandBack(t.Context(), "new", []queue.Claimed{j.Claimed()}); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	// A new event still gets a fresh id after the rows written by hand.
	if _, err := s.Enqueue(t.Context(), queue.Event{Source: "shop", DeliveryID: "new", Payload: []byte("{}"), Targets: []string{"mail"}}); err != nil {
		t.Errorf("Enqueue after the migration: %v", err)
	}
}
