package integration

import (
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// killRecord is what one SIGKILL left behind.
type killRecord struct {
	busy    int            // requests the upstream was answering just before the kill
	running map[string]int // delivery id → attempts, of the jobs running in the database after the kill
}

// testKill9: SIGKILL Caddy again and again while signed events arrive and
// deliveries run, restarting it on the same database each time, then run to
// quiescence. Every delivery id answered 202 reaches the upstream; a
// delivery is repeated only for a job that was running (claimed, outcome
// not recorded) at a kill, and at most once per such claim; and each job's
// attempts are one plus the claims that kills interrupted (invariant 5: the
// attempt is counted at claim). Each kill waits until the jobs the previous
// one interrupted have been claimed again and delivered, so every kill
// interrupts fresh claims.
func testKill9(t *testing.T) {
	t.Parallel()
	const kills = 6
	fig := newFigures(t, "kill9")
	tr, up := newBusyUpstream(t, 5*time.Millisecond, 40*time.Millisecond)
	c := newCaddy(t)
	// A short lease, so the jobs a dead Caddy held come back soon.
	cfg := githubConfig(up, "workers 4\nlease 1s\npoll_interval 100ms\nbackoff 100ms 500ms")
	c.start(t, cfg)

	// Senders retry until 202, through the kills, as GitHub would.
	lg := newLoad(c, "kill9", 2, 25*time.Millisecond, resendUntilAccepted)
	lg.start()
	var records []killRecord
	for i := range kills {
		base := lg.acceptedCount()
		started := len(up.deliveries())
		// Kill in the middle of things: events accepted and deliveries
		// made since the restart, and one being answered right now.
		testutil.EventuallyWithin(t, 30*time.Second, func() bool {
			if lg.acceptedCount() < base+30 || len(up.deliveries()) < started+10 || tr.busy() == 0 {
				return false
			}
			if len(records) == 0 {
				return true
			}
			prev := records[len(records)-1].running
			for _, j := range c.jobs(t, "github") {
				if _, ok := prev[j.DeliveryID]; ok && j.Status != "done" {
					return false
				}
			}
			return true
		}, func() string {
			return fmt.Sprintf("kill %d: load and deliveries to get going: %s\n%s", i+1, lg.summary(), c.logTail())
		})
		busy := tr.busy()
		c.signal(t, syscall.SIGKILL)
		c.wait(t, stopTimeout) // "signal: killed", as it should
		rec := killRecord{busy: busy, running: map[string]int{}}
		for _, j := range c.jobs(t, "github") {
			if j.Status == "running" {
				rec.running[j.DeliveryID] = j.Attempts
			}
		}
		records = append(records, rec)
		c.start(t, cfg)
	}
	lg.halt()
	ids := lg.acceptedIDs()
	waitDelivered(t, c, up, ids, 90*time.Second)

	ds := up.deliveries()
	checkBodies(t, ds)
	ok := answeredOK(ds)
	perKey := requestsPerKey(ds)
	// Claims the kills interrupted, per delivery id: a claim is one
	// attempt number, which a kill soon after the next may catch again
	// before its lease ran out.
	claims := map[string]map[int]bool{}
	for _, r := range records {
		for id, attempt := range r.running {
			if claims[id] == nil {
				claims[id] = map[int]bool{}
			}
			claims[id][attempt] = true
		}
	}
	runningAt := map[string]int{}
	runningTotal := 0
	for id, a := range claims {
		runningAt[id] = len(a)
		runningTotal += len(a)
	}

	// Nothing lost.
	var lost []string
	for _, id := range ids {
		if ok[id] == 0 {
			lost = append(lost, id)
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d events answered 202 never delivered: %v", len(lost), lost)
	}

	// Repeats only where a kill interrupted a claim of the job, at most
	// one per interrupted claim.
	dups, dupKeys := 0, 0
	for key, n := range perKey {
		if n <= 1 {
			continue
		}
		dups += n - 1
		dupKeys++
		if n-1 > runningAt[key] {
			t.Errorf("%s reached the upstream %d times, but kills interrupted only %d of its claims: %s",
				key, n, runningAt[key], summarize(up.forKey(key)))
		}
	}
	if dups > runningTotal {
		t.Errorf("%d repeated deliveries, more than the %d claims the kills interrupted", dups, runningTotal)
	}

	// The database: one event and one done job per id; attempts counted at
	// claim, so a job with k interrupted claims has 1+k attempts.
	jobs := c.jobs(t, "github")
	seen := map[string]bool{}
	for _, j := range jobs {
		if seen[j.DeliveryID] {
			t.Errorf("two jobs for %s", j.DeliveryID)
		}
		seen[j.DeliveryID] = true
		if j.Status != "done" {
			t.Errorf("%s, want done", j)
		}
		if want := 1 + runningAt[j.DeliveryID]; j.Attempts != want {
			t.Errorf("%s, want %d attempts (1 + %d claims interrupted by kills)", j, want, runningAt[j.DeliveryID])
		}
	}
	for _, id := range ids {
		if !seen[id] {
			t.Errorf("%s was answered 202 but has no job in the database", id)
		}
	}
	if o := tr.overlapping(); len(o) > 0 {
		t.Errorf("deliveries of one job overlapped at the upstream: %v", o)
	}

	var perKill []string
	for i, r := range records {
		perKill = append(perKill, fmt.Sprintf("#%d:%d-running/%d-at-upstream", i+1, len(r.running), r.busy))
	}
	fig.events, fig.requests = lg.next, lg.requests
	fig.accepted, fig.lost = len(ids), len(lost)
	fig.upstream(ds)
	fig.extra = fmt.Sprintf("kills=%d dup_events=%d claims_interrupted=%d per_kill=[%s] stored_unacked=%d load=%s",
		kills, dupKeys, runningTotal, strings.Join(perKill, " "), len(jobs)-len(ids), lg.elapsed.Round(time.Millisecond))
	fig.log(t)
	if len(ids) < kills*30 {
		t.Errorf("only %d events accepted: the load did not run", len(ids))
	}
	if lg.statuses[http.StatusServiceUnavailable] > 0 {
		t.Logf("note: %d requests answered 503 (store failed)", lg.statuses[http.StatusServiceUnavailable])
	}
}
