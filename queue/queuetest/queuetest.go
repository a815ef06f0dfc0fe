// Package queuetest is the conformance suite every queue.Store must pass.
// A backend's tests call Run with a function that opens a fresh, empty
// store on a real database:
//
//	func TestConformance(t *testing.T) {
//		queuetest.Run(t, func(t *testing.T) queue.Store { return openTestStore(t) })
//	}
//
// Every subtest opens its own store, so subtests never see each other's
// rows. The suite uses the wall clock: stores stamp enqueues with their own
// clock, and the tests pass explicit times no earlier than it to Claim,
// Finish and Stats.
//
// Run, the table of subtests and the shared fixtures live in this file; the
// checks are split by area, one file each: enqueue.go, claim_lease.go
// (claims, leases, the fence, hand-back), fence.go (the fence token of
// each claim), finish.go, replay_discard.go, resend.go (attempts numbered
// across replays), purge.go, reads.go (stats, listing, one job), events.go
// (events, lookups by delivery id, resend, a job added to an event),
// scan.go (events read in pages in id order, and requeued by the ids a
// search found),
// lifecycle.go (the ready signal, close), workers.go (many workers at
// once), fifo.go (ordering keys), bulk.go (bulk replay and discard in
// chunks), counts.go (Stats against a full count), pause.go (paused sources
// and targets), quota.go (claims capped per route), consumer.go (a
// remote consumer's claims, answered later through Held) and trace.go
// (the trace context kept with an event).
package queuetest

import (
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

// Run runs the conformance suite. open must return a new, empty store and
// arrange for it to be closed when t ends; a second Close must be harmless.
func Run(t *testing.T, open func(t *testing.T) queue.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s queue.Store)
	}{
		{"enqueue/fan-out", testFanOut},
		{"enqueue/duplicate", testDuplicate},
		{"enqueue/trace context", testTrace},
		{"claim/order and limit", testClaimOrder},
		{"claim/attempt counted at claim", testAttemptAtClaim},
		{"claim/routes", testRoutes},
		{"claim/quotas per route", testQuotas},
		{"claim/quotas count expired leases", testQuotaExpired},
		{"lease/expiry takeover", testTakeover},
		{"lease/fence", testFence},
		{"lease/extend reports lost", testExtend},
		{"fence/stale claim of the same owner", testStaleClaimSameOwner},
		{"fence/hand-back ends the claim", testHandBackEndsClaim},
		{"handback/no charge", testHandBack},
		{"finish/outcomes", testFinish},
		{"finish/history bounded", testHistory},
		{"finish/error truncated", testTruncate},
		{"finish/attempt code", testAttemptCode},
		{"history/handed back", testHistoryHandedBack},
		{"history/lease lost", testHistoryLeaseLost},
		{"replay/one", testReplay},
		{"replay/dead by filter", testReplayDead},
		{"replay/numbered across replays", testReplayNumbering},
		{"discard", testDiscard},
		{"discard/by filter", testDiscardJobs},
		{"replay/dead in chunks", testReplayManyDead},
		{"stats/counts exact", testCountsExact},
		{"purge/retention", testPurge},
		{"purge/limit", testPurgeLimit},
		{"stats", testStats},
		{"list/filters and paging", testList},
		{"get", testGet},
		{"events/list filters and paging", testListEvents},
		{"events/get and find", testGetEvent},
		{"list/event filters", testListJobsFilters},
		{"resend", testResend},
		{"events/add job", testAddJob},
		{"scan/pages in id order, filters", testScanEvents},
		{"scan/page bytes", testScanPageBytes},
		{"requeue", testRequeue},
		{"requeue/in chunks", testRequeueMany},
		{"requeue/ordering key", testRequeueKeyed},
		{"pause/set and lift", testPauses},
		{"pause/claims leave paused routes out", testPausedClaims},
		{"ready", testReady},
		{"close", testClose},
		{"concurrent workers", testWorkers},
		{"fifo/chain per target and key", testFIFOChain},
		{"fifo/dead job and its key", testFIFODead},
		{"fifo/discard hands the key on", testFIFODiscard},
		{"fifo/bulk discard hands each key on once", testFIFOBulkDiscard},
		{"fifo/concurrent workers keep each key in order", testFIFOWorkers},
		{"consumer/claim one route for one owner", testConsumerClaim},
		{"consumer/held claims", testConsumerHeld},
		{"consumer/retry at the time it chose", testConsumerRetryAfter},
		{"consumer/hand-back uncharged", testConsumerHandBack},
		{"consumer/dead and replayed", testConsumerDead},
		{"consumer/stale answers change nothing", testConsumerStale},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, open(t))
		})
	}
}

