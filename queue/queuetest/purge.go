package queuetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

func testPurge(t *testing.T, s queue.Store) {
	start := now()
	old := start.Add(-2 * time.Hour)
	enqueue(t, s, event("shop", "old", "mail", "chat")) // both done long ago
	enqueue(t, s, event("shop", "mixed", "mail", "chat"))
	enqueue(t, s, event("shop", "recent", "mail"))
	enqueue(t, s, event("shop", "bare"))            // no target: dedupe memory only
	enqueue(t, s, event("shop", "waiting", "mail")) // still pending
	jobs := map[string][]*queue.Job{}
	for _, j := range claim(t, s, "w", 6) {
		jobs[j.DeliveryID] = append(jobs[j.DeliveryID], j)
	}
	finish(t, s, done(jobs["old"][0], old), done(jobs["old"][1], old), done(jobs["mixed"][0], old), done(jobs["recent"][0], start))
	finish(t, s, dead(jobs["mixed"][1], "boom"))
	if err := s.HandBack(t.Context(), "w", claims(jobs["waiting"]...)); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name   string
		cutoff time.Time
		purged int
		gone   []string // deliveries no longer deduped
		kept   []string
	}{
		{"older than an hour", start.Add(-time.Hour), 3, []string{"old"}, []string{"mixed", "recent", "bare", "waiting"}},
		{"everything done", start.Add(time.Hour), 1, []string{"recent", "bare"}, []string{"mixed", "waiting"}},
		{"again", start.Add(time.Hour), 0, nil, []string{"mixed", "waiting"}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			n, err := s.Purge(t.Context(), st.cutoff, 100)
			if err != nil || n != st.purged {
				t.Fatalf("Purge = %d, %v; want %d", n, err, st.purged)
			}
			if got := stats(t, s, now()).Events; got != int64(len(st.kept)) {
				t.Errorf("events = %d, want %d (%v)", got, len(st.kept), st.kept)
			}
		})
	}
	// The kept events still dedupe; the purged ones are accepted anew.
	for _, id := range []string{"mixed", "waiting"} {
		if !enqueue(t, s, event("shop", id, "mail")).Duplicate {
			t.Errorf("%s: purged while it still had a job", id)
		}
	}
	for _, id := range []string{"old", "recent", "bare"} {
		if enqueue(t, s, event("shop", id, "mail")).Duplicate {
			t.Errorf("%s: kept after its purge", id)
		}
	}
	if st := stats(t, s, now()); count(st, queue.StatusDead) != 1 || count(st, queue.StatusDone) != 0 {
		t.Errorf("Stats = %+v, want the dead job kept and no done job", st)
	}
}

func testPurgeLimit(t *testing.T, s queue.Store) {
	for i := range 5 {
		enqueue(t, s, event("shop", fmt.Sprint("d", i), "mail"))
	}
	at := now()
	for _, j := range claim(t, s, "w", 5) {
		finish(t, s, done(j, at))
	}
	for i, want := range []int{2, 2, 1, 0} {
		n, err := s.Purge(t.Context(), at.Add(time.Second), 2)
		if err != nil || n != want {
			t.Errorf("Purge #%d = %d, %v; want %d", i+1, n, err, want)
		}
	}
	if st := stats(t, s, now()); st.Events != 0 || count(st, "") != 0 {
		t.Errorf("Stats = %+v, want empty", st)
	}
}
