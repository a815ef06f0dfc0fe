// Package adminapi holds the wire types of the webhook admin API
// (/webhook/… on Caddy's admin endpoint, docs/ADMIN.md): the requests and
// responses of its endpoints, the lines of the live tail, and the error
// body every JSON API of the plugin answers with. The admin handlers, the
// `caddy webhook` CLI, the dashboard and the consumer endpoint and its
// client all import it, so a field cannot mean one thing to the server and
// another to a client.
//
// It knows nothing of Caddy: the types are plain data over package queue's.
package adminapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

// BasePath is where the admin API's endpoints live on Caddy's admin
// endpoint.
const BasePath = "/webhook/"

// MaxLimit bounds one page of a listing, as queue.ListParams does.
const MaxLimit = 1000

// Error is the body of every error answer: the message and, for an error
// about one request parameter or body field, its name, for a client to
// read without matching the message ({"error": "…", "param": "delivery_id"}).
type Error struct {
	Error string `json:"error"`
	Param string `json:"param,omitempty"`
}

// WriteJSON answers v as JSON with status. It encodes v before writing
// anything, so an encoding error can still become a proper error answer;
// no answer of the plugin's APIs may be cached.
func WriteJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	// A write error means the client is gone; the status line is already
	// sent, so there is no one left to tell.
	_, _ = w.Write(append(b, '\n'))
	return nil
}

// WriteError answers status with the error body of msg and param (empty
// when the error is about no parameter).
func WriteError(w http.ResponseWriter, status int, msg, param string) {
	_ = WriteJSON(w, status, Error{Error: msg, Param: param}) // two strings always encode
}

// ValidName reports whether s may name a source or a target: short,
// printable in logs, URLs and shells without quoting.
func ValidName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// StatsResponse is the answer of GET /webhook/stats: queue.Stats with each
// count marked when its route is not in the running config, and the oldest
// pending age also spelt for humans.
type StatsResponse struct {
	queue.Stats
	Counts []StatsCount `json:"counts"`
	// Unroutable is the number of pending jobs no worker takes, because
	// their (source, target) is not in the running config.
	Unroutable        int64  `json:"unroutable"`
	OldestPendingText string `json:"oldest_pending,omitempty"`
	// Pauses are the paused sources and targets, also those with no job.
	Pauses []queue.Pause `json:"pauses"`
	// Lag is each route's delivery lag (acceptance to delivery) over the
	// last 5 minutes in the instance that answers: p50 and p99.
	Lag []RecentLag `json:"lag"`
}

// StatsCount is one count of the stats; Unroutable marks a route the
// running config does not have (a target renamed or removed with jobs
// left): its pending jobs wait until a config names it again or someone
// discards them.
type StatsCount struct {
	queue.Count
	Unroutable bool `json:"unroutable,omitempty"`
	// Paused marks a route paused as a whole source or as one target:
	// no worker claims its jobs until it is resumed.
	Paused bool `json:"paused,omitempty"`
	// Circuit is open or half_open while the route's circuit breaker
	// holds its deliveries back, in the instance that answers; absent
	// when closed.
	Circuit string `json:"circuit,omitempty"`
}

// RecentLag is the delivery lag of one route over the last minutes, as
// the stats report it.
type RecentLag struct {
	Source string `json:"source"`
	Target string `json:"target"`
	// Deliveries is how many deliveries the quantiles are taken over: the
	// route's last ones in this instance, within the window, at most 512.
	Deliveries int           `json:"deliveries"`
	P50        time.Duration `json:"p50_ns"`
	P99        time.Duration `json:"p99_ns"`
}

// JobResponse is the answer of GET /webhook/jobs/{job}: a job in full. The
// payload is base64 in JSON, as []byte always is; payload_text repeats it
// as text when it is valid UTF-8, which is what a human reading the
// response wants.
type JobResponse struct {
	queue.JobDetail
	History     []AttemptResponse `json:"history"`
	PayloadText string            `json:"payload_text,omitempty"`
	// Filter is the filter of the job's target in the running config,
	// which took the event; empty when the target has none.
	Filter string `json:"filter,omitempty"`
}

// AttemptResponse is one attempt of a job's history, its outcome said
// with the attempt words of the logs, metrics and tail (Attempt…).
type AttemptResponse struct {
	queue.Attempt
	Outcome string `json:"outcome"`
}

// ReplayResponse reports a replay; ID is set when one job was replayed.
// Unroutable counts the dead jobs the filter matched but a bulk replay
// left dead, because their route is not in the running config: replayed,
// they would only wait as pending jobs no worker takes.
type ReplayResponse struct {
	ID         int64 `json:"id,omitempty"`
	Replayed   int   `json:"replayed"`
	Unroutable int64 `json:"unroutable,omitempty"`
}

