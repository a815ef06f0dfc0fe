package queuetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

func testClaimOrder(t *testing.T, s queue.Store) {
	var want []int64
	for i := range 5 {
		enqueue(t, s, event("shop", fmt.Sprint("d", i), "mail"))
	}
	for _, j := range list(t, s, queue.ListParams{}).Jobs {
		want = append(want, j.ID)
	}
	slices.Sort(want)

	// The last job fails and is retried with a run_at earlier than the
	// others' (as a clock step could make it): it is claimed first.
	last := claimAt(t, s, "w", 5, now())
	if !slices.Equal(ids(last), want) {
		t.Fatalf("claimed %v, want %v in (run_at, id) order", ids(last), want)
	}
	for _, j := range last[:4] {
		if !finish(t, s, retry(j, now().Add(time.Hour), "later"))[0] {
			t.Fatal("retry not recorded")
		}
	}
	if !finish(t, s, retry(last[4], now().Add(-time.Hour), "early"))[0] {
		t.Fatal("retry not recorded")
	}
	later := now().Add(2 * time.Hour)
	got := claimAt(t, s, "w2", 3, later)
	wantOrder := []int64{want[4], want[0], want[1]}
	if !slices.Equal(ids(got), wantOrder) {
		t.Errorf("claim limit 3 = %v, want %v", ids(got), wantOrder)
	}
	if rest := claimAt(t, s, "w2", 10, later); !slices.Equal(ids(rest), want[2:4]) {
		t.Errorf("second claim = %v, want %v", ids(rest), want[2:4])
	}
	if none := claimAt(t, s, "w2", 10, later); len(none) != 0 {
		t.Errorf("third claim = %v, want none", ids(none))
	}
}

func testAttemptAtClaim(t *testing.T, s queue.Store) {
	ev := event("shop", "d1", "mail")
	enqueue(t, s, ev)
	at := now()
	j := claimOne(t, s, "w1")
	if j.Attempt != 1 || j.LeaseOwner != "w1" || j.LeaseUntil.Before(at.Add(lease)) {
		t.Errorf("claimed %+v, want attempt 1 leased to w1 until %v", j, at.Add(lease))
	}
	if j.Source != ev.Source || j.DeliveryID != ev.DeliveryID || j.EventType != ev.EventType || j.Target != "mail" ||
		string(j.Payload) != string(ev.Payload) || !slices.Equal(j.Headers, ev.Headers) || j.CreatedAt.IsZero() || j.EventID == 0 {
		t.Errorf("claimed job %+v does not carry its event", j)
	}
	if d := get(t, s, j.ID); d.Attempts != 1 || d.Status != queue.StatusRunning {
		t.Errorf("stored attempts %d status %s, want 1 running", d.Attempts, d.Status)
	}
	// A worker that dies mid-attempt is still charged: the next claim,
	// after the lease, is attempt 2.
	again := claimAt(t, s, "w2", 1, at.Add(2*lease))
	if len(again) != 1 || again[0].Attempt != 2 {
		t.Fatalf("claim after expiry = %+v, want attempt 2", again)
	}
}

func testRoutes(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "mail", "chat"))
	enqueue(t, s, event("forge", "d1", "mail"))
	tests := []struct {
		name   string
		routes []queue.Route
		want   []string // source/target claimed
	}{
		{"empty list claims nothing", []queue.Route{}, nil},
		{"unknown route claims nothing", []queue.Route{{Source: "shop", Target: "sms"}}, nil},
		{"one route", []queue.Route{{Source: "shop", Target: "chat"}}, []string{"shop/chat"}},
		{"two routes", []queue.Route{{Source: "forge", Target: "mail"}, {Source: "shop", Target: "mail"}}, []string{"forge/mail", "shop/mail"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			jobs, err := s.Claim(t.Context(), queue.ClaimParams{Owner: "w", Limit: 10, Lease: lease, Now: now(), Routes: tt.routes})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, j := range jobs {
				got = append(got, j.Source+"/"+j.Target)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("claimed %v, want %v", got, tt.want)
			}
		})
	}
	if st := stats(t, s, now()); count(st, queue.StatusRunning) != 3 {
		t.Errorf("Stats = %+v, want the 3 routed jobs running", st)
	}
}

