package sqlite

import (
	"strings"
	"testing"
)

// TestEventQueryPlans checks that the operators' event reads and the jobs
// listing's new filters walk an index over the range they select, never
// the whole events or jobs table.
func TestEventQueryPlans(t *testing.T) {
	s := setup(t)
	if err := s.onWriterNow(t, `
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
INSERT INTO events (id, source, delivery_id, event_type, headers, payload, targets, created_at)
SELECT i, 's' || (i % 3), i, 't' || (i % 7), x'', x'', i % 2, i * 1000 FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
INSERT INTO jobs (event_id, source, target, status, run_at, created_at, finished_at)
SELECT i, 's' || (i % 3), 't', CASE i % 4 WHEN 0 THEN 'pending' WHEN 1 THEN 'done' WHEN 2 THEN 'dead' ELSE 'running' END, 0, i * 1000, 0 FROM n WHERE i % 2 = 1;
ANALYZE;`); err != nil {
		t.Fatal(err)
	}
	const lo, hi = int64(1_500_000), int64(1_600_000)
	tests := []struct {
		name  string
		query string
		args  []any
		uses  string
	}{
		{"list events", sqlListEvents, []any{lo, hi, "", "", -1, 0, 0, 51}, "events_created (created_at>? AND created_at<?)"},
		{"list events of a source", sqlListEvents, []any{lo, hi, "s1", "", 1, 1700, 1_700_000, 51}, "events_created (created_at>? AND created_at<?)"},
		{"list bare events", sqlListBareEvents, []any{lo, hi, "", "", 0, 0, 0, 51}, "events_no_jobs (created_at>? AND created_at<?)"},
		{"list event by delivery id", sqlListEventByKey, []any{lo, hi, "s1", "", -1, 0, 0, 51, "100", "[100]"}, "INTEGER PRIMARY KEY (rowid=?)"},
		{"cursor time", sqlCursorTime, []any{100}, "INTEGER PRIMARY KEY (rowid<?)"},
		{"jobs of events", sqlEventJobs, []any{"[1,3]"}, "jobs_event (event_id=?)"},
		{"get event", sqlGetEvent, []any{1}, "INTEGER PRIMARY KEY (rowid=?)"},
		{"find event", sqlFindEvent, []any{"s1", "100", "[100]"}, "INTEGER PRIMARY KEY (rowid=?)"},
		{"jobs by delivery id", sqlListJobsByDelivery, []any{"", "s1", "", 0, "", lo, hi, 51, "100", "[100]"}, "INTEGER PRIMARY KEY (rowid=?)"},
		{"jobs since", sqlListJobsSince, []any{"", "", "", 0, "", lo, hi, 51}, "events_created (created_at>? AND created_at<?)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := queryPlan(t, s, tt.query, tt.args...)
			text := strings.Join(plan, "\n")
			for _, line := range plan {
				if strings.HasPrefix(line, "SCAN ") && !strings.Contains(line, "json_each") && !strings.Contains(line, "CONSTANT ROW") {
					t.Errorf("scan %q in plan:\n%s", line, text)
				}
			}
			if !strings.Contains(text, tt.uses) {
				t.Errorf("plan does not use %s:\n%s", tt.uses, text)
			}
		})
	}
}
