package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/storekit"
)

// The operators' reads of events, and the jobs listing's filters beyond
// status, source and target. Each statement walks an index: the rowids
// the key set names for a delivery id (dedupe.go), events_created for time order
// and ranges, events_no_jobs for events without a job. The other filters
// (source, event type, status, target) narrow the walk.
const (
	eventCols = `id, source, delivery_id, event_type, created_at`

	// eventFilter: ?1, ?2 the time range; ?3 source, ?4 event type ('' for
	// any); ?5 has_target (-1 any, 0 none, 1 some); ?6 the cursor, ?7 its
	// time. The range's upper end is already cut at the cursor's time, so
	// the cursor only skips the rows of that same millisecond.
	eventFilter = `created_at >= ?1 AND created_at < ?2
	AND (?3 = '' OR source = ?3) AND (?4 = '' OR event_type = ?4)
	AND (?5 < 0 OR (targets > 0) = (?5 > 0))
	AND (?6 = 0 OR created_at < ?7 OR id < ?6)`

	sqlListEvents = `SELECT ` + eventCols + ` FROM events INDEXED BY events_created
WHERE ` + eventFilter + `
ORDER BY created_at DESC, id DESC LIMIT ?8`

	sqlListBareEvents = `SELECT ` + eventCols + ` FROM events INDEXED BY events_no_jobs
WHERE targets = 0 AND ` + eventFilter + `
ORDER BY created_at DESC, id DESC LIMIT ?8`

	// The reads by dedupe key find the event by id: ?10 (or ?3) is a JSON
	// array of the ids the key set names for the key (keySet.lookup),
	// usually one, and the key itself is checked on the row.
	sqlListEventByKey = `SELECT ` + eventCols + ` FROM events
WHERE id IN (SELECT value FROM json_each(?10)) AND source = ?3 AND delivery_id = ?9 AND ` + eventFilter + `
ORDER BY created_at DESC, id DESC LIMIT ?8`

	// sqlCursorTime is the time of the cursor's event, or of the nearest
	// older one if it was deleted since.
	sqlCursorTime = `SELECT created_at FROM events WHERE id <= ?1 ORDER BY id DESC LIMIT 1`

	// sqlEventJobs reads the jobs of a page of events, ?1 a JSON array of
	// their ids, through jobs_event.
	sqlEventJobs = `SELECT event_id, id, target, status, attempts FROM jobs
WHERE event_id IN (SELECT value FROM json_each(?1)) ORDER BY event_id, id`

	// eventDetailCols are an event with what its targets receive, in
	// scanEventDetail's order: every read of an event's body goes through
	// the two together.
	eventDetailCols = eventCols + `, headers, payload, sealed`

	sqlGetEvent = `SELECT ` + eventDetailCols + ` FROM events WHERE id = ?1`

	sqlFindEvent = `SELECT ` + eventDetailCols + ` FROM events
WHERE id IN (SELECT value FROM json_each(?3)) AND source = ?1 AND delivery_id = ?2`

	// sqlScanBounds reads where a page of a scan ends: the id of the
	// ?2-th event after ?1 (NULL when fewer are left), and the newest
	// event's id. Both walk the primary key from ?1 on, never the events
	// before it.
	sqlScanBounds = `SELECT (SELECT id FROM events WHERE id > ?1 ORDER BY id LIMIT 1 OFFSET ?2 - 1),
	(SELECT max(id) FROM events)`

	// sqlScanStart is where a scan since ?1 starts: before the first
	// event stored since then. It reads events_created from ?1 on (left
	// to itself, SQLite walks the primary key from the oldest event to the
	// first one stored since).
	sqlScanStart = `SELECT min(id) - 1 FROM events INDEXED BY events_created WHERE created_at >= ?1`

	// sqlScanEvents reads the events of one page of a scan, (?1, ?2] in id
	// order through the primary key, that match the filters: ?3, ?4 the
	// time range, ?5 source, ?6 event type ('' for any).
	sqlScanEvents = `SELECT ` + eventDetailCols + ` FROM events
WHERE id > ?1 AND id <= ?2 AND created_at >= ?3 AND created_at < ?4
	AND (?5 = '' OR source = ?5) AND (?6 = '' OR event_type = ?6)
ORDER BY id`

	// sqlScanJobs reads the jobs of the events (?1, ?2] of a scan's page,
	// as the jobs listing shows them: one range of jobs_event, whatever
	// the filters kept of the page, rather than a seek per event.
	sqlScanJobs = `SELECT ` + jobCols + `
FROM jobs AS j INDEXED BY jobs_event JOIN events AS e ON e.id = j.event_id
WHERE j.event_id > ?1 AND j.event_id <= ?2 ORDER BY j.event_id, j.id`

	// jobCols are the columns of a queue.JobSummary, in scanSummary's order.
	jobCols = `j.id, j.event_id, j.source, e.delivery_id, e.event_type, j.target, j.status,
	j.attempts, j.replays, j.run_at, j.last_error, j.created_at, coalesce(j.finished_at, 0)`

	// jobFilter: ?1 status, ?2 source, ?3 target, ?5 event type ('' for
	// any); ?4 the cursor; ?6, ?7 the time range of the event.
	jobFilter = `(?1 = '' OR j.status = ?1) AND (?2 = '' OR j.source = ?2) AND (?3 = '' OR j.target = ?3)
	AND (?4 = 0 OR j.id < ?4) AND (?5 = '' OR e.event_type = ?5)
	AND e.created_at >= ?6 AND e.created_at < ?7`

	// sqlListJobsByDelivery reads the jobs of one event, found by its
	// dedupe key.
	sqlListJobsByDelivery = `SELECT ` + jobCols + `
FROM events AS e JOIN jobs AS j ON j.event_id = e.id
WHERE e.id IN (SELECT value FROM json_each(?10)) AND e.source = ?2 AND e.delivery_id = ?9 AND ` + jobFilter + `
ORDER BY j.id DESC LIMIT ?8`

	// sqlListJobsSince reads the jobs of the events stored in the range,
	// found through events_created: it sorts the range's jobs, never the
	// table's.
	sqlListJobsSince = `SELECT ` + jobCols + `
FROM events AS e INDEXED BY events_created JOIN jobs AS j ON j.event_id = e.id
WHERE ` + jobFilter + `
ORDER BY j.id DESC LIMIT ?8`

	// sqlListJobsWalk walks the jobs newest first, as the plain listing
	// does, for an event type or an until alone.
	sqlListJobsWalk = `SELECT ` + jobCols + `
FROM jobs AS j JOIN events AS e ON e.id = j.event_id
WHERE ` + jobFilter + `
ORDER BY j.id DESC LIMIT ?8`
)

