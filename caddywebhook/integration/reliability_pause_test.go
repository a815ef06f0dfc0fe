package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// testPauseUnderLoad: a source paused through the admin API while senders
// keep posting. Receiving goes on (every event is
// answered 202); once the deliveries in flight at the pause have ended,
// nothing reaches the upstream and no attempt is charged, also across a
// restart, since the pause is in the database; after the resume every
// accepted event is delivered exactly once, with attempt 1.
func testPauseUnderLoad(t *testing.T) {
	t.Parallel()
	const paused = 300 // events accepted while paused, at the least
	fig := newFigures(t, "pause_resume")
	up := newUpstream(t, func(*http.Request, string, int) int { return http.StatusOK })
	c := newCaddy(t)
	cfg := caddyConfig{Webhook: "workers 4", Site: githubSite(up.URL("/github"))}
	c.start(t, cfg)

	lg := newLoad(c, "pause", 4, 5*time.Millisecond, resendUntilAccepted)
	lg.start()
	t.Cleanup(func() {
		if !lg.stopped() {
			lg.halt()
		}
	})
	up.waitFor(t, "deliveries before the pause", func(ds []delivery) bool { return len(ds) >= 20 })

	admin := func(path string) {
		t.Helper()
		if status, body := c.adminDo(t, http.MethodPost, path, nil); status != http.StatusOK {
			t.Fatalf("POST %s: %d %s", path, status, body)
		}
	}
	admin("/webhook/pause?source=github")
	// The deliveries claimed before the pause finish; then nothing more.
	testutil.Eventually(t, func() bool { return jobStatuses(t, c)["running"] == 0 }, func() string {
		return fmt.Sprintf("jobs still running after the pause: %v\n%s", jobStatuses(t, c), c.logTail())
	})
	before := len(up.deliveries())
	atPause := lg.acceptedCount()

	// A restart keeps the pause: it is in the database, read before the
	// new pool's first claim.
	c.stop(t)
	c.start(t, cfg)
	testutil.EventuallyWithin(t, time.Minute, func() bool { return lg.acceptedCount() >= atPause+paused }, func() string {
		return fmt.Sprintf("%d events accepted while paused, want %d: %s", lg.acceptedCount()-atPause, paused, lg.summary())
	})
	if n := len(up.deliveries()); n != before {
		t.Errorf("%d deliveries reached the upstream while the source was paused", n-before)
	}
	if st := jobStatuses(t, c); st["running"] != 0 || st["pending"] < paused {
		t.Errorf("jobs while paused: %v, want none running and at least %d pending", st, paused)
	}
	for _, j := range c.jobs(t, "github") {
		if j.Status == "pending" && j.Attempts != 0 {
			t.Errorf("%s while paused, want no attempt charged", j)
		}
	}
	if status, body := c.adminDo(t, http.MethodGet, "/webhook/stats", nil); status != http.StatusOK || !strings.Contains(string(body), `"paused":true`) {
		t.Errorf("stats while paused: %d %s, want a count marked paused", status, body)
	}

	admin("/webhook/resume?source=github")
	afterResume := lg.acceptedCount()
	testutil.EventuallyWithin(t, time.Minute, func() bool { return lg.acceptedCount() >= afterResume+50 }, lg.summary)
	lg.halt()
	ids := lg.acceptedIDs()
	waitDelivered(t, c, up, ids, 2*time.Minute)
	for _, id := range ids {
		ds := up.forKey(id)
		if len(ds) != 1 || ds[0].Attempt != "1" {
			t.Errorf("%s reached the upstream %d times, want once with attempt 1: %s", id, len(ds), summarize(ds))
		}
	}
	fig.events, fig.accepted = len(ids), len(ids)
	fig.requests = lg.requests
	fig.upstream(up.deliveries())
	fig.lost = len(ids) - fig.delivered
	fig.extra = fmt.Sprintf("held=%d", afterResume-atPause)
	fig.log(t)
}
