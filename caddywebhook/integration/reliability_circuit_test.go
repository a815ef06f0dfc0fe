package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// testCircuitBreaker: a target that answers 503 to everything opens its
// circuit after the configured run of failures; while the circuit is open
// the jobs behind it wait uncharged (every attempt the store counts is a
// request the upstream saw, and only probes reach it), the admin API shows
// the open circuit, and once the target recovers the probe closes it and
// every event is delivered exactly once with 200.
func testCircuitBreaker(t *testing.T) {
	t.Parallel()
	const (
		events   = 40
		workers  = 4
		failures = 3
	)
	fig := newFigures(t, "circuit_breaker")
	up := newUpstream(t, always(http.StatusServiceUnavailable))
	c := newCaddy(t)
	c.start(t, caddyConfig{
		Webhook: fmt.Sprintf("workers %d\nmax_attempts 100\nbackoff 50ms 200ms\npoll_interval 100ms", workers),
		Site: githubSite(up.URL("/github"), "timeout 2s",
			fmt.Sprintf("circuit_breaker {\n\t\tfailures %d\n\t\tcooldown 1s\n\t\tmax_cooldown 2s\n\t}", failures)),
	})
	var ids []string
	for i := range events {
		id := fmt.Sprintf("cb-%02d", i)
		sendGitHub(t, c, id, "push")
		ids = append(ids, id)
	}

	// The circuit opens, and stays open across two probes that fail.
	testutil.EventuallyWithin(t, 30*time.Second, func() bool {
		return countLog(t, c, "circuit half open") >= 2 && countLog(t, c, "circuit opened") >= 3
	}, func() string { return "the circuit did not open and fail two probes\n" + c.logTail() })
	if st := circuitStates(t, c); st["github/http"] != "open" && st["github/http"] != "half_open" {
		t.Errorf("stats circuits %v, want github/http open", st)
	}
	// Every attempt charged is a request the upstream saw: a held-back
	// job is not charged. Before the circuit opened at most the failures
	// and the deliveries already running reached the upstream; after it,
	// only the probes.
	requests := len(up.deliveries())
	var charged, untouched int
	for _, j := range c.jobs(t, "github") {
		charged += j.Attempts
		if j.Attempts == 0 {
			untouched++
		}
	}
	if charged != requests {
		t.Errorf("%d attempts charged, the upstream saw %d requests", charged, requests)
	}
	probes := countLog(t, c, "circuit half open")
	if limit := failures + workers - 1 + probes; requests > limit {
		t.Errorf("%d requests reached the failing upstream, want at most %d (failures, running, %d probes)", requests, limit, probes)
	}
	if untouched < events-requests {
		t.Errorf("%d jobs never attempted, want at least %d", untouched, events-requests)
	}
	fig.extra = fmt.Sprintf("requests_while_failing=%d probes=%d", requests, probes)

	// The target recovers: the next probe closes the circuit and
	// everything is delivered.
	up.setScript(always(http.StatusOK))
	waitDelivered(t, c, up, ids, 60*time.Second)
	for key, n := range answeredOK(up.deliveries()) {
		if n != 1 {
			t.Errorf("%s answered 200 %d times, want once", key, n)
		}
	}
	if n := countLog(t, c, "circuit closed"); n != 1 {
		t.Errorf("circuit closed logged %d times, want once", n)
	}
	if st := circuitStates(t, c); len(st) != 0 {
		t.Errorf("stats circuits %v after recovery, want none", st)
	}
	fig.events, fig.requests, fig.accepted = events, events, events
	fig.upstream(up.deliveries())
	fig.log(t)
}

// circuitStates returns the circuits /webhook/stats reports, as
// "source/target" → state.
func circuitStates(t *testing.T, c *caddyInstance) map[string]string {
	t.Helper()
	code, body := c.adminDo(t, http.MethodGet, "/webhook/stats", nil)
	if code != http.StatusOK {
		t.Fatalf("GET /webhook/stats: %d %s", code, body)
	}
	var st struct {
		Counts []struct {
			Source, Target, Circuit string
		} `json:"counts"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("decode stats: %v: %s", err, strings.TrimSpace(string(body)))
	}
	out := map[string]string{}
	for _, n := range st.Counts {
		if n.Circuit != "" {
			out[n.Source+"/"+n.Target] = n.Circuit
		}
	}
	return out
}