// timeRange is a time filter in unix milliseconds, unbounded ends
// replaced by the extremes.
func timeRange(since, until time.Time) (int64, int64) {
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	if !since.IsZero() {
		lo = ms(since)
	}
	if !until.IsZero() {
		hi = ms(until)
	}
	return lo, hi
}

// ListEvents pages through events matching p, newest first.
func (s *Store) ListEvents(ctx context.Context, p queue.EventListParams) (queue.EventPage, error) {
	limit, err := storekit.EventPageSize(p)
	if err != nil {
		return queue.EventPage{}, err
	}
	lo, hi := timeRange(p.Since, p.Until)
	query := sqlListEvents
	switch {
	case p.DeliveryID != "":
		query = sqlListEventByKey
	case p.HasTarget != nil && !*p.HasTarget:
		query = sqlListBareEvents
	}
	var events []queue.EventSummary
	err = s.readTx(ctx, func(tx *sql.Tx) error {
		var cursorAt int64
		if p.Cursor > 0 {
			err := tx.QueryRowContext(ctx, sqlCursorTime, p.Cursor).Scan(&cursorAt)
			if errors.Is(err, sql.ErrNoRows) {
				return nil // nothing is older than the cursor
			}
			if err != nil {
				return err
			}
			hi = min(hi, cursorAt+1)
		}
		args := []any{lo, hi, p.Source, p.EventType, storekit.HasTarget(p.HasTarget), p.Cursor, cursorAt, limit + 1}
		if p.DeliveryID != "" {
			args = append(args, p.DeliveryID, s.keyIDs(p.Source, p.DeliveryID))
		}
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		events = make([]queue.EventSummary, 0, limit+1)
		for rows.Next() {
			var e queue.EventSummary
			if err := scanEvent(rows, &e); err != nil {
				return err
			}
			events = append(events, e)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return readEventJobs(ctx, tx, events)
	})
	if err != nil {
		return queue.EventPage{}, fmt.Errorf("list events: %w", err)
	}
	return storekit.TrimEventPage(events, limit), nil
}

// scanEvent scans eventCols, followed by extra destinations.
func scanEvent(sc interface{ Scan(...any) error }, e *queue.EventSummary, extra ...any) error {
	var created int64
	if err := sc.Scan(append([]any{&e.ID, &e.Source, &e.DeliveryID, &e.EventType, &created}, extra...)...); err != nil {
		return err
	}
	e.CreatedAt = fromMS(created)
	return nil
}

// readEventJobs fills the jobs of events in one statement.
func readEventJobs(ctx context.Context, tx *sql.Tx, events []queue.EventSummary) error {
	if len(events) == 0 {
		return nil
	}
	ids, add := storekit.EventJobs(events)
	list := []byte{'['}
	for i, id := range ids {
		if i > 0 {
			list = append(list, ',')
		}
		list = strconv.AppendInt(list, id, 10)
	}
	list = append(list, ']')
	rows, err := tx.QueryContext(ctx, sqlEventJobs, string(list))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var eventID int64
		var j queue.EventJob
		if err := rows.Scan(&eventID, &j.ID, &j.Target, &j.Status, &j.Attempts); err != nil {
			return err
		}
		add(eventID, j)
	}
	return rows.Err()
}

