package queuetest

import (
	"slices"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

// testQuotas checks ClaimParams.Quotas: each route gives at most its quota,
// the claim's limit still bounds the whole, and the jobs a route gives are
// its oldest.
func testQuotas(t *testing.T, s queue.Store) {
	mail := queue.Route{Source: "shop", Target: "mail"}
	chat := queue.Route{Source: "shop", Target: "chat"}
	forge := queue.Route{Source: "forge", Target: "mail"}
	for _, id := range []string{"d1", "d2", "d3", "d4"} {
		enqueue(t, s, event("shop", id, "mail", "chat"))
		enqueue(t, s, event("forge", id, "mail"))
	}
	tests := []struct {
		name   string
		limit  int
		routes []queue.Route
		quotas []int
		want   map[string]int // source/target → jobs claimed
	}{
		{"each route its quota", 10, []queue.Route{mail, chat}, []int{1, 2}, map[string]int{"shop/mail": 1, "shop/chat": 2}},
		{"limit bounds the sum", 2, []queue.Route{mail, forge}, []int{2, 2}, map[string]int{"shop/mail": 1, "forge/mail": 1}},
		{"quota above the backlog", 10, []queue.Route{forge}, []int{9}, map[string]int{"forge/mail": 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			jobs, err := s.Claim(t.Context(), queue.ClaimParams{Owner: "w", Limit: tt.limit, Lease: lease, Now: now(), Routes: tt.routes, Quotas: tt.quotas})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for _, j := range jobs {
				got[j.Source+"/"+j.Target]++
			}
			if !mapsEqual(got, tt.want) {
				t.Errorf("claimed %v, want %v", got, tt.want)
			}
			for i := 1; i < len(jobs); i++ {
				if jobs[i].ID < jobs[i-1].ID {
					t.Errorf("claimed ids %v, want the oldest first", ids(jobs))
				}
			}
		})
	}
}

// testQuotaExpired checks that a route's expired leases count against its
// quota: a claim never takes more of a route than its quota, whether the
// jobs were pending or held by a lease that ran out.
func testQuotaExpired(t *testing.T, s queue.Store) {
	mail := queue.Route{Source: "shop", Target: "mail"}
	for _, id := range []string{"d1", "d2", "d3", "d4"} {
		enqueue(t, s, event("shop", id, "mail"))
	}
	at := now()
	held := claimAt(t, s, "a", 2, at)
	later := at.Add(lease + time.Second)
	jobs, err := s.Claim(t.Context(), queue.ClaimParams{Owner: "b", Limit: 10, Lease: lease, Now: later,
		Routes: []queue.Route{mail}, Quotas: []int{3}})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 3 {
		t.Fatalf("claimed %v with quota 3, want 3 jobs", ids(jobs))
	}
	got := ids(jobs)
	for _, j := range held {
		if !slices.Contains(got, j.ID) {
			t.Errorf("claimed %v, want the expired job %d among them (the oldest)", got, j.ID)
		}
	}
	rest := claimAt(t, s, "c", 10, later)
	if len(rest) != 1 {
		t.Errorf("after the quota claim, %d jobs left to claim, want 1", len(rest))
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
