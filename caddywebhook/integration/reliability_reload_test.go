package integration

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// testReloadStorm: many reloads, alternating between the admin API (POST
// /load with the Caddyfile) and `caddy reload`, and between configs with
// different worker counts, while signed events arrive and deliveries run.
// Every event is accepted (no request refused or failed), every event is
// delivered, exactly once, and the upstream never has one job in flight
// twice: the old pool and the new one share the database for a moment, and
// leases and fences keep them apart (invariant 4).
func testReloadStorm(t *testing.T) {
	t.Parallel()
	const reloads = 24
	workerCounts := []int{1, 4, 2, 6}
	fig := newFigures(t, "reload_storm")
	tr, up := newBusyUpstream(t, 10*time.Millisecond, 60*time.Millisecond)
	c := newCaddy(t)
	cfg := func(workers int) caddyConfig {
		return githubConfig(up, fmt.Sprintf("workers %d\nshutdown_grace 10s\npoll_interval 200ms", workers))
	}
	c.start(t, cfg(3))
	lg := newLoad(c, "reload", 2, 20*time.Millisecond, resendNoAnswer)
	lg.start()
	client := &http.Client{Timeout: waitTimeout}
	for i := range reloads {
		// Reload while deliveries are running.
		base := len(up.deliveries())
		testutil.Eventually(t, func() bool { return len(up.deliveries()) >= base+5 && tr.busy() > 0 }, func() string {
			return fmt.Sprintf("reload %d: deliveries to run: %s\n%s", i+1, lg.summary(), c.logTail())
		})
		next := cfg(workerCounts[i%len(workerCounts)])
		if i%2 == 0 {
			req, err := http.NewRequest(http.MethodPost, c.AdminURL("/load"), strings.NewReader(c.Caddyfile(next)))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "text/caddyfile")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("reload %d: POST /load: %v", i+1, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("reload %d: POST /load: %d %s\n%s", i+1, resp.StatusCode, body, c.logTail())
			}
		} else {
			c.reload(t, next)
		}
	}
	lg.halt()
	ids := lg.acceptedIDs()
	waitDelivered(t, c, up, ids, 60*time.Second)

	if len(lg.refused) > 0 {
		t.Errorf("%d valid events refused during the reloads: %v", len(lg.refused), lg.refused[:min(len(lg.refused), 10)])
	}
	// A request that got no answer (Caddy closes a rare new connection
	// while it swaps servers, before any handler sees the request) is
	// resent, as senders do, and the resend must be accepted like any
	// other.
	if len(lg.dropped) > 0 {
		t.Logf("%d requests got no answer during the reloads and were resent: %v", len(lg.dropped), lg.dropped[:min(len(lg.dropped), 5)])
	}
	ds := up.deliveries()
	checkBodies(t, ds)
	perKey := requestsPerKey(ds)
	for _, id := range ids {
		if n := perKey[id]; n != 1 {
			t.Errorf("%s reached the upstream %d times, want once: %s", id, n, summarize(up.forKey(id)))
		}
	}
	if o := tr.overlapping(); len(o) > 0 {
		t.Errorf("one job in flight twice at the upstream, the invariant a lease guards: %v", o)
	}
	for _, j := range c.jobs(t, "github") {
		if j.Status != "done" || j.Attempts != 1 {
			t.Errorf("%s, want done after 1 attempt", j)
		}
	}
	// Each reload changed the worker count, so each started a new pool.
	if n := countLog(t, c, "webhook queue started"); n != reloads+1 {
		t.Errorf("the log shows %d pool starts, want %d (the first start and one per reload)", n, reloads+1)
	}
	fig.events, fig.requests, fig.accepted = lg.next, lg.requests, len(ids)
	fig.upstream(ds)
	fig.lost = len(ids) - countIn(ids, answeredOK(ds))
	fig.extra = fmt.Sprintf("reloads=%d refused=%d unanswered_resent=%d overlaps=%d load=%s",
		reloads, len(lg.refused), len(lg.dropped), len(tr.overlapping()), lg.elapsed.Round(time.Millisecond))
	fig.log(t)
}
