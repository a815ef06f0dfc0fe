package storekit

import (
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