// Search is what a search by content (the where parameter of the events
// and jobs listings and of a bulk replay) reports beside its matches.
// One request walks the store for a bounded time and number of events; a
// search that did not reach the newest event says where to continue:
// next_cursor, the request's cursor parameter.
type Search struct {
	// Where is the expression, as given.
	Where string `json:"where"`
	// Scanned is how many events the expression was evaluated on.
	Scanned int `json:"scanned"`
	// Stopped says why the request ended before the newest event: the
	// page was full (SearchStoppedLimit), or the request's time or
	// number of events was spent (SearchStoppedTime, SearchStoppedRows);
	// empty when the walk reached the newest event.
	Stopped string `json:"stopped,omitempty"`
	// EvalErrors counts the events the expression failed on (a field
	// they lack, say): they do not match; in a search of jobs, where it
	// runs once for each job, the jobs. EvalError is the first one's
	// message, with what it quotes of the values taken out.
	EvalErrors int    `json:"eval_errors,omitempty"`
	EvalError  string `json:"eval_error,omitempty"`
	// Unread counts the events the store could not open (sealed under a
	// key the running config does not list): the expression never saw
	// them, so they neither match nor are replayed. UnreadError is the
	// first one's reason, which names the key.
	Unread      int    `json:"unread,omitempty"`
	UnreadError string `json:"unread_error,omitempty"`
}

// Why a search request ended early (Search.Stopped).
const (
	SearchStoppedLimit = "limit"
	SearchStoppedTime  = "time"
	SearchStoppedRows  = "rows"
)

// EventSearchResponse is the answer of GET /webhook/events with where:
// the matching events, oldest first, and the search's report. NextCursor
// is where the next request continues; 0 once the walk reached the
// newest event.
type EventSearchResponse struct {
	queue.EventPage
	Search
}

// JobSearchResponse is the answer of GET /webhook/jobs with where: the
// matching jobs, by event then job, oldest first, and the search's
// report. A page ends with an event: it may hold a few jobs more than
// limit when that event's jobs match too.
type JobSearchResponse struct {
	queue.JobPage
	Search
}

// The actions of a replay by query (ReplayMatch.Action).
const (
	ReplayActionReplay = "replay" // a dead job gets a fresh attempt budget
	ReplayActionResend = "resend" // a done job is delivered again
	ReplayActionAdd    = "add"    // a target the event has no job for gets one
)

// ReplayQueryResponse is the answer of POST /webhook/replay with where:
// what one request of a replay by query queued, or in a dry run would
// queue. A replay that did not reach the newest event continues from
// NextCursor (and, with a rate, NextDue), each request with its own
// counts.
type ReplayQueryResponse struct {
	DryRun bool `json:"dry_run,omitempty"`
	// Events is how many events the expression and the filters matched.
	Events int `json:"events"`
	// Replayed, Resent and Added count the jobs queued: dead jobs
	// replayed, done jobs resent, new jobs for the target named that an
	// event had none for.
	Replayed int `json:"replayed"`
	Resent   int `json:"resent"`
	Added    int `json:"added"`
	// InFlight counts the matching events whose job for a target is
	// pending, running or blocked: on its way already, left alone.
	InFlight int `json:"in_flight,omitempty"`
	// Unroutable counts the jobs left as they are because their source
	// and target are not in the running config: queued, they would wait
	// as pending jobs no worker takes.
	Unroutable int `json:"unroutable,omitempty"`
	// Matches are the first jobs queued (in a dry run, that would be), at
	// most the request's limit.
	Matches []ReplayMatch `json:"matches"`
	// Requests, with show_request, are for the first match of each
	// source and target what the target would receive, after its
	// transform, as the rule test shows it.
	Requests []ReplayRequest `json:"requests,omitempty"`
	// NextCursor is where the replay continues; 0 once it reached the
	// newest event.
	NextCursor int64 `json:"next_cursor,omitempty"`
	// NextDue, with a rate, is when the next job would be due: the due
	// parameter of the request that continues from NextCursor.
	NextDue time.Time `json:"next_due,omitzero"`
	Search
}

// ReplayMatch is one job of a replay by query.
type ReplayMatch struct {
	// Job is the job queued; 0 in a dry run for a job not yet added.
	Job        int64  `json:"job,omitempty"`
	Event      int64  `json:"event"`
	Source     string `json:"source"`
	DeliveryID string `json:"delivery_id"`
	EventType  string `json:"event_type,omitempty"`
	Target     string `json:"target"`
	// Status is the job's status before the replay, dead or done; empty
	// for a new job.
	Status queue.Status `json:"status,omitempty"`
	// Action is ReplayActionReplay, ReplayActionResend or ReplayActionAdd.
	Action string `json:"action"`
	// Due is when the job is due (with a rate, spread out).
	Due time.Time `json:"due"`
}

