// Package queue is the durable webhook queue: accepted events, one job per
// target, leased claims, fenced finishes, retries with backoff, dead letters,
// replay and purge, and the worker pool that drives them.
//
// The package knows nothing of Caddy or HTTP. Each database lives in a
// subpackage that owns its SQL (queue/sqlite, queue/postgres) and implements
// Store; queue/queuetest holds the conformance suite every Store must pass,
// and queue/storekit the checks and encodings every Store shares.
package queue

import (
	"context"
	"errors"
	"time"
)

// Status is the state of a job.
type Status string

// The states of a job. A job is pending until claimed, running while a
// worker holds its lease, and ends done or dead (parked for a human). A job
// with an ordering key is blocked, not pending, while an earlier job of its
// (source, target, key) is unfinished (see Event.OrderingKey); it becomes
// pending when that job finishes.
const (
	StatusPending Status = "pending"
	StatusRunning Status = "running"
	StatusDone    Status = "done"
	StatusDead    Status = "dead"
	StatusBlocked Status = "blocked"
)

// Valid reports whether s is one of the five statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusPending, StatusRunning, StatusDone, StatusDead, StatusBlocked:
		return true
	}
	return false
}

// Header is one header a target should see, in the order received.
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Event is one accepted webhook. Enqueue stores it and fans it out into one
// job per entry of Targets, in the same transaction.
type Event struct {
	Source     string   // the receiver's name; scopes the dedupe key
	DeliveryID string   // the sender's id for this event; (Source, DeliveryID) is unique
	EventType  string   // e.g. "push", "order.paid"; may be empty
	Headers    []Header // headers forwarded to targets (content type, event header)
	Payload    []byte   // the raw body, exactly as signed
	Targets    []string // target names; empty means the event is stored with no job

	// OrderingKey, when not empty, orders the event's jobs: for each
	// target, a job is not claimable while an earlier job (by arrival) of
	// the same source, target and key is pending, running, waiting to
	// retry, or dead and holding its key (OrderingHold). Such a job is
	// stored blocked, and the store makes it pending when the job ahead
	// of it finishes, so waiting jobs cost the claim nothing.
	OrderingKey string
	// OrderingHold says what a job of this event that goes dead does to
	// its key: true holds the key, so later jobs stay blocked until the
	// dead job is replayed and done, or discarded; false releases it, and
	// the next job goes ahead. Ignored without OrderingKey.
	OrderingHold bool

	// Trace is the W3C trace context the event arrived in, kept so that
	// every attempt can continue the sender's trace: a traceparent, and
	// after a newline its tracestate if there was one. A Store keeps it
	// as given, in a column of its own, and hands it back on each Job;
	// empty (the common case) stores nothing. At most MaxTraceLen bytes.
	Trace string
}

// MaxTraceLen bounds Event.Trace, in bytes: a traceparent (55 bytes), a
// newline and the 512 bytes the W3C Trace Context specification lets a
// tracestate keep.
const MaxTraceLen = 55 + 1 + 512

// MaxOrderingKeyLen bounds Event.OrderingKey, in bytes.
const MaxOrderingKeyLen = 256

// EnqueueResult says what Enqueue did.
type EnqueueResult struct {
	EventID   int64
	Duplicate bool // (Source, DeliveryID) was already stored; nothing was added
	Jobs      int  // jobs created (0 for a duplicate)
}

// Job is a claimed job with everything a worker needs to deliver it.
type Job struct {
	ID         int64
	EventID    int64
	Source     string
	DeliveryID string
	EventType  string
	Target     string
	Headers    []Header
	Payload    []byte
	Trace      string // the event's Event.Trace; empty without one
	// Attempt numbers this delivery: attempts so far, this one included
	// (counted at claim). It keeps counting across replays, so a handler
	// can tell a resend from a first delivery; a hand-back uncharges it.
	Attempt int
	// Replays is how many times the job was replayed from dead; 0 until
	// the first replay.
	Replays int
	// ReplayBase is the attempts made before the last replay (0 if none):
	// the attempt budget (PoolConfig.MaxAttempts) and the backoff count
	// the attempts after it, Attempt − ReplayBase.
	ReplayBase int
	// Fence is this claim's fence token: a counter the store increments on
	// every claim of the job and never lowers, so it names this claim
	// alone. ExtendLeases, Finish and HandBack match on it.
	Fence      int64
	LeaseOwner string
	LeaseUntil time.Time
	CreatedAt  time.Time

	// ReadErr, when not nil, says that the job's event could not be read:
	// its payload and headers are sealed under a key the store's Keys do
	// not hold (a *seal.MissingKeyError names it), or do not open. Headers
	// and Payload are then empty. The pool records such an attempt dead
	// with this error without running the handler, so nothing is sent on
	// as garbage; a replay delivers the job once the key is listed again.
	ReadErr error

	// Code is set by the handler before it returns: what the target
	// reported of this attempt (an HTTP status, an exit code), which the
	// pool records with the attempt (Completion.Code). Only the handler's
	// goroutine writes it, and the pool reads it after the handler
	// returned. Default: none.
	Code Code
}

