package queuetest

import (
	"slices"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

// A remote consumer (a pull target's, over HTTP) claims one route's jobs
// under one owner per target, and answers for each claim later, perhaps
// through another process: that process reads the claim with Held, then
// finishes, extends or hands it back under the same fence as a pool does.

// consumerRoute is the route a consumer claims in these tests, beside a
// second target of the same source that it must leave alone.
var consumerRoute = queue.Route{Source: "shop", Target: "laptop"}

const consumerOwner = "pull:laptop"

// consumerClaim claims up to limit jobs of consumerRoute at at.
func consumerClaim(t *testing.T, s queue.Store, limit int, at time.Time) []*queue.Job {
	t.Helper()
	jobs, err := s.Claim(t.Context(), queue.ClaimParams{
		Owner: consumerOwner, Limit: limit, Lease: lease, Now: at, Routes: []queue.Route{consumerRoute},
	})
	if err != nil {
		t.Fatalf("Claim(%s): %v", consumerOwner, err)
	}
	return jobs
}

func held(t *testing.T, s queue.Store, cs ...queue.Claimed) []*queue.Job {
	t.Helper()
	jobs, err := s.Held(t.Context(), cs)
	if err != nil {
		t.Fatalf("Held(%v): %v", cs, err)
	}
	return jobs
}

// testConsumerClaim: a claim of one route for one owner takes that route's
// jobs only, each charged its attempt at the claim and given its fence.
func testConsumerClaim(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "laptop", "mail"))
	enqueue(t, s, event("shop", "d2", "laptop", "mail"))
	at := now()
	jobs := consumerClaim(t, s, 10, at)
	if len(jobs) != 2 {
		t.Fatalf("claimed %d jobs, want the route's 2", len(jobs))
	}
	for _, j := range jobs {
		if j.Target != "laptop" || j.Attempt != 1 || j.Fence == 0 || j.LeaseOwner != consumerOwner || j.LeaseUntil.Before(at.Add(lease)) {
			t.Errorf("claimed %+v, want laptop's job, attempt 1, a fence, leased to %s until %s", j, consumerOwner, at.Add(lease))
		}
		if d := get(t, s, j.ID); d.Attempts != 1 || d.Status != queue.StatusRunning {
			t.Errorf("job %d stored with %d attempts, %s; want 1, running", j.ID, d.Attempts, d.Status)
		}
	}
	if st := stats(t, s, at); count(st, queue.StatusPending) != 2 {
		t.Errorf("Stats = %+v, want mail's 2 jobs still pending", st)
	}
}

// testConsumerHeld: Held answers for current claims only, with the route,
// owner and attempt a completion is decided from.
func testConsumerHeld(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "laptop"))
	enqueue(t, s, event("shop", "d2", "laptop"))
	enqueue(t, s, event("shop", "d3", "laptop"))
	at := now()
	jobs := consumerClaim(t, s, 3, at)
	if len(jobs) != 3 {
		t.Fatalf("claimed %d jobs, want 3", len(jobs))
	}
	a, b, c := jobs[0], jobs[1], jobs[2]
	if !finish(t, s, done(b, at))[0] {
		t.Fatal("Finish of b not recorded")
	}
	if err := s.HandBack(t.Context(), consumerOwner, claims(c)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		claims []queue.Claimed
		want   []int64
	}{
		{"none", nil, nil},
		{"current claim", claims(a), []int64{a.ID}},
		{"current claim twice", claims(a, a), []int64{a.ID}},
		{"stale and current claim", []queue.Claimed{{ID: a.ID, Fence: a.Fence - 1}, a.Claimed(), {ID: a.ID, Fence: a.Fence + 1}}, []int64{a.ID}},
		{"wrong fence", []queue.Claimed{{ID: a.ID, Fence: a.Fence + 1}}, nil},
		{"finished", claims(b), nil},
		{"handed back", claims(c), nil},
		{"no such job", []queue.Claimed{{ID: a.ID + 1000, Fence: 1}}, nil},
		{"mixed", claims(c, a, b), []int64{a.ID}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := held(t, s, tt.claims...)
			if !slices.Equal(ids(got), tt.want) {
				t.Fatalf("Held = %v, want %v", ids(got), tt.want)
			}
			for _, j := range got {
				if j.Source != a.Source || j.Target != a.Target || j.DeliveryID != a.DeliveryID || j.EventType != a.EventType ||
					j.Attempt != 1 || j.ReplayBase != 0 || j.Fence != a.Fence || j.LeaseOwner != consumerOwner ||
					!j.LeaseUntil.Equal(a.LeaseUntil) || j.EventID != a.EventID {
					t.Errorf("Held = %+v, want the claim %+v", j, a)
				}
			}
		})
	}
	// Once the lease ran out and another consumer of the same target
	// claimed the job, only the new claim is held.
	again := consumerClaim(t, s, 3, at.Add(lease+time.Second))
	var retaken *queue.Job
	for _, j := range again {
		if j.ID == a.ID {
			retaken = j
		}
	}
	if retaken == nil || retaken.Attempt != 2 {
		t.Fatalf("claim after expiry = %+v, want job %d again, attempt 2", again, a.ID)
	}
	if got := held(t, s, claims(a, retaken)...); len(got) != 1 || got[0].Fence != retaken.Fence || got[0].Attempt != 2 {
		t.Errorf("Held(old, new) = %+v, want the new claim alone, attempt 2", got)
	}
}

