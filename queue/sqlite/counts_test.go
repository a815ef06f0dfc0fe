package sqlite

import (
	"slices"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/queuetest"
)

// TestCountsWithinOneBatch changes, in the batch that inserted it, the
// status of a job of a route that has no count yet: the enqueue's count
// is added at the commit (flushCounts), after the trigger took the job
// out of the status it was inserted with, and Stats must still be exact.
func TestCountsWithinOneBatch(t *testing.T) {
	route := []queue.Route{{Source: "shop", Target: "mail"}}
	t.Run("enqueue and claim", func(t *testing.T) {
		s := setup(t)
		enq := newRequest(t.Context(), kindEnqueue)
		enq.ev = testEvent("d1", "mail")
		claim := newRequest(t.Context(), kindClaim)
		claim.claim = queue.ClaimParams{Owner: "o", Limit: 10, Lease: time.Minute, Now: time.Now().Add(time.Second), Routes: route}
		claim.routes = `[["shop","mail"]]`
		s.runBatchNow(t, enq, claim)
		if enq.err != nil || claim.err != nil || len(claim.jobs) != 1 {
			t.Fatalf("batch = %v, %v, %d jobs; want the job claimed", enq.err, claim.err, len(claim.jobs))
		}
		got, _ := queuetest.StatsLines(t, s)
		if want := []string{"shop/mail/running=1"}; !slices.Equal(got, want) {
			t.Errorf("Stats = %v, want %v", got, want)
		}
	})
	t.Run("blocked job promoted", func(t *testing.T) {
		s := setup(t)
		head := testEvent("h", "mail")
		head.OrderingKey = "K"
		if _, err := s.Enqueue(t.Context(), head); err != nil {
			t.Fatal(err)
		}
		jobs, err := s.Claim(t.Context(), queue.ClaimParams{Owner: "o", Limit: 10, Lease: time.Minute, Routes: route})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("Claim = %d jobs, %v", len(jobs), err)
		}
		enq := newRequest(t.Context(), kindEnqueue)
		enq.ev = testEvent("b", "mail")
		enq.ev.OrderingKey = s.sealer.Load().OrderingKey("shop", "K") // as Enqueue stores it
		fin := newRequest(t.Context(), kindFinish)
		fin.cs = []queue.Completion{{JobID: jobs[0].ID, Owner: "o", Fence: jobs[0].Fence, Status: queue.StatusDone, Started: time.Now()}}
		fin.texts = finishTexts(s.sealer.Load(), fin.cs)
		s.runBatchNow(t, enq, fin)
		if enq.err != nil || fin.err != nil {
			t.Fatalf("batch = %v, %v", enq.err, fin.err)
		}
		got, _ := queuetest.StatsLines(t, s)
		if want := []string{"shop/mail/done=1", "shop/mail/pending=1"}; !slices.Equal(got, want) {
			t.Errorf("Stats = %v, want %v", got, want)
		}
	})
}