// Claimed returns the claim of j that the fenced Store methods take.
func (j *Job) Claimed() Claimed { return Claimed{ID: j.ID, Fence: j.Fence} }

// Claimed names one claim of a job: a job id and the fence token the claim
// was given (Job.Fence). A claim is stale once the job was claimed again,
// by any owner, or finished or handed back: the fenced methods then change
// nothing. The lease owner alone cannot tell a pool's stale claim from its
// current one, after a pause longer than the lease let the pool claim its
// own running job again.
type Claimed struct {
	ID    int64
	Fence int64
}

// ExtendParams extends the leases of claims still held.
type ExtendParams struct {
	Owner  string        // the owner the claims were made by
	Claims []Claimed     // the claims to extend
	Lease  time.Duration // the new lease runs this long from Now
	// Now is the time the new lease starts from. Zero means the store's
	// clock: the database server's for PostgreSQL, so that instances
	// whose clocks disagree still agree on when a lease ends.
	Now time.Time
}

// ClaimParams selects and leases ready jobs.
type ClaimParams struct {
	Owner string        // the lease owner written on each claimed job; unique per pool
	Limit int           // at most this many jobs
	Lease time.Duration // lease length from Now
	// Now decides which jobs are due and when their leases end. Zero
	// means the store's clock; PostgreSQL then takes lease deadlines
	// (and the expiry of earlier leases) from the database server's clock,
	// so instances whose clocks disagree still agree on them.
	Now time.Time
	// Routes, when not nil, limits the claim to jobs for these (source,
	// target) pairs, so a job whose source or target no longer exists in
	// config waits, visible in Stats, instead of failing. A Store reads
	// each route's pending jobs on their own, so jobs of routes not asked
	// for cost the claim nothing, however many there are.
	Routes []Route
	// Quotas, when not nil, is as long as Routes and caps each route's
	// share of the claim: at most Quotas[i] jobs of Routes[i], pending
	// and expired leases together, each quota positive. The pool's flow
	// control (PoolConfig.Flow) sets them, so that it never claims a job
	// that a rate, a concurrency limit or an open circuit would hold
	// back with its lease running. Default: nil, Limit alone bounds the
	// claim.
	Quotas []int
}

// Route names one target of one source.
type Route struct {
	Source string
	Target string
}

// Completion is the outcome of one attempt, recorded by Finish under the fence
// (the job must still be running under Owner, in the claim Fence names).
type Completion struct {
	JobID    int64
	Owner    string
	Fence    int64     // the claim's Job.Fence
	Status   Status    // StatusDone, StatusPending (retry at RunAt) or StatusDead
	RunAt    time.Time // next attempt, for StatusPending
	Error    string    // last error; stored as SafeText(Error, MaxErrorLen)
	Started  time.Time // attempt start, for the history
	Duration time.Duration
	Code     Code // what the target reported (Job.Code), for the history
	Now      time.Time
	// HandedBack says the run was cut short by a stop (or a listener's),
	// not ended by its job: the job goes back to pending, due at RunAt,
	// without the attempt it was claimed with, and its history records the
	// attempt as handed back with its real Started and Duration, so the
	// history explains the delivery an upstream may have seen. Status must
	// be StatusPending; Error is not the job's last error. A claim handed
	// back before its delivery began goes through Store.HandBack instead,
	// and leaves no history.
	HandedBack bool
}

// MaxErrorLen bounds a job's stored last error, in bytes. A store keeps
// SafeText(Completion.Error, MaxErrorLen): lines kept, control bytes and
// invalid UTF-8 (which PostgreSQL's text refuses) replaced, cut with TextCut.
const MaxErrorLen = 2048

// MaxHistory bounds the attempt history kept per job.
const MaxHistory = 20

// Filter selects jobs for ReplayDead, DiscardJobs, ListJobs.
type Filter struct {
	Status Status // empty: any
	Source string // empty: any
	Target string // empty: any
}

// ListParams pages through jobs, newest first.
type ListParams struct {
	Filter
	Limit  int   // default 50, at most 1000
	Cursor int64 // return jobs with ID < Cursor; 0 starts at the newest

	// EventType, when not empty, keeps the jobs of events of this type.
	EventType string
	// DeliveryID, with Source, keeps the jobs of the one event with that
	// dedupe key (delivery ids are unique per source only).
	DeliveryID string
	// Since and Until bound when the job's event was stored: Since <=
	// created < Until. Zero means unbounded.
	Since, Until time.Time
}