// ReplayRequest is what one target would receive of a replay's match.
type ReplayRequest struct {
	Source string `json:"source"`
	Target string `json:"target"`
	Event  int64  `json:"event"`
	// Request is nil when the transform fails, with TransformError.
	Request        *RulesTestOutput `json:"request,omitempty"`
	TransformError string           `json:"transform_error,omitempty"`
}

// DiscardResponse reports a discarded job.
type DiscardResponse struct {
	ID        int64 `json:"id"`
	Discarded bool  `json:"discarded"`
}

// DiscardJobsResponse reports a bulk discard.
type DiscardJobsResponse struct {
	Discarded int `json:"discarded"`
}

// PurgeResponse reports a purge: how many done jobs finished before Cutoff
// were deleted.
type PurgeResponse struct {
	Purged    int       `json:"purged"`
	Cutoff    time.Time `json:"cutoff"`
	OlderThan string    `json:"older_than"`
}

// EventResponse is the answer of GET /webhook/events/{event}: an event in
// full; payload_text repeats the payload as text when it is valid UTF-8,
// as a job's response does.
type EventResponse struct {
	queue.EventDetail
	PayloadText string `json:"payload_text,omitempty"`
	// Filters are, by target, the filters in the running config of the
	// targets with a job for the event: the filters that took it.
	Filters map[string]string `json:"filters,omitempty"`
}

// RekeyResponse is the answer of /webhook/rekey: the store's rekey, the
// one running or the last one this Caddy ran. A rekey runs in the
// background: POST starts it (or resumes one that was stopped), GET shows
// its progress, DELETE stops it.
type RekeyResponse struct {
	// Running is true while the rekey runs.
	Running bool `json:"running"`
	// ToPlainText and NoVacuum are what it was asked for (the query
	// parameters of its POST).
	ToPlainText bool      `json:"to_plain_text,omitempty"`
	NoVacuum    bool      `json:"no_vacuum,omitempty"`
	Started     time.Time `json:"started,omitzero"`
	Ended       time.Time `json:"ended,omitzero"`
	// Progress is how far it has come: Resealed of Resealed + Remaining
	// values, the table it walks, the vacuum's estimate and outcome.
	Progress queue.RekeyProgress `json:"progress"`
	// Stopped is true when a DELETE stopped it; POST resumes it where it
	// stopped.
	Stopped bool `json:"stopped,omitempty"`
	// Error is why it ended early, when it did.
	Error string `json:"error,omitempty"`
}

// SendEventResponse reports a job added to a stored event.
type SendEventResponse struct {
	EventID int64  `json:"event_id"`
	JobID   int64  `json:"job_id"`
	Target  string `json:"target"`
}

// ResendResponse reports a resent job.
type ResendResponse struct {
	ID     int64 `json:"id"`
	Resent bool  `json:"resent"`
}

