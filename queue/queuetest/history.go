package queuetest

import (
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

// The attempt history explains every delivery an upstream may have seen
// (invariant 16 of the design): a run a stop cut short keeps its real
// start and duration, and a claim that never finished (its process was
// killed) is recorded by the claim that takes the job next.

// testHistoryHandedBack: a run handed back through Finish is uncharged
// and recorded as the attempt it was, with its start and duration; its
// job's last error is not the stop's. A claim handed back unstarted
// (HandBack) leaves no entry.
func testHistoryHandedBack(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "mail"))
	j := claimOne(t, s, "a")
	finish(t, s, retry(j, now(), "upstream answered 503"))
	j = claimOne(t, s, "a")
	if j.Attempt != 2 {
		t.Fatalf("second claim is attempt %d, want 2", j.Attempt)
	}
	started := now().Add(-11 * time.Second)
	c := queue.Completion{JobID: j.ID, Owner: j.LeaseOwner, Fence: j.Fence, Status: queue.StatusPending, RunAt: now(),
		HandedBack: true, Error: "handed back: the stop cut the delivery short", Started: started, Duration: 11 * time.Second,
		Code: queue.CodeOf(0)}
	if !finish(t, s, c)[0] {
		t.Fatal("the hand-back was not recorded")
	}
	d := get(t, s, j.ID)
	if d.Status != queue.StatusPending || d.Attempts != 1 || d.LeaseOwner != "" || d.LastError != "upstream answered 503" {
		t.Errorf("after the hand-back: status %s, %d attempts, owner %q, last error %q; want pending, 1 attempt, no owner, the 503 kept",
			d.Status, d.Attempts, d.LeaseOwner, d.LastError)
	}
	if len(d.History) != 2 {
		t.Fatalf("history %+v, want the retry and the hand-back", d.History)
	}
	h := newest(d.History)
	if h.Attempt != 2 || h.Outcome != queue.StatusRunning || !h.Started.Equal(started) || h.Duration != 11*time.Second {
		t.Errorf("the handed-back entry %+v, want attempt 2, outcome running, started %v, 11s", h, started)
	}
	again := claimOne(t, s, "b")
	if again.Attempt != 2 {
		t.Errorf("the next claim is attempt %d, want 2 again: the hand-back was not charged", again.Attempt)
	}
	if err := s.HandBack(t.Context(), "b", claims(again)); err != nil {
		t.Fatal(err)
	}
	if d := get(t, s, j.ID); len(d.History) != 2 || d.Attempts != 1 {
		t.Errorf("after an unstarted hand-back: %d entries, %d attempts; want no new entry and 1 attempt", len(d.History), d.Attempts)
	}
}

// testHistoryLeaseLost: a claim whose lease ran out without an outcome
// (its process was killed mid-delivery) is recorded when the job is
// claimed again: as lease_lost, its attempt number, its start, and its
// lease as the most it can have run.
func testHistoryLeaseLost(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "mail"))
	at := now()
	first := claimAt(t, s, "a", 1, at)[0]
	if d := get(t, s, first.ID); len(d.History) != 0 {
		t.Fatalf("history after a first claim: %+v, want none", d.History)
	}
	second := claimAt(t, s, "b", 1, at.Add(lease+time.Second))
	if len(second) != 1 || second[0].Attempt != 2 {
		t.Fatalf("takeover = %+v, want attempt 2", second)
	}
	d := get(t, s, first.ID)
	if len(d.History) != 1 {
		t.Fatalf("history %+v, want the interrupted first attempt", d.History)
	}
	h := d.History[0]
	if h.Attempt != 1 || h.Outcome != queue.OutcomeLeaseLost || !h.Started.Equal(at) || h.Duration != lease || h.Error != queue.LeaseLostError {
		t.Errorf("the interrupted entry %+v, want attempt 1, lease_lost, started %v, %s, %q", h, at, lease, queue.LeaseLostError)
	}
	finish(t, s, done(second[0], now()))
	d = get(t, s, first.ID)
	if len(d.History) != 2 || newest(d.History).Attempt != 2 || newest(d.History).Outcome != queue.StatusDone {
		t.Errorf("history %+v, want the interrupted attempt 1, then attempt 2 done", d.History)
	}
}

// newest is the history entry with the highest attempt number, the last
// one written for these tests.
func newest(h []queue.Attempt) queue.Attempt {
	n := h[0]
	for _, a := range h[1:] {
		if a.Attempt >= n.Attempt {
			n = a
		}
	}
	return n
}

// onlyLeaseLost reports whether h is the one entry a claim taken over
// after its lease ran out leaves: lease_lost.
func onlyLeaseLost(h []queue.Attempt) bool {
	return len(h) == 1 && h[0].Outcome == queue.OutcomeLeaseLost
}