// GetEvent returns one event with its headers, payload and jobs.
func (s *Store) GetEvent(ctx context.Context, id int64) (queue.EventDetail, error) {
	d, err := s.readEvent(ctx, sqlGetEvent, id)
	if err != nil {
		return queue.EventDetail{}, fmt.Errorf("get event %d: %w", id, err)
	}
	return d, nil
}

// FindEvent returns the event source's sender delivered as deliveryID.
func (s *Store) FindEvent(ctx context.Context, source, deliveryID string) (queue.EventDetail, error) {
	d, err := s.readEvent(ctx, sqlFindEvent, source, deliveryID, s.keyIDs(source, deliveryID))
	if err != nil {
		return queue.EventDetail{}, fmt.Errorf("find event %q of %s: %w", deliveryID, source, err)
	}
	return d, nil
}

// scanEventDetail scans eventDetailCols into d: the one place a stored
// event's headers and payload become an EventDetail's, opened with sl
// when sealed (ReadError says why not, when a key is missing).
func scanEventDetail(sc interface{ Scan(...any) error }, d *queue.EventDetail, sl *storekit.Sealer) error {
	var hdr, sealed []byte
	if err := scanEvent(sc, &d.EventSummary, &hdr, &d.Payload, &sealed); err != nil {
		return err
	}
	d.Headers, d.Payload, d.ReadError = storekit.ReadStored(sl, d.Source, d.DeliveryID, hdr, d.Payload, sealed)
	return nil
}

func (s *Store) readEvent(ctx context.Context, query string, args ...any) (queue.EventDetail, error) {
	var d queue.EventDetail
	sl := s.sealer.Load()
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		err := scanEventDetail(tx.QueryRowContext(ctx, query, args...), &d, sl)
		if errors.Is(err, sql.ErrNoRows) {
			return queue.ErrEventNotFound
		}
		if err != nil {
			return err
		}
		events := []queue.EventSummary{d.EventSummary}
		if err := readEventJobs(ctx, tx, events); err != nil {
			return err
		}
		d.Jobs = events[0].Jobs
		return nil
	})
	return d, err
}

