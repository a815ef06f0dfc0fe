package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/storekit"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// The operators' reads of events, and the jobs listing's filters beyond
// status, source and target. Each statement has an index to walk: the
// dedupe key's unique index for a delivery id, events_created for time
// order and ranges, events_no_jobs for events without a job. The other
// filters (source, event type, status, target) narrow the walk.
const (
	eventCols = `id, source, delivery_id, event_type, created_at`

	// eventFilter: $1, $2 the time range; $3 source, $4 event type ('' for
	// any); $5 has_target (-1 any, 0 none, 1 some); $6 the cursor, $7 its
	// time. The range's upper end is already cut at the cursor's time, so
	// the cursor only skips the rows of that same millisecond.
	eventFilter = `created_at >= $1 AND created_at < $2
	AND ($3 = '' OR source = $3) AND ($4 = '' OR event_type = $4)
	AND ($5::int < 0 OR (targets > 0) = ($5::int > 0))
	AND ($6::bigint = 0 OR created_at < $7 OR id < $6)`

	sqlListEvents = `SELECT ` + eventCols + ` FROM events
WHERE ` + eventFilter + `
ORDER BY created_at DESC, id DESC LIMIT $8`

	sqlListBareEvents = `SELECT ` + eventCols + ` FROM events
WHERE targets = 0 AND ` + eventFilter + `
ORDER BY created_at DESC, id DESC LIMIT $8`

	sqlListEventByKey = `SELECT ` + eventCols + ` FROM events
WHERE source = $3 AND delivery_id = $9 AND ` + eventFilter + `
ORDER BY created_at DESC, id DESC LIMIT $8`

	// sqlCursorTime is the time of the cursor's event, or of the nearest
	// older one if it was deleted since.
	sqlCursorTime = `SELECT created_at FROM events WHERE id <= $1 ORDER BY id DESC LIMIT 1`

	sqlEventJobs = `SELECT event_id, id, target, status, attempts FROM jobs
WHERE event_id = ANY ($1::bigint[]) ORDER BY event_id, id`

	// eventDetailCols are an event with what its targets receive, in
	// scanEventDetail's order: every read of an event's body goes through
	// the two together.
	eventDetailCols = eventCols + `, headers, payload, sealed`

	sqlGetEvent = `SELECT ` + eventDetailCols + ` FROM events WHERE id = $1`

	sqlFindEvent = `SELECT ` + eventDetailCols + ` FROM events WHERE source = $1 AND delivery_id = $2`

	// sqlScanBounds reads where a page of a scan ends: the id of the
	// $2-th event after $1 (NULL when fewer are left), and the newest
	// event's id. Both walk the primary key from $1 on, never the events
	// before it.
	sqlScanBounds = `SELECT (SELECT id FROM events WHERE id > $1 ORDER BY id LIMIT 1 OFFSET $2::int - 1),
	(SELECT max(id) FROM events)`

	// sqlScanStart is where a scan since $1 starts: before the first
	// event stored since then. It reads events_created from $1 on: with
	// min(id) the planner would walk the primary key from the oldest
	// event to the first one stored since, which min(id + 0) cannot.
	sqlScanStart = `SELECT min(id + 0) - 1 FROM events WHERE created_at >= $1`

	// sqlScanEvents reads the events of one page of a scan, ($1, $2] in id
	// order through the primary key, that match the filters: $3, $4 the
	// time range, $5 source, $6 event type ('' for any).
	sqlScanEvents = `SELECT ` + eventDetailCols + ` FROM events
WHERE id > $1 AND id <= $2 AND created_at >= $3 AND created_at < $4
	AND ($5 = '' OR source = $5) AND ($6 = '' OR event_type = $6)
ORDER BY id`

	// sqlScanJobs reads the jobs of the events ($1, $2] of a scan's page,
	// as the jobs listing shows them: one range of jobs_event, whatever
	// the filters kept of the page, joined to the same range of the
	// events (without it the planner hashed a scan of every event).
	sqlScanJobs = `SELECT ` + jobCols + `
FROM jobs AS j JOIN events AS e ON e.id = j.event_id
WHERE j.event_id > $1 AND j.event_id <= $2 AND e.id > $1 AND e.id <= $2
ORDER BY j.event_id, j.id`

	// jobCols are the columns of a queue.JobSummary, in scanSummary's order.
	jobCols = `j.id, j.event_id, j.source, e.delivery_id, e.event_type, j.target, j.status,
	j.attempts, j.replays, j.run_at, j.last_error, j.created_at, j.finished_at`

	// jobFilter: $1 status, $2 source, $3 target, $5 event type ('' for
	// any); $4 the cursor; $6, $7 the time range of the event.
	jobFilter = `($1 = '' OR j.status = $1) AND ($2 = '' OR j.source = $2) AND ($3 = '' OR j.target = $3)
	AND ($4::bigint = 0 OR j.id < $4) AND ($5 = '' OR e.event_type = $5)
	AND e.created_at >= $6 AND e.created_at < $7`

	sqlListJobsByDelivery = `SELECT ` + jobCols + `
FROM events AS e JOIN jobs AS j ON j.event_id = e.id
WHERE e.source = $2 AND e.delivery_id = $9 AND ` + jobFilter + `
ORDER BY j.id DESC LIMIT $8`

	// sqlListJobs serves a time range and an event type: the planner
	// walks events_created for a range and the jobs' primary key
	// otherwise (SQLite needs a statement for each).
	sqlListJobs = `SELECT ` + jobCols + `
FROM jobs AS j JOIN events AS e ON e.id = j.event_id
WHERE ` + jobFilter + `
ORDER BY j.id DESC LIMIT $8`
)