// Page sizes of ListJobs.
const (
	DefaultListLimit = 50
	MaxListLimit     = 1000
)

// JobSummary is one row of a listing.
type JobSummary struct {
	ID         int64     `json:"id"`
	EventID    int64     `json:"event_id"`
	Source     string    `json:"source"`
	DeliveryID string    `json:"delivery_id"`
	EventType  string    `json:"event_type,omitempty"`
	Target     string    `json:"target"`
	Status     Status    `json:"status"`
	Attempts   int       `json:"attempts"`
	Replays    int       `json:"replays,omitempty"`
	RunAt      time.Time `json:"run_at"`
	LastError  string    `json:"last_error,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
}

// JobPage is one page of a listing; NextCursor is 0 on the last page.
type JobPage struct {
	Jobs       []JobSummary `json:"jobs"`
	NextCursor int64        `json:"next_cursor,omitempty"`
}

// OutcomeLeaseLost is the history's outcome of an attempt whose lease ran
// out before any outcome was recorded: its process ended (a crash, kill
// -9), stalled past the lease or lost the store. The next claim of the
// job finds the claim unfinished and records it, with its start, and as
// its duration the time until the lease's last end, the most it can have
// run. It is no job status.
const OutcomeLeaseLost Status = "lease_lost"

// LeaseLostError is the error text of such an attempt.
const LeaseLostError = "interrupted: the lease ran out before an outcome was recorded (the process ended, stalled or lost the store); it ran at most this long"

// Attempt is one entry of a job's history.
type Attempt struct {
	Attempt  int           `json:"attempt"`
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration_ns"`
	// Outcome is the job's status the attempt ended with: done, pending
	// (will retry), dead, running if it was handed back, or
	// OutcomeLeaseLost if its lease ran out before anything was recorded.
	Outcome Status `json:"outcome"`
	// Code is what the target reported: the HTTP status the upstream
	// answered, or the program's exit code; absent when there is none.
	Code  Code   `json:"status,omitzero"`
	Error string `json:"error,omitempty"`
}