// ScanEvents reads one page of the events p selects, oldest first.
func (s *Store) ScanEvents(ctx context.Context, p queue.ScanParams) (queue.ScanPage, error) {
	limit, err := storekit.ScanPageSize(p)
	if err != nil {
		return queue.ScanPage{}, err
	}
	lo, hi := timeRange(p.Since, p.Until)
	var page queue.ScanPage
	sl := s.sealer.Load()
	err = s.readTx(ctx, func(tx *sql.Tx) error {
		after := p.After
		if after == 0 && !p.Since.IsZero() {
			var start sql.NullInt64
			if err := tx.QueryRowContext(ctx, sqlScanStart, lo).Scan(&start); err != nil {
				return err
			}
			if !start.Valid {
				return nil // nothing was stored since
			}
			after = start.Int64
		}
		var end, last *int64
		if err := tx.QueryRowContext(ctx, sqlScanBounds, after, limit).Scan(&end, &last); err != nil {
			return err
		}
		upTo, next, ok := storekit.ScanWindow(after, end, last)
		if !ok {
			return nil // nothing after the cursor
		}
		page.Next = next
		rows, err := tx.QueryContext(ctx, sqlScanEvents, after, upTo, lo, hi, p.Source, p.EventType)
		if err != nil {
			return err
		}
		defer rows.Close()
		bytes := 0
		for rows.Next() {
			var d queue.EventDetail
			if err := scanEventDetail(rows, &d, sl); err != nil {
				return err
			}
			page.Events = append(page.Events, d)
			if bytes += storekit.EventBytes(&d); bytes >= queue.ScanPageBytes && d.ID < upTo {
				page.Next = d.ID // the rest of the walk is the next page's
				break
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if err := rows.Close(); err != nil {
			return err
		}
		page.Jobs, err = scanJobs(ctx, tx, after, page.Events, sl)
		return err
	})
	if err != nil {
		return queue.ScanPage{}, fmt.Errorf("scan events: %w", err)
	}
	storekit.ScanJobs(page.Events, page.Jobs)
	return page, nil
}

// scanJobs reads the jobs of a scanned page's events, which came after
// the event after, in one statement.
func scanJobs(ctx context.Context, tx *sql.Tx, after int64, events []queue.EventDetail, sl *storekit.Sealer) ([]queue.JobSummary, error) {
	if len(events) == 0 {
		return nil, nil
	}
	rows, err := tx.QueryContext(ctx, sqlScanJobs, after, events[len(events)-1].ID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	keep := storekit.ScanJobFilter(events)
	var jobs []queue.JobSummary
	for rows.Next() {
		var j queue.JobSummary
		if err := scanSummary(rows, &j); err != nil {
			return nil, err
		}
		j.LastError = sl.DecodeText(j.LastError, storekit.ColumnLastError, j.ID)
		if keep(j.EventID) {
			jobs = append(jobs, j)
		}
	}
	return jobs, rows.Err()
}

// listJobsFiltered is ListJobs for the filters of storekit.Filtered.
func (s *Store) listJobsFiltered(ctx context.Context, p queue.ListParams, limit int) (queue.JobPage, error) {
	if err := storekit.CheckListFilters(p.Source, p.DeliveryID, p.Since, p.Until); err != nil {
		return queue.JobPage{}, fmt.Errorf("list jobs: %w", err)
	}
	lo, hi := timeRange(p.Since, p.Until)
	args := []any{string(p.Status), p.Source, p.Target, p.Cursor, p.EventType, lo, hi, limit + 1}
	query := sqlListJobsWalk
	switch {
	case p.DeliveryID != "":
		query = sqlListJobsByDelivery
		args = append(args, p.DeliveryID, s.keyIDs(p.Source, p.DeliveryID))
	case !p.Since.IsZero():
		query = sqlListJobsSince
	}
	return s.listJobs(ctx, limit, query, args...)
}