// The ends of an unbounded time range.
var (
	minTime = pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	maxTime = pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}
)

// timeRange is a time filter as bind values, unbounded ends infinite.
func timeRange(since, until time.Time) (pgtype.Timestamptz, pgtype.Timestamptz) {
	lo, hi := minTime, maxTime
	if !since.IsZero() {
		lo = pgtype.Timestamptz{Time: ms(since), Valid: true}
	}
	if !until.IsZero() {
		hi = pgtype.Timestamptz{Time: ms(until), Valid: true}
	}
	return lo, hi
}

// ListEvents pages through events matching p, newest first.
func (s *Store) ListEvents(ctx context.Context, p queue.EventListParams) (queue.EventPage, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
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
	err = s.readTx(ctx, func(tx pgx.Tx) error {
		cursorAt := minTime
		if p.Cursor > 0 {
			var at time.Time
			err := tx.QueryRow(ctx, sqlCursorTime, p.Cursor).Scan(&at)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil // nothing is older than the cursor
			}
			if err != nil {
				return err
			}
			cursorAt = pgtype.Timestamptz{Time: at, Valid: true}
			if next := at.Add(time.Millisecond); hi.InfinityModifier != pgtype.Finite || next.Before(hi.Time) {
				hi = pgtype.Timestamptz{Time: next, Valid: true}
			}
		}
		args := []any{lo, hi, p.Source, p.EventType, storekit.HasTarget(p.HasTarget), p.Cursor, cursorAt, limit + 1}
		if p.DeliveryID != "" {
			args = append(args, p.DeliveryID)
		}
		rows, err := tx.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		events = make([]queue.EventSummary, 0, limit+1)
		for rows.Next() {
			var e queue.EventSummary
			if err := scanEvent(rows, &e); err != nil {
				rows.Close()
				return err
			}
			events = append(events, e)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		return readEventJobs(ctx, tx, events)
	})
	if err != nil {
		return queue.EventPage{}, s.readFail("list events", err)
	}
	return storekit.TrimEventPage(events, limit), nil
}

// scanEvent scans eventCols, followed by extra destinations.
func scanEvent(row pgx.Row, e *queue.EventSummary, extra ...any) error {
	return row.Scan(append([]any{&e.ID, &e.Source, &e.DeliveryID, &e.EventType, &e.CreatedAt}, extra...)...)
}

// readEventJobs fills the jobs of events in one statement.
func readEventJobs(ctx context.Context, tx pgx.Tx, events []queue.EventSummary) error {
	if len(events) == 0 {
		return nil
	}
	ids, add := storekit.EventJobs(events)
	rows, err := tx.Query(ctx, sqlEventJobs, ids)
	if err != nil {
		return err
	}
	var eventID int64
	var j queue.EventJob
	_, err = pgx.ForEachRow(rows, []any{&eventID, &j.ID, &j.Target, &j.Status, &j.Attempts}, func() error {
		add(eventID, j)
		return nil
	})
	return err
}

