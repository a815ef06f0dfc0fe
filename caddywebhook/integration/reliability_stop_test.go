package integration

import (
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// testGracefulStop: SIGTERM or `caddy stop` while a slow upstream holds
// every worker. Deliveries that finish within shutdown_grace are recorded
// done with one attempt; the ones still running after it are cancelled and
// handed back with no attempt charged (invariant 6), as are the pending
// ones; Caddy exits within the grace and a margin; and the next Caddy on
// the same database delivers everything, each event once more at most.
func testGracefulStop(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		grace time.Duration
		// hold is how long the upstream takes over each event's first
		// request; 0 holds it until Caddy gives up.
		hold time.Duration
		// cli stops with `caddy stop`, otherwise SIGTERM.
		cli bool
		// finish: the held deliveries end within the grace.
		finish bool
	}{
		{name: "sigterm_finishes_within_grace", grace: 5 * time.Second, hold: 400 * time.Millisecond, finish: true},
		{name: "caddy_stop_finishes_within_grace", grace: 5 * time.Second, hold: 400 * time.Millisecond, cli: true, finish: true},
		{name: "sigterm_hands_back_after_grace", grace: 500 * time.Millisecond},
		{name: "caddy_stop_hands_back_after_grace", grace: 500 * time.Millisecond, cli: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const workers, events = 4, 16
			fig := newFigures(t, "graceful_stop/"+tc.name)
			tr := newTracker()
			release := make(chan struct{}) // closed once Caddy has stopped
			up := newUpstream(t, tr.wrap(func(r *http.Request, key string, n int) int {
				var hold <-chan time.Time
				if tc.hold > 0 {
					hold = time.After(tc.hold)
				}
				select {
				case <-hold:
				case <-release:
				case <-r.Context().Done():
				}
				return http.StatusOK
			}))
			c := newCaddy(t)
			cfg := caddyConfig{
				Webhook: fmt.Sprintf("workers %d\nshutdown_grace %s", workers, tc.grace),
				Site:    githubSite(up.URL("/github"), "timeout 1m"),
			}
			c.start(t, cfg)
			var ids []string
			for i := range events {
				id := fmt.Sprintf("stop-%s-%02d", tc.name, i)
				sendGitHub(t, c, id, "push")
				ids = append(ids, id)
			}
			testutil.Eventually(t, func() bool { return tr.busy() == workers }, func() string {
				return fmt.Sprintf("%d workers busy at the upstream, want %d\n%s", tr.busy(), workers, c.logTail())
			})
			held := tr.busyKeys()

			stopAt := time.Now()
			if tc.cli {
				// It returns once Caddy has stopped.
				if out, err := c.caddyCmd(t, "stop", "--address", c.AdminAddr); err != nil {
					t.Fatalf("caddy stop: %v\n%s", err, out)
				}
			} else {
				c.signal(t, syscall.SIGTERM)
			}
			if err := c.wait(t, stopTimeout); err != nil {
				t.Fatalf("caddy exited with %v\n%s", err, c.logTail())
			}
			took := time.Since(stopAt)
			close(release)
			// The app's Stop waits the grace, then at most a margin for
			// handlers that ignore cancellation; these do not.
			if limit := tc.grace + 3*time.Second; took > limit {
				t.Errorf("Caddy took %s to stop, want at most the grace %s and a margin", took, tc.grace)
			}

			// What the database says after the stop.
			isHeld := map[string]bool{}
			for _, k := range held {
				isHeld[k] = true
			}
			ok := answeredOK(up.deliveries())
			done, handedBack := 0, 0
			for _, j := range c.jobs(t, "github") {
				switch {
				case j.Status == "done":
					done++
					if j.Attempts != 1 || ok[j.DeliveryID] != 1 {
						t.Errorf("%s with %d answered deliveries, want 1 attempt and 1 delivery", j, ok[j.DeliveryID])
					}
				case j.Status == "pending":
					if j.Attempts != 0 {
						t.Errorf("%s, want no attempt charged: a stop hands jobs back", j)
					}
					if ok[j.DeliveryID] != 0 {
						t.Errorf("%s was delivered but is pending again", j)
					}
					if isHeld[j.DeliveryID] {
						handedBack++
					}
				default:
					t.Errorf("%s after the stop, want done or pending", j)
				}
				if tc.finish && isHeld[j.DeliveryID] && j.Status != "done" {
					t.Errorf("%s was in flight at the stop and should have finished within the grace", j)
				}
			}
			if !tc.finish {
				if done != 0 || handedBack != len(held) {
					t.Errorf("after the grace: %d done, %d of %d held jobs handed back; want 0 done and all handed back", done, handedBack, len(held))
				}
				if n := countLog(t, c, `"outcome":"handed_back"`); n < len(held) {
					t.Errorf("the log reports %d handed_back, want at least %d", n, len(held))
				}
			}

			// The next Caddy delivers everything.
			c.start(t, cfg)
			waitDelivered(t, c, up, ids, 30*time.Second)
			for _, key := range ids {
				ds := up.forKey(key)
				want := 1
				if !tc.finish && isHeld[key] {
					want = 2 // the cancelled request and the redelivery
				}
				if len(ds) != want {
					t.Errorf("%s reached the upstream %d times, want %d: %s", key, len(ds), want, summarize(ds))
				}
				if last := ds[len(ds)-1]; last.Attempt != "1" {
					t.Errorf("%s: the final delivery is attempt %s, want 1 (handing back charges nothing)", key, last.Attempt)
				}
			}
			for _, j := range c.jobs(t, "github") {
				if j.Status != "done" || j.Attempts != 1 {
					t.Errorf("after restart: %s, want done after 1 attempt", j)
				}
			}
			if o := tr.overlapping(); len(o) > 0 {
				t.Errorf("deliveries of one job overlapped: %v", o)
			}
			fig.events, fig.requests, fig.accepted = events, events, events
			fig.upstream(up.deliveries())
			fig.extra = fmt.Sprintf("grace=%s in_flight_at_stop=%d done_at_stop=%d handed_back=%d stop_took=%s",
				tc.grace, len(held), done, handedBack, took.Round(10*time.Millisecond))
			fig.log(t)
		})
	}
	t.Run("sigterm_under_load", testStopUnderLoad)
}

