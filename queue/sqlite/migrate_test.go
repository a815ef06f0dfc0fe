package sqlite

import (
	"database/sql"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/queuetest"
)

// TestMigrateFromVersion1 opens a database of schema version 1 holding
// events and jobs in every status of that version: migrations 2 to 6 keep
// every row, Stats counts them all (job_counts and event_count start from
// the rows), and a claim takes the pending job and the expired lease.
func TestMigrateFromVersion1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "queue.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		migrations[0],
		"PRAGMA user_version = 1",
		`INSERT INTO events (id, source, delivery_id, headers, payload, targets, created_at) VALUES
			(1, 'shop', 'd1', x'', x'', 2, 0),
			(2, 'shop', 'd2', x'', x'', 2, 0),
			(3, 'billing', 'd3', x'', x'', 1, 0),
			(4, 'shop', 'bare', x'', x'', 0, 0)`,
		`INSERT INTO jobs (id, event_id, source, target, status, attempts, run_at, lease_owner, lease_until, created_at, finished_at) VALUES
			(1, 1, 'shop', 'mail', 'pending', 0, 0, NULL, NULL, 0, NULL),
			(2, 1, 'shop', 'crm', 'done', 1, 0, NULL, NULL, 0, 1),
			(3, 2, 'shop', 'mail', 'dead', 5, 0, NULL, NULL, 0, 1),
			(4, 2, 'shop', 'crm', 'running', 1, 0, 'gone', 1, 0, NULL),
			(5, 3, 'billing', 'mail', 'running', 1, 0, 'alive', ` + "9223372036854775807" + `, 0, NULL)`,
	} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%.40s: %v", q, err)
		}
	}
	db.Close()

	s := setup(t, func(c *Config) { c.Path = path })
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
			jobs, err := s.Claim(t.Context(), queue.ClaimParams{Owner: "new", Limit: 10, Lease: time.Minute, Now: time.Now(), Routes: tt.routes})
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
	var ok string
	if err := s.rdb.QueryRowContext(t.Context(), "PRAGMA integrity_check").Scan(&ok); err != nil || ok != "ok" {
		t.Errorf("integrity_check = %q, %v", ok, err)
	}
}