// GetEvent returns one event with its headers, payload and jobs.
func (s *Store) GetEvent(ctx context.Context, id int64) (queue.EventDetail, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	d, err := s.readEvent(ctx, sqlGetEvent, id)
	if err != nil {
		return queue.EventDetail{}, s.readFail(fmt.Sprintf("get event %d", id), err)
	}
	return d, nil
}

// FindEvent returns the event source's sender delivered as deliveryID.
func (s *Store) FindEvent(ctx context.Context, source, deliveryID string) (queue.EventDetail, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	d, err := s.readEvent(ctx, sqlFindEvent, source, deliveryID)
	if err != nil {
		return queue.EventDetail{}, s.readFail(fmt.Sprintf("find event %q of %s", deliveryID, source), err)
	}
	return d, nil
}

// scanEventDetail scans eventDetailCols into d: the one place a stored
// event's headers and payload become an EventDetail's, opened with sl
// when sealed (ReadError says why not, when a key is missing).
func scanEventDetail(row pgx.Row, d *queue.EventDetail, sl *storekit.Sealer) error {
	var hdr, sealed []byte
	if err := scanEvent(row, &d.EventSummary, &hdr, &d.Payload, &sealed); err != nil {
		return err
	}
	d.Headers, d.Payload, d.ReadError = storekit.ReadStored(sl, d.Source, d.DeliveryID, hdr, d.Payload, sealed)
	return nil
}

func (s *Store) readEvent(ctx context.Context, query string, args ...any) (queue.EventDetail, error) {
	var d queue.EventDetail
	sl := s.sealer.Load()
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		err := scanEventDetail(tx.QueryRow(ctx, query, args...), &d, sl)
		if errors.Is(err, pgx.ErrNoRows) {
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
	ctx, cancel := s.bound(ctx)
	defer cancel()
	limit, err := storekit.ScanPageSize(p)
	if err != nil {
		return queue.ScanPage{}, err
	}
	lo, hi := timeRange(p.Since, p.Until)
	var page queue.ScanPage
	sl := s.sealer.Load()
	err = s.readTx(ctx, func(tx pgx.Tx) error {
		after := p.After
		if after == 0 && !p.Since.IsZero() {
			var start pgtype.Int8
			if err := tx.QueryRow(ctx, sqlScanStart, lo).Scan(&start); err != nil {
				return err
			}
			if !start.Valid {
				return nil // nothing was stored since
			}
			after = start.Int64
		}
		var end, last *int64
		if err := tx.QueryRow(ctx, sqlScanBounds, after, limit).Scan(&end, &last); err != nil {
			return err
		}
		upTo, next, ok := storekit.ScanWindow(after, end, last)
		if !ok {
			return nil // nothing after the cursor
		}
		page.Next = next
		rows, err := tx.Query(ctx, sqlScanEvents, after, upTo, lo, hi, p.Source, p.EventType)
		if err != nil {
			return err
		}
		bytes := 0
		for rows.Next() {
			var d queue.EventDetail
			if err := scanEventDetail(rows, &d, sl); err != nil {
				rows.Close()
				return err
			}
			page.Events = append(page.Events, d)
			if bytes += storekit.EventBytes(&d); bytes >= queue.ScanPageBytes && d.ID < upTo {
				page.Next = d.ID // the rest of the walk is the next page's
				break
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		page.Jobs, err = scanJobs(ctx, tx, after, page.Events, sl)
		return err
	})
	if err != nil {
		return queue.ScanPage{}, s.readFail("scan events", err)
	}
	storekit.ScanJobs(page.Events, page.Jobs)
	return page, nil
}

// scanJobs reads the jobs of a scanned page's events, which came after
// the event after, in one statement.
func scanJobs(ctx context.Context, tx pgx.Tx, after int64, events []queue.EventDetail, sl *storekit.Sealer) ([]queue.JobSummary, error) {
	if len(events) == 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, sqlScanJobs, after, events[len(events)-1].ID)
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
	query := sqlListJobs
	if p.DeliveryID != "" {
		query = sqlListJobsByDelivery
		args = append(args, p.DeliveryID)
	}
	return s.listJobs(ctx, limit, query, args...)
}