// testStopUnderLoad: SIGTERM, three times, while senders keep posting and
// deliveries run, restarting each time. Requests that arrive while Caddy
// stops get a 202 (stored), a 503 or no answer, and the senders resend
// whatever was not a 202; every 202 is delivered after the restarts, and
// since a stop records or hands back every delivery, none twice.
func testStopUnderLoad(t *testing.T) {
	t.Parallel()
	const stops = 3
	fig := newFigures(t, "graceful_stop/sigterm_under_load")
	tr, up := newBusyUpstream(t, 5*time.Millisecond, 40*time.Millisecond)
	c := newCaddy(t)
	cfg := githubConfig(up, "workers 4\nshutdown_grace 5s\npoll_interval 100ms")
	c.start(t, cfg)
	lg := newLoad(c, "stopload", 2, 20*time.Millisecond, resendUntilAccepted)
	lg.start()
	for i := range stops {
		base := lg.acceptedCount()
		testutil.EventuallyWithin(t, 30*time.Second, func() bool { return lg.acceptedCount() >= base+40 && tr.busy() > 0 }, func() string {
			return fmt.Sprintf("stop %d: load to get going: %s", i+1, lg.summary())
		})
		c.stop(t) // SIGTERM and a clean exit
		for _, j := range c.jobs(t, "github") {
			if j.Status == "running" {
				t.Errorf("after stop %d: %s is still running; a stop records or hands back every job", i+1, j)
			}
		}
		c.start(t, cfg)
	}
	lg.halt()
	ids := lg.acceptedIDs()
	waitDelivered(t, c, up, ids, 60*time.Second)
	ds := up.deliveries()
	checkBodies(t, ds)
	ok := answeredOK(ds)
	for _, id := range ids {
		if ok[id] != 1 {
			t.Errorf("%s answered 200 %d times, want once", id, ok[id])
		}
	}
	for _, j := range c.jobs(t, "github") {
		if j.Status != "done" || j.Attempts != 1 {
			t.Errorf("%s, want done after 1 attempt", j)
		}
	}
	if o := tr.overlapping(); len(o) > 0 {
		t.Errorf("deliveries of one job overlapped: %v", o)
	}
	fig.events, fig.requests, fig.accepted = lg.next, lg.requests, len(ids)
	fig.upstream(ds)
	fig.lost = len(ids) - countIn(ids, ok)
	fig.extra = fmt.Sprintf("stops=%d unanswered_resent=%d other_statuses=%v", stops, len(lg.dropped), lg.statuses)
	fig.log(t)
}