// JobDetail is one job with its payload and history.
type JobDetail struct {
	JobSummary
	Headers    []Header  `json:"headers"`
	Payload    []byte    `json:"payload"`
	LeaseOwner string    `json:"lease_owner,omitempty"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	History    []Attempt `json:"history"`
	// ReadError, when not empty, is why Headers and Payload are empty:
	// the event is sealed under a key the store's Keys do not hold, named
	// here, or does not open.
	ReadError string `json:"read_error,omitempty"`
}

// Count is the number of jobs in one (source, target, status) group.
type Count struct {
	Source string `json:"source"`
	Target string `json:"target"`
	Status Status `json:"status"`
	Jobs   int64  `json:"jobs"`
	// OldestPending, in a pending group, is the age of the group's oldest
	// pending job that is due (how long it has waited since it became
	// due), 0 if none is due.
	OldestPending time.Duration `json:"oldest_pending_ns,omitempty"`
}

// Stats summarises the queue.
type Stats struct {
	Counts []Count `json:"counts"`
	// OldestPending is the age of the oldest pending job that is due, 0 if
	// none: the largest OldestPending of Counts.
	OldestPending time.Duration `json:"oldest_pending_ns"`
	Events        int64         `json:"events"`
	// Keys counts the stored values under each key id (Keys): an old key
	// may be removed once no value is under it. Empty when nothing is
	// sealed. Counted as the values change, so reading it costs the same
	// however many there are.
	Keys []KeyCount `json:"keys,omitempty"`
	// PlainEvents is the events whose payload and headers are stored
	// plain: Events less the sealed ones. A rekey seals them.
	PlainEvents int64 `json:"plain_events"`
}

// Store is the durable queue. Every method that writes returns only after
// its change is committed, so a nil error means durable.
type Store interface {
	// Enqueue stores ev and one pending job per target, due now; a duplicate
	// (Source, DeliveryID) reports Duplicate and adds nothing.
	Enqueue(ctx context.Context, ev Event) (EnqueueResult, error)

	// Claim leases up to p.Limit ready jobs (pending and due, or running with
	// an expired lease) in one statement, counting an attempt on each and
	// giving each claim a new fence token.
	Claim(ctx context.Context, p ClaimParams) ([]*Job, error)

	// ExtendLeases moves the lease of each claim still held (the job
	// running under p.Owner in that claim) to p.Now + p.Lease and returns
	// the ids it could not extend: those claims are lost.
	ExtendLeases(ctx context.Context, p ExtendParams) (lost []int64, err error)

	// Finish records completions under the fence. recorded[i] is false when
	// cs[i]'s claim is no longer held (the job is not running under its
	// owner in that claim); nothing is written for it.
	Finish(ctx context.Context, cs []Completion) (recorded []bool, err error)

	// HandBack returns the jobs of claims still held by owner to pending,
	// due now, without charging the attempt they were claimed with. It is
	// for claims whose delivery never began (claimed ahead, a late claim,
	// an app that refused the connection): it leaves no history. A run a
	// stop cut short is finished with Completion.HandedBack instead.
	HandBack(ctx context.Context, owner string, claims []Claimed) error

	// Held returns the jobs of those of claims that still hold their job
	// (it is running in that claim's fence, whether or not its lease ran
	// out), without headers or payload, in no particular order; a claim
	// no longer held is left out. A consumer that claimed jobs over the
	// network answers for them later, perhaps through another process:
	// Held tells that process each job's route, owner and attempt, to
	// decide the completion Finish records under the same fence.
	Held(ctx context.Context, claims []Claimed) ([]*Job, error)

	// Replay gives the dead job id a fresh attempt budget, due now; its
	// attempts keep counting and its replays go up by one.
	// ErrNotFound if there is no such job, ErrNotDead if it is not dead.
	Replay(ctx context.Context, id int64) error

	// ReplayDead replays every dead job matching f (f.Status is ignored),
	// in bounded chunks each committed on its own, so that no transaction
	// holds the writer for long; it returns the jobs replayed, also when
	// it fails part way.
	ReplayDead(ctx context.Context, f Filter) (int, error)

	// Discard deletes the job (not running) and its event if no job is left.
	Discard(ctx context.Context, id int64) error

	// DiscardJobs deletes every job matching f and the events left
	// without a job. f.Status must be StatusPending or StatusDead. Like
	// ReplayDead it works in bounded chunks, each committed on its own,
	// and returns the jobs deleted, also when it fails part way.
	DiscardJobs(ctx context.Context, f Filter) (int, error)

	// Purge deletes up to limit done jobs finished before cutoff, then events
	// with no job left, and returns the number of jobs deleted. Like
	// ReplayDead it works in bounded chunks, each committed on its own, so
	// any limit (the Housekeeper passes math.MaxInt) keeps every
	// transaction short; it returns the jobs deleted also when it fails
	// part way.
	Purge(ctx context.Context, cutoff time.Time, limit int) (int, error)

	// SetKeys replaces the keys the store seals and opens values with,
	// for a config load that lists other keys; the store's Config gives
	// the first ones. It fails, changing nothing, when the store's
	// ordering-key secret is sealed under a key k lacks, naming that key:
	// without the secret, no ordering key could be kept in order.
	SetKeys(ctx context.Context, k Keys) error

	// Rekey re-seals every stored value that is not under the first key
	// (or, with p.ToPlainText, writes every sealed value plain), in
	// bounded chunks, each committed on its own, while the store serves:
	// it takes at most about half of the writer's time. It returns when
	// nothing is left, when ctx ends, or on an error; the walk's position
	// is stored, so a rekey stopped for any reason, the process's end
	// included, resumes where it was. It is a no-op when the counts say
	// nothing is left. One rekey runs at a time per store
	// (ErrRekeyRunning).
	Rekey(ctx context.Context, p RekeyParams) (RekeyProgress, error)

	// Reads, from a read-only pool beside the writer.
	Stats(ctx context.Context, now time.Time) (Stats, error)
	ListJobs(ctx context.Context, p ListParams) (JobPage, error)
	GetJob(ctx context.Context, id int64) (JobDetail, error)

	// EventStore: events, lookups by delivery id, resend (events.go).
	EventStore

	// PauseStore: paused sources and targets (pause.go).
	PauseStore

	// Ready receives a value after a commit that made work ready (an
	// enqueue, replay or hand-back), so an idle pool in this process wakes at
	// once. It is buffered: a missed signal is never lost, only merged.
	Ready() <-chan struct{}

	Close() error
}

// Sentinel errors every Store returns, wrapped or bare.
var (
	ErrNotFound = errors.New("job not found")
	ErrNotDead  = errors.New("job is not dead")
	ErrRunning  = errors.New("job is running")
	ErrClosed   = errors.New("store closed")

	// ErrDiskLow refuses an Enqueue because the free space left to the
	// database is below the store's reserve. Only ingest is refused: the
	// reserve is there so that claims, finishes, purges and the other
	// writes that drain the backlog keep committing. A caller answers
	// "try again later" (the receiver's 503 disk_low); nothing was written.
	ErrDiskLow = errors.New("free disk space below the reserve")
)