// lease is long enough that no lease expires during a test unless the
// test moves its clock past it.
const lease = time.Minute

// now is the wall clock at millisecond precision, the stores' precision.
func now() time.Time { return time.Now().Truncate(time.Millisecond) }

func event(source, id string, targets ...string) queue.Event {
	return queue.Event{
		Source:     source,
		DeliveryID: id,
		EventType:  "order.paid",
		Headers:    []queue.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "X-Event", Value: "order.paid"}},
		Payload:    []byte(`{"id":"` + id + `"}`),
		Targets:    targets,
	}
}

func enqueue(t *testing.T, s queue.Store, ev queue.Event) queue.EnqueueResult {
	t.Helper()
	res, err := s.Enqueue(t.Context(), ev)
	if err != nil {
		t.Fatalf("Enqueue(%s/%s): %v", ev.Source, ev.DeliveryID, err)
	}
	return res
}

func claimAt(t *testing.T, s queue.Store, owner string, limit int, at time.Time) []*queue.Job {
	t.Helper()
	jobs, err := s.Claim(t.Context(), queue.ClaimParams{Owner: owner, Limit: limit, Lease: lease, Now: at})
	if err != nil {
		t.Fatalf("Claim(%s): %v", owner, err)
	}
	return jobs
}

func claim(t *testing.T, s queue.Store, owner string, limit int) []*queue.Job {
	t.Helper()
	return claimAt(t, s, owner, limit, now())
}

func claimOne(t *testing.T, s queue.Store, owner string) *queue.Job {
	t.Helper()
	jobs := claim(t, s, owner, 1)
	if len(jobs) != 1 {
		t.Fatalf("Claim(%s) = %d jobs, want 1", owner, len(jobs))
	}
	return jobs[0]
}

func finish(t *testing.T, s queue.Store, cs ...queue.Completion) []bool {
	t.Helper()
	rec, err := s.Finish(t.Context(), cs)
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if len(rec) != len(cs) {
		t.Fatalf("Finish returned %d flags for %d completions", len(rec), len(cs))
	}
	return rec
}

func done(j *queue.Job, at time.Time) queue.Completion {
	return queue.Completion{JobID: j.ID, Owner: j.LeaseOwner, Fence: j.Fence, Status: queue.StatusDone, Started: at, Duration: time.Millisecond, Now: at}
}

func retry(j *queue.Job, runAt time.Time, msg string) queue.Completion {
	at := now()
	return queue.Completion{JobID: j.ID, Owner: j.LeaseOwner, Fence: j.Fence, Status: queue.StatusPending, RunAt: runAt, Error: msg, Started: at, Duration: time.Millisecond, Now: at}
}

func dead(j *queue.Job, msg string) queue.Completion {
	at := now()
	return queue.Completion{JobID: j.ID, Owner: j.LeaseOwner, Fence: j.Fence, Status: queue.StatusDead, Error: msg, Started: at, Duration: time.Millisecond, Now: at}
}

func get(t *testing.T, s queue.Store, id int64) queue.JobDetail {
	t.Helper()
	d, err := s.GetJob(t.Context(), id)
	if err != nil {
		t.Fatalf("GetJob(%d): %v", id, err)
	}
	return d
}

func stats(t *testing.T, s queue.Store, at time.Time) queue.Stats {
	t.Helper()
	st, err := s.Stats(t.Context(), at)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	return st
}

// count sums the jobs in st with the given status (empty: any).
func count(st queue.Stats, status queue.Status) int64 {
	var n int64
	for _, c := range st.Counts {
		if status == "" || c.Status == status {
			n += c.Jobs
		}
	}
	return n
}

func ids(jobs []*queue.Job) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

func claims(jobs ...*queue.Job) []queue.Claimed {
	out := make([]queue.Claimed, len(jobs))
	for i, j := range jobs {
		out[i] = j.Claimed()
	}
	return out
}

// extend extends the leases of claims by owner to at + l and returns the
// ids lost.
func extend(t *testing.T, s queue.Store, owner string, cs []queue.Claimed, at time.Time, l time.Duration) []int64 {
	t.Helper()
	lost, err := s.ExtendLeases(t.Context(), queue.ExtendParams{Owner: owner, Claims: cs, Lease: l, Now: at})
	if err != nil {
		t.Fatalf("ExtendLeases(%s): %v", owner, err)
	}
	return lost
}

func list(t *testing.T, s queue.Store, p queue.ListParams) queue.JobPage {
	t.Helper()
	page, err := s.ListJobs(t.Context(), p)
	if err != nil {
		t.Fatalf("ListJobs(%+v): %v", p, err)
	}
	return page
}
