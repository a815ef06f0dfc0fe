package storekit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

// Filtered reports whether p uses a filter of the jobs listing that the
// plain listing statement does not have (event type, delivery id, time
// range); a Store's ListJobs then reads through its own statements.
func Filtered(p queue.ListParams) bool {
	return p.EventType != "" || p.DeliveryID != "" || !p.Since.IsZero() || !p.Until.IsZero()
}

// CheckListFilters returns an error for filters a listing cannot apply: a
// delivery id without its source, an empty time range.
func CheckListFilters(source, deliveryID string, since, until time.Time) error {
	if deliveryID != "" && source == "" {
		return errors.New("a delivery id filter needs the source too: delivery ids are unique per source only")
	}
	if !since.IsZero() && !until.IsZero() && !since.Before(until) {
		return fmt.Errorf("since %s is not before until %s", since.Format(time.RFC3339), until.Format(time.RFC3339))
	}
	return nil
}

// EventPageSize checks p and returns the number of events a page holds,
// as PageSize does for jobs. Every Store's ListEvents starts with it.
func EventPageSize(p queue.EventListParams) (int, error) {
	if err := CheckListFilters(p.Source, p.DeliveryID, p.Since, p.Until); err != nil {
		return 0, fmt.Errorf("list events: %w", err)
	}
	if p.Limit <= 0 {
		return queue.DefaultListLimit, nil
	}
	return min(p.Limit, queue.MaxListLimit), nil
}

// TrimEventPage makes the page a store read with one row more than size
// and sets its cursor.
func TrimEventPage(events []queue.EventSummary, size int) queue.EventPage {
	if len(events) <= size {
		return queue.EventPage{Events: events}
	}
	events = events[:size]
	return queue.EventPage{Events: events, NextCursor: events[size-1].ID}
}

// HasTarget encodes a HasTarget filter for a statement: -1 for any, 0 for
// events without a job, 1 for events with one.
func HasTarget(h *bool) int64 {
	switch {
	case h == nil:
		return -1
	case *h:
		return 1
	}
	return 0
}

// EventJobs prepares a page of events for their jobs, which a Store reads
// in one statement: it gives each event an empty, non-nil Jobs, and returns
// the events' ids and a function that adds a job read for an event id to
// that event (a job of no event of the page is dropped).
func EventJobs(events []queue.EventSummary) (ids []int64, add func(eventID int64, j queue.EventJob)) {
	ids = make([]int64, len(events))
	at := make(map[int64]int, len(events))
	for i := range events {
		ids[i] = events[i].ID
		at[events[i].ID] = i
		events[i].Jobs = []queue.EventJob{}
	}
	return ids, func(eventID int64, j queue.EventJob) {
		if i, ok := at[eventID]; ok {
			events[i].Jobs = append(events[i].Jobs, j)
		}
	}
}

// ScanPageSize checks p and returns the number of events a page of
// ScanEvents walks. Every Store's ScanEvents starts with it.
func ScanPageSize(p queue.ScanParams) (int, error) {
	if err := CheckListFilters(p.Source, "", p.Since, p.Until); err != nil {
		return 0, fmt.Errorf("scan events: %w", err)
	}
	if p.After < 0 {
		return 0, fmt.Errorf("scan events: After must not be negative, got %d", p.After)
	}
	if p.Limit <= 0 {
		return queue.ScanPageSize, nil
	}
	return min(p.Limit, queue.ScanPageSize), nil
}

// ScanWindow returns the newest event id a page of ScanEvents reads after
// the cursor after, from its statement's bounds: end, the id of the
// limit-th event after the cursor (nil when fewer follow), and last, the
// newest event's id (nil when there is none). next is the page's cursor,
// 0 on the last page; ok is false when no event comes after the cursor.
func ScanWindow(after int64, end, last *int64) (upTo, next int64, ok bool) {
	if last == nil || *last <= after {
		return 0, 0, false
	}
	if end != nil && *end < *last {
		return *end, *end, true
	}
	return *last, 0, true
}

// ScanJobs gives each event of a scanned page its jobs, in the short form
// an event listing shows, from the page's job summaries (in event then job
// id order); an event without a job gets an empty, non-nil list.
func ScanJobs(events []queue.EventDetail, jobs []queue.JobSummary) {
	k := 0
	for i := range events {
		e := &events[i]
		e.Jobs = []queue.EventJob{}
		for k < len(jobs) && jobs[k].EventID < e.ID {
			k++
		}
		for ; k < len(jobs) && jobs[k].EventID == e.ID; k++ {
			j := &jobs[k]
			e.Jobs = append(e.Jobs, queue.EventJob{ID: j.ID, Target: j.Target, Status: j.Status, Attempts: j.Attempts})
		}
	}
}

// ScanJobFilter returns a function that reports whether a job of event
// eventID belongs to a scanned page of events, in id order: a Store reads
// the jobs of the page's range of ids, and keeps those of its events. The
// function must be called with ascending event ids.
func ScanJobFilter(events []queue.EventDetail) func(eventID int64) bool {
	i := 0
	return func(eventID int64) bool {
		for i < len(events) && events[i].ID < eventID {
			i++
		}
		return i < len(events) && events[i].ID == eventID
	}
}

// CheckRequeue returns an error for the first item Requeue cannot take:
// each names a job, or an event and a target, not both. Every Store's
// Requeue starts with it.
func CheckRequeue(items []queue.Requeue) error {
	for i, it := range items {
		switch {
		case it.JobID > 0 && it.EventID == 0 && it.Target == "":
		case it.JobID == 0 && it.EventID > 0 && it.Target != "":
		default:
			return fmt.Errorf("requeue: item %d must name a job, or an event and a target: %+v", i, it)
		}
	}
	return nil
}

// InChunks calls chunk with the bounds [lo, hi) of successive chunks of n
// items, at most size each, until every item is done, chunk fails or ctx
// ends (checked between two calls). Requeue cuts its items with it.
func InChunks(ctx context.Context, n, size int, chunk func(lo, hi int) error) error {
	for lo := 0; lo < n; lo += size {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := chunk(lo, min(lo+size, n)); err != nil {
			return err
		}
	}
	return nil
}

// EventBytes is what a scanned event holds in memory of its body: its
// payload and headers, which ScanEvents counts against ScanPageBytes.
func EventBytes(d *queue.EventDetail) int {
	n := len(d.Payload)
	for _, h := range d.Headers {
		n += len(h.Name) + len(h.Value)
	}
	return n
}