// testConsumerRetryAfter: a retry at the time the consumer chose keeps the
// job out of claims until then, and the next claim is the next attempt.
func testConsumerRetryAfter(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "laptop"))
	at := now()
	j := consumerClaim(t, s, 1, at)[0]
	runAt := at.Add(90 * time.Second)
	if !finish(t, s, retry(j, runAt, "local app answered 503"))[0] {
		t.Fatal("retry not recorded")
	}
	d := get(t, s, j.ID)
	if d.Status != queue.StatusPending || !d.RunAt.Equal(runAt) || d.LastError != "local app answered 503" || len(d.History) != 1 {
		t.Errorf("after retry: %+v, want pending at %s with the error and one attempt in history", d.JobSummary, runAt)
	}
	if got := consumerClaim(t, s, 1, runAt.Add(-time.Second)); len(got) != 0 {
		t.Fatalf("claimed before the consumer's retry time: %+v", got[0])
	}
	next := consumerClaim(t, s, 1, runAt)
	if len(next) != 1 || next[0].Attempt != 2 || next[0].Fence <= j.Fence {
		t.Fatalf("claim at the retry time = %+v, want attempt 2 with a new fence", next)
	}
}

// testConsumerHandBack: a consumer that hands a job back (its local app is
// down, it stops) is not charged: the next claim repeats the attempt.
func testConsumerHandBack(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "laptop"))
	at := now()
	j := consumerClaim(t, s, 1, at)[0]
	if err := s.HandBack(t.Context(), consumerOwner, claims(j)); err != nil {
		t.Fatal(err)
	}
	if d := get(t, s, j.ID); d.Status != queue.StatusPending || d.Attempts != 0 {
		t.Errorf("after hand-back: %s with %d attempts, want pending with 0", d.Status, d.Attempts)
	}
	again := consumerClaim(t, s, 1, now())
	if len(again) != 1 || again[0].Attempt != 1 || again[0].Fence <= j.Fence {
		t.Fatalf("claim after hand-back = %+v, want attempt 1 again, a new fence", again)
	}
	// The old claim's hand-back, repeated, changes nothing.
	if err := s.HandBack(t.Context(), consumerOwner, claims(j)); err != nil {
		t.Fatal(err)
	}
	if d := get(t, s, j.ID); d.Status != queue.StatusRunning || d.Attempts != 1 {
		t.Errorf("after a stale hand-back: %s with %d attempts, want running with 1", d.Status, d.Attempts)
	}
}

// testConsumerDead: a consumer's dead answer parks the job with its error,
// and a replay hands it out again with a fresh budget.
func testConsumerDead(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "laptop"))
	at := now()
	j := consumerClaim(t, s, 1, at)[0]
	if !finish(t, s, dead(j, "local app answered 400"))[0] {
		t.Fatal("dead not recorded")
	}
	if d := get(t, s, j.ID); d.Status != queue.StatusDead || d.LastError != "local app answered 400" {
		t.Errorf("after dead: %s %q, want dead with the error", d.Status, d.LastError)
	}
	if got := held(t, s, claims(j)...); len(got) != 0 {
		t.Errorf("Held after dead = %v, want none", ids(got))
	}
	if err := s.Replay(t.Context(), j.ID); err != nil {
		t.Fatal(err)
	}
	again := consumerClaim(t, s, 1, now())
	if len(again) != 1 || again[0].Attempt != 2 || again[0].ReplayBase != 1 || again[0].Replays != 1 {
		t.Fatalf("claim after replay = %+v, want attempt 2, replay base 1, 1 replay", again)
	}
	if got := held(t, s, claims(again[0])...); len(got) != 1 || got[0].ReplayBase != 1 || got[0].Replays != 1 {
		t.Errorf("Held after replay = %+v, want replay base 1 and 1 replay", got)
	}
}

// testConsumerStale: a consumer that lost its lease (it slept, its
// network dropped) changes nothing with its late answers, though its owner
// is the same as the consumer's that holds the job now.
func testConsumerStale(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "laptop"))
	at := now()
	stale := consumerClaim(t, s, 1, at)[0]
	fresh := consumerClaim(t, s, 1, at.Add(lease+time.Second))[0]
	if lost := extend(t, s, consumerOwner, claims(stale), at, lease); !slices.Equal(lost, []int64{stale.ID}) {
		t.Errorf("stale extend lost %v, want the job", lost)
	}
	for _, c := range []queue.Completion{done(stale, now()), retry(stale, now(), "late"), dead(stale, "late")} {
		if finish(t, s, c)[0] {
			t.Errorf("stale %s was recorded", c.Status)
		}
	}
	if err := s.HandBack(t.Context(), consumerOwner, claims(stale)); err != nil {
		t.Fatal(err)
	}
	d := get(t, s, fresh.ID)
	if d.Status != queue.StatusRunning || d.Attempts != 2 || !onlyLeaseLost(d.History) || !d.LeaseUntil.Equal(fresh.LeaseUntil) {
		t.Errorf("after the stale answers: %+v, want running in the fresh claim, untouched", d)
	}
	if !finish(t, s, done(fresh, now()))[0] {
		t.Error("the fresh claim's done was not recorded")
	}
}