// InjectRequest is the body of POST /webhook/send. Sample, instead of a
// body, names a sample event of the source's scheme (signature/samples),
// rendered with fresh ids and times and Set's "path=value" overrides: its
// body, its event type and delivery id unless EventType and DeliveryID
// are given, and those of its headers the source's receiver stores.
type InjectRequest struct {
	Source     string            `json:"source"`
	EventType  string            `json:"event_type,omitempty"`
	DeliveryID string            `json:"delivery_id,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
	Body       *string           `json:"body,omitempty"`
	BodyBase64 string            `json:"body_base64,omitempty"`
	Sample     string            `json:"sample,omitempty"`
	Set        []string          `json:"set,omitempty"`
}

// InjectResponse reports an injected event.
type InjectResponse struct {
	EventID    int64    `json:"event_id"`
	DeliveryID string   `json:"delivery_id"`
	EventType  string   `json:"event_type,omitempty"`
	Duplicate  bool     `json:"duplicate,omitempty"`
	Jobs       int      `json:"jobs"`
	Targets    []string `json:"targets"`
}

// InjectedHeader marks an injected event: it is stored with the event, so
// history shows it, and the http target forwards it, so the handler sees
// it.
const InjectedHeader = "X-Webhook-Injected"

// PauseResponse reports a pause or a resume: every pause now in force.
type PauseResponse struct {
	Source string        `json:"source"`
	Target string        `json:"target,omitempty"`
	Paused bool          `json:"paused"`
	Pauses []queue.Pause `json:"pauses"`
}

// RulesTestRequest is the body of POST /webhook/rules/test: it names the
// target and the event. Give one of Job, Event and Body (or BodyBase64).
type RulesTestRequest struct {
	// Source and Target name the route; with Job both default to the
	// job's, with Event the source to the event's.
	Source string `json:"source,omitempty"`
	Target string `json:"target,omitempty"`
	// Job and Event are the ids of a stored job or event.
	Job   int64 `json:"job,omitempty"`
	Event int64 `json:"event,omitempty"`
	// Body is a body to try, as text; BodyBase64 as bytes.
	Body       *string `json:"body,omitempty"`
	BodyBase64 string  `json:"body_base64,omitempty"`
	// Headers are the request headers of Body, name → value.
	Headers map[string]string `json:"headers,omitempty"`
	// EventType and DeliveryID are those of Body. Default: the event type
	// empty, the delivery id "rules-test".
	EventType  string `json:"event_type,omitempty"`
	DeliveryID string `json:"delivery_id,omitempty"`
}

// RulesTestResponse is what the target's rules make of the event.
type RulesTestResponse struct {
	Source string `json:"source"`
	Target string `json:"target"`
	// Filter is the target's filter expression, empty for none; Events its
	// event types, empty for all.
	Filter string   `json:"filter,omitempty"`
	Events []string `json:"events,omitempty"`
	// Takes is whether the target takes the event: its type in Events and
	// the filter true. Reason says why not; FilterError is the filter's
	// evaluation error, if it failed.
	Takes       bool   `json:"takes"`
	Reason      string `json:"reason,omitempty"`
	FilterError string `json:"filter_error,omitempty"`
	// FilterNotes are what the filter did on this event that its author
	// most likely did not mean, with their position in the expression:
	// an equality between values of different types (`body.ref == 1` on a
	// string field), which is never true and raises no error.
	FilterNotes []string `json:"filter_notes,omitempty"`
	// Request is what the target would receive (also when the filter does
	// not take the event, to try a transform); nil when the transform
	// fails, with TransformError.
	Request        *RulesTestOutput `json:"request,omitempty"`
	TransformError string           `json:"transform_error,omitempty"`
}

// RulesTestOutput is a request as the target would send it, before the
// target's own headers and the X-Webhook-* metadata are added.
type RulesTestOutput struct {
	// Method is POST for an http target, EXEC for a program (the body is
	// its stdin).
	Method     string         `json:"method"`
	Headers    []queue.Header `json:"headers"`
	Body       string         `json:"body,omitempty"`
	BodyBase64 string         `json:"body_base64,omitempty"`
}

// The attempt words: what became of one delivery attempt. They are the one
// vocabulary of every place an attempt is told: the log line's message and
// its outcome field, the outcome label of caddy_webhook_deliveries_total,
// the tail's delivery lines, a job's history (AttemptResponse), the
// webhook.outcome attribute of an attempt's span, and the outcome a
// consumer answers with (POST …/ack; docs/CONSUMER.md).
const (
	// AttemptDelivered: the target took the event; the job is done.
	AttemptDelivered = "delivered"
	// AttemptRetry: a transient failure; the job is tried again after
	// its backoff (or the wait the target asked for).
	AttemptRetry = "retry"
	// AttemptDead: a permanent failure, or the last attempt failed; the
	// job is parked as dead until an operator replays it.
	AttemptDead = "dead"
	// AttemptLeaseLost: the lease ended before the attempt's result could
	// be recorded; nothing was recorded, and the job may run again.
	AttemptLeaseLost = "lease_lost"
	// AttemptHandedBack: not finished (a stop, a reload, a consumer that
	// lets go); the job is pending again at once, the attempt uncharged.
	AttemptHandedBack = "handed_back"
)

// AttemptWords are the attempt words, in the order of the table above.
func AttemptWords() []string {
	return []string{AttemptDelivered, AttemptRetry, AttemptDead, AttemptLeaseLost, AttemptHandedBack}
}

// TailLine is one line of GET /webhook/tail, sent as the data of a
// server-sent event. It carries what the logs already carry: ids, source,
// target, event type, outcome word, the receiver's status code, attempt
// number, duration and the delivery's error text (cut as in the logs).
// Never a header, a body or a secret.
type TailLine struct {
	Time time.Time `json:"time"`
	// Kind is received (a request to a receiver, or an injected event),
	// delivery (an attempt ended) or dropped (lines this subscriber lost).
	Kind       string  `json:"kind"`
	Source     string  `json:"source,omitempty"`
	Target     string  `json:"target,omitempty"`
	Outcome    string  `json:"outcome,omitempty"`
	Status     int     `json:"status,omitempty"` // the receiver's answer, for received
	DeliveryID string  `json:"delivery_id,omitempty"`
	EventType  string  `json:"event_type,omitempty"`
	EventID    int64   `json:"event_id,omitempty"`
	JobID      int64   `json:"job_id,omitempty"`
	Attempt    int     `json:"attempt,omitempty"`
	DurationMS float64 `json:"duration_ms,omitempty"`
	Error      string  `json:"error,omitempty"`
	Injected   bool    `json:"injected,omitempty"`
	Dropped    int64   `json:"dropped,omitempty"`
}

// The kinds of tail lines.
const (
	TailReceived = "received"
	TailDelivery = "delivery"
	TailDropped  = "dropped"
)
