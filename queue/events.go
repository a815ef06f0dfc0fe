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

	// ScanEvents reads one page of the events p selects, oldest first:
	// those after the event p.After, in id order, each with its headers,
	// payload and jobs. A page walks at most p.Limit events of the store
	// through the primary key, whether or not they match, and stops early
	// once it holds ScanPageBytes of payloads and headers; so a page costs
	// the same however large the store is and however few events match,
	// and the caller holds one page of bodies at a time. The page's Next
	// is where the next one starts, 0 once the walk reached the newest
	// event.
	ScanEvents(ctx context.Context, p ScanParams) (ScanPage, error)

	// Requeue delivers stored events again, each item due at its RunAt
	// (now when zero): a dead job is replayed and a done one resent, as
	// Replay and Resend do; an item with an event and a target gets a new
	// job, as AddJob makes. It works in chunks of at most RequeueChunk
	// items, each committed on its own, and returns for each item the id
	// of the job it queued, 0 where it queued nothing (the job was no
	// longer done or dead, or the job or the event is gone), also when
	// it fails part way: the items of the chunks that committed are
	// filled in.
	Requeue(ctx context.Context, items []Requeue) ([]int64, error)
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

// ScanParams selects the events ScanEvents reads. Zero fields match
// everything.
type ScanParams struct {
	Source    string
	EventType string
	// Since and Until bound when the event was stored: Since <= created
	// < Until. Zero means unbounded.
	Since, Until time.Time
	// After is the cursor: the page starts after the event with this id
	// (ScanPage.Next of the page before); 0 starts at the oldest event.
	After int64
	// Limit is how many events of the store one page walks, matching or
	// not. Default and at most ScanPageSize.
	Limit int
}

// The bounds of one page of ScanEvents: the events it walks, and the
// payload and header bytes it holds.
const (
	ScanPageSize  = 256
	ScanPageBytes = 4 << 20
)

// ScanPage is one page of ScanEvents.
type ScanPage struct {
	// Events are the page's events that match, in id order, each with
	// its headers, payload and jobs.
	Events []EventDetail
	// Jobs are the jobs of Events as the jobs listing shows them, in
	// event then job id order.
	Jobs []JobSummary
	// Next is the id the next page starts after; 0 when no event is left
	// after this page.
	Next int64
}

// RequeueChunk bounds the items one transaction of Requeue changes, as
// the bulk replay's chunks do.
const RequeueChunk = 256

// Requeue is one item of EventStore.Requeue: a done or dead job to
// deliver again (JobID), or a stored event to deliver to a target as a
// new job (EventID and Target, JobID 0).
type Requeue struct {
	JobID   int64
	EventID int64
	Target  string
	// RunAt is when the job is due; zero means now. A replay spread over
	// time gives each item its own, kept in the store like any due time.
	RunAt time.Time
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
