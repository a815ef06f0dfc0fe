package integration

// Reading the queue's SQLite file directly, read-only, to assert what a
// running (or stopped) Caddy stored. The schema is queue/sqlite's (schema.go).

import (
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// jobRow is one job with its event's identity.
type jobRow struct {
	ID         int64
	Source     string
	DeliveryID string
	EventType  string
	Target     string
	Status     string
	Attempts   int
	LastError  string
}

func (j jobRow) String() string {
	return fmt.Sprintf("job %d %s/%s %s target=%s status=%s attempts=%d err=%q",
		j.ID, j.Source, j.DeliveryID, j.EventType, j.Target, j.Status, j.Attempts, j.LastError)
}

// queryDB opens the instance's database read-only for one query.
func (c *caddyInstance) queryDB(t *testing.T, fn func(db *sql.DB) error) {
	t.Helper()
	dsn := "file:" + (&url.URL{Path: c.DBPath}).EscapedPath() + "?mode=ro&_pragma=busy_timeout(5000)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatalf("open %s: %v", c.DBPath, err)
	}
	defer db.Close()
	if err := fn(db); err != nil {
		t.Fatalf("query %s: %v", c.DBPath, err)
	}
}

// jobs returns the jobs of source (all sources if empty), oldest first.
func (c *caddyInstance) jobs(t *testing.T, source string) []jobRow {
	t.Helper()
	var out []jobRow
	c.queryDB(t, func(db *sql.DB) error {
		rows, err := db.Query(`
			SELECT j.id, j.source, e.delivery_id, e.event_type, j.target, j.status, j.attempts, j.last_error
			FROM jobs j JOIN events e ON e.id = j.event_id
			WHERE ?1 = '' OR j.source = ?1
			ORDER BY j.id`, source)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var j jobRow
			if err := rows.Scan(&j.ID, &j.Source, &j.DeliveryID, &j.EventType, &j.Target, &j.Status, &j.Attempts, &j.LastError); err != nil {
				return err
			}
			out = append(out, j)
		}
		return rows.Err()
	})
	return out
}

// jobsFor returns the jobs of one delivery.
func (c *caddyInstance) jobsFor(t *testing.T, source, deliveryID string) []jobRow {
	t.Helper()
	var out []jobRow
	for _, j := range c.jobs(t, source) {
		if j.DeliveryID == deliveryID {
			out = append(out, j)
		}
	}
	return out
}

// eventCount returns how many events of source (all if empty) are stored.
func (c *caddyInstance) eventCount(t *testing.T, source string) int {
	t.Helper()
	var n int
	c.queryDB(t, func(db *sql.DB) error {
		return db.QueryRow(`SELECT count(*) FROM events WHERE ?1 = '' OR source = ?1`, source).Scan(&n)
	})
	return n
}

// storedPayload returns the payload stored for a delivery, nil if none.
func (c *caddyInstance) storedPayload(t *testing.T, source, deliveryID string) []byte {
	t.Helper()
	var p []byte
	c.queryDB(t, func(db *sql.DB) error {
		err := db.QueryRow(`SELECT payload FROM events WHERE source = ? AND delivery_id = ?`, source, deliveryID).Scan(&p)
		if err == sql.ErrNoRows {
			return nil
		}
		return err
	})
	return p
}

// waitJobs polls the database until every job of the delivery has status
// and there is at least one.
func (c *caddyInstance) waitJobs(t *testing.T, source, deliveryID, status string) []jobRow {
	t.Helper()
	var js []jobRow
	testutil.Eventually(t, func() bool {
		js = c.jobsFor(t, source, deliveryID)
		if len(js) == 0 {
			return false
		}
		for _, j := range js {
			if j.Status != status {
				return false
			}
		}
		return true
	}, func() string {
		return fmt.Sprintf("jobs of %s/%s to be %s; have %s\n%s", source, deliveryID, status, rowsString(js), c.logTail())
	})
	return js
}

func rowsString(js []jobRow) string {
	if len(js) == 0 {
		return "none"
	}
	s := make([]string, len(js))
	for i, j := range js {
		s[i] = j.String()
	}
	return strings.Join(s, "; ")
}