func testTakeover(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "mail"))
	at := now()
	a := claimAt(t, s, "a", 1, at)[0]
	if got := claimAt(t, s, "b", 1, at.Add(lease/2)); len(got) != 0 {
		t.Fatalf("claimed a job whose lease holds: %+v", got[0])
	}
	b := claimAt(t, s, "b", 1, at.Add(lease+time.Second))
	if len(b) != 1 || b[0].ID != a.ID || b[0].LeaseOwner != "b" || b[0].Attempt != 2 {
		t.Fatalf("takeover after expiry = %+v, want job %d attempt 2 for b", b, a.ID)
	}
	if d := get(t, s, a.ID); d.LeaseOwner != "b" || d.Status != queue.StatusRunning {
		t.Errorf("stored owner %q status %s, want b running", d.LeaseOwner, d.Status)
	}
}

func testFence(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "mail"))
	at := now()
	stale := claimAt(t, s, "a", 1, at)[0]
	fresh := claimAt(t, s, "b", 1, at.Add(lease+time.Second))[0]
	tests := []struct {
		name string
		c    queue.Completion
	}{
		{"done", done(stale, now())},
		{"retry", retry(stale, now(), "boom")},
		{"dead", dead(stale, "boom")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if finish(t, s, tt.c)[0] {
				t.Fatal("stale owner's Finish was recorded")
			}
			d := get(t, s, stale.ID)
			if d.Status != queue.StatusRunning || d.LeaseOwner != "b" || d.LastError != "" || !onlyLeaseLost(d.History) || d.Attempts != 2 {
				t.Errorf("after stale Finish: %+v, want untouched (running under b, no history but the stale claim's lease_lost)", d)
			}
		})
	}
	if lost := extend(t, s, "a", claims(stale), at, time.Hour); !slices.Equal(lost, []int64{stale.ID}) {
		t.Errorf("stale ExtendLeases = %v; want the job lost", lost)
	}
	if err := s.HandBack(t.Context(), "a", claims(stale)); err != nil {
		t.Fatal(err)
	}
	if d := get(t, s, stale.ID); d.Status != queue.StatusRunning || d.LeaseOwner != "b" {
		t.Errorf("stale HandBack changed the job: %+v", d)
	}
	if rec := finish(t, s, done(fresh, now())); !rec[0] {
		t.Error("the owner's Finish was not recorded")
	}
}

func testExtend(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "mail", "chat"))
	at := now()
	jobs := claimAt(t, s, "a", 2, at)
	until := at.Add(10 * lease)
	lost := extend(t, s, "a", append(claims(jobs...), queue.Claimed{ID: 1 << 40, Fence: 1}), at, 10*lease)
	if !slices.Equal(lost, []int64{1 << 40}) {
		t.Errorf("lost = %v, want only the unknown id", lost)
	}
	if d := get(t, s, jobs[0].ID); !d.LeaseUntil.Equal(until) {
		t.Errorf("lease until %v, want %v", d.LeaseUntil, until)
	}
	// The extended lease holds past the original one.
	if got := claimAt(t, s, "b", 2, at.Add(2*lease)); len(got) != 0 {
		t.Errorf("claimed %v under an extended lease", ids(got))
	}
	if lost := extend(t, s, "b", claims(jobs...), at, 10*lease); !slices.Equal(lost, ids(jobs)) {
		t.Errorf("ExtendLeases by a non-owner = %v; want both lost", lost)
	}
}

func testHandBack(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "mail"))
	j := claimOne(t, s, "a")
	if err := s.HandBack(t.Context(), "a", claims(j)); err != nil {
		t.Fatal(err)
	}
	d := get(t, s, j.ID)
	if d.Status != queue.StatusPending || d.Attempts != 0 || d.LeaseOwner != "" || !d.LeaseUntil.IsZero() || d.RunAt.After(now()) {
		t.Errorf("after hand-back: %+v, want pending, 0 attempts, no lease, due now", d)
	}
	again := claimOne(t, s, "b")
	if again.ID != j.ID || again.Attempt != 1 {
		t.Errorf("claim after hand-back = job %d attempt %d, want job %d attempt 1", again.ID, again.Attempt, j.ID)
	}
}
