package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// testSharedDatabase: two Caddy processes on one SQLite file (a blue-green
// deploy, or an operator's mistake), both receiving signed events and both
// delivering. SQLite's locks serialize their writes and the leases keep
// each job in one worker of one process at a time (invariant 4 across
// processes, not only across a reload's two pools): every event accepted
// by either is delivered exactly once, and no job is ever in flight twice.
func testSharedDatabase(t *testing.T) {
	t.Parallel()
	fig := newFigures(t, "shared_database")
	tr, up := newBusyUpstream(t, 5*time.Millisecond, 30*time.Millisecond)
	cfg := githubConfig(up, "workers 3\npoll_interval 50ms")
	a, b := newCaddy(t), newCaddy(t)
	b.DBPath = a.DBPath
	a.start(t, cfg)
	b.start(t, cfg)

	la := newLoad(a, "shared-a", 2, 20*time.Millisecond, resendNoAnswer)
	lb := newLoad(b, "shared-b", 2, 20*time.Millisecond, resendNoAnswer)
	la.start()
	lb.start()
	testutil.EventuallyWithin(t, 60*time.Second, func() bool { return la.acceptedCount()+lb.acceptedCount() >= 300 }, func() string {
		return fmt.Sprintf("load on both: %s / %s", la.summary(), lb.summary())
	})
	la.halt()
	lb.halt()
	ids := append(la.acceptedIDs(), lb.acceptedIDs()...)
	waitDelivered(t, a, up, ids, 60*time.Second)

	for _, lg := range []*loadGen{la, lb} {
		if len(lg.refused) > 0 {
			t.Errorf("%d events refused: %v", len(lg.refused), lg.refused[:min(len(lg.refused), 10)])
		}
	}
	ds := up.deliveries()
	checkBodies(t, ds)
	ok := answeredOK(ds)
	perKey := requestsPerKey(ds)
	for _, id := range ids {
		if perKey[id] != 1 {
			t.Errorf("%s reached the upstream %d times, want once: %s", id, perKey[id], summarize(up.forKey(id)))
		}
	}
	if o := tr.overlapping(); len(o) > 0 {
		t.Errorf("one job in flight twice at the upstream: %v", o)
	}
	// Both processes delivered: the point of sharing.
	owners := map[string]int{"a": countLog(t, a, `"msg":"delivered"`), "b": countLog(t, b, `"msg":"delivered"`)}
	for name, n := range owners {
		if n == 0 {
			t.Errorf("%s delivered nothing; both processes should work the shared queue", name)
		}
	}
	for _, j := range a.jobs(t, "github") {
		if j.Status != "done" || j.Attempts != 1 {
			t.Errorf("%s, want done after 1 attempt", j)
		}
	}
	fig.events, fig.requests, fig.accepted = la.next+lb.next, la.requests+lb.requests, len(ids)
	fig.upstream(ds)
	fig.lost = len(ids) - countIn(ids, ok)
	fig.extra = fmt.Sprintf("processes=2 delivered_by=%v statuses=%v/%v", owners, la.statuses, lb.statuses)
	fig.log(t)
}
