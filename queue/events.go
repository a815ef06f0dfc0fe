package queue

import (
	"context"
	"errors"
	"time"
)

// EventStore is the part of Store that serves operators beyond the jobs:
// the stored events (also those no target wanted), a lookup by the
// sender's delivery id, and the writes that deliver a stored event again.
// None of it is on the hot path of ingest or the pool.
type EventStore interface {
	// ListEvents pages through events matching p, newest first (by the
	// time they were stored, then by id), each with its jobs.
	ListEvents(ctx context.Context, p EventListParams) (EventPage, error)

	// GetEvent returns one event with its headers, payload and jobs.
	// ErrEventNotFound if there is none.
	GetEvent(ctx context.Context, id int64) (EventDetail, error)

	// FindEvent returns the event the sender of source delivered as
	// deliveryID, through the store's dedupe lookup (an index, or
	// SQLite's key set), never a scan.
	// ErrEventNotFound if there is none.
	FindEvent(ctx context.Context, source, deliveryID string) (EventDetail, error)

	// Resend gives the done or dead job id a fresh attempt budget, due
	// now, as Replay gives a dead one: it counts as a replay, and its
	// history keeps every earlier attempt. ErrNotFound if there is no such
	// job, ErrNotFinished if it is pending or running.
	Resend(ctx context.Context, id int64) error

	// AddJob makes a new pending job, due now, that delivers the stored
	// event eventID to target, and returns its id. The caller checks that
	// target is a target of the event's source. ErrEventNotFound if there
	// is no such event.
	AddJob(ctx context.Context, eventID int64, target string) (int64, error)
}

// Sentinel errors of EventStore, wrapped or bare.
var (
	ErrEventNotFound = errors.New("event not found")
	ErrNotFinished   = errors.New("job is not finished")
)

// EventFilter selects events for ListEvents. Zero fields match everything.
type EventFilter struct {
	Source    string
	EventType string
	// DeliveryID, with Source, selects the one event with that dedupe
	// key; delivery ids are unique per source only, so it needs Source.
	DeliveryID string
	// Since and Until bound when the event was stored: Since <= created
	// < Until. Zero means unbounded.
	Since, Until time.Time
	// HasTarget, when not nil, keeps only events with (true) or without
	// (false) a job.
	HasTarget *bool
}

// EventListParams pages through events, newest first.
type EventListParams struct {
	EventFilter
	Limit  int   // default DefaultListLimit, at most MaxListLimit
	Cursor int64 // NextCursor of the previous page; 0 starts at the newest
}

// EventJob is one job of an event, as an event listing shows it.
type EventJob struct {
	ID       int64  `json:"id"`
	Target   string `json:"target"`
	Status   Status `json:"status"`
	Attempts int    `json:"attempts"`
}

// EventSummary is one row of an event listing.
type EventSummary struct {
	ID         int64      `json:"id"`
	Source     string     `json:"source"`
	DeliveryID string     `json:"delivery_id"`
	EventType  string     `json:"event_type,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	Jobs       []EventJob `json:"jobs"`
}

// EventPage is one page of an event listing; NextCursor is 0 on the last
// page.
type EventPage struct {
	Events     []EventSummary `json:"events"`
	NextCursor int64          `json:"next_cursor,omitempty"`
}

// EventDetail is one event with what its targets receive.
type EventDetail struct {
	EventSummary
	Headers []Header `json:"headers"`
	Payload []byte   `json:"payload"`
	// ReadError, when not empty, is why Headers and Payload are empty:
	// the event is sealed under a key the store's Keys do not hold, named
	// here, or does not open.
	ReadError string `json:"read_error,omitempty"`
}
