package integration

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// chaosAnswer is one way the chaos upstream answers a request.
type chaosAnswer int

const (
	chaosOK chaosAnswer = iota
	chaos500
	chaos502
	chaos503
	chaos429 // with Retry-After: 1
	chaos400
	chaos410
	chaosTimeout // no answer until the target's timeout
	chaosDrop    // the connection closed without an answer
	numChaosAnswers
)

var chaosNames = [numChaosAnswers]string{"200", "500", "502", "503", "429", "400", "410", "timeout", "drop"}

func (a chaosAnswer) String() string { return chaosNames[a] }

// permanent reports whether the http target must park a job at once on a.
func (a chaosAnswer) permanent() bool { return a == chaos400 || a == chaos410 }

// chaosExpect walks a plan as the pool must: done at the first 200, dead
// at the first permanent answer or when maxAttempts transient answers are
// spent.
func chaosExpect(plan []chaosAnswer, maxAttempts int) (status string, attempts int) {
	for i, a := range plan[:maxAttempts] {
		switch {
		case a == chaosOK:
			return "done", i + 1
		case a.permanent():
			return "dead", i + 1
		}
	}
	return "dead", maxAttempts
}

// testUpstreamChaos: an upstream that answers each attempt with one of 500,
// 502, 503, 429 with Retry-After, 400, 410, a timeout or a dropped
// connection, or 200, following a plan drawn per event from a seed. Every
// event ends done or dead exactly as the classification says, with exactly
// the attempts the plan implies (never more than max_attempts), attempt
// numbers 1, 2, 3… in order, and every retry after a 429 at least
// Retry-After later. CADDYWEBHOOK_CHAOS_SEED replays a run.
func testUpstreamChaos(t *testing.T) {
	t.Parallel()
	const (
		events      = 48
		maxAttempts = 4
		timeout     = time.Second // also what a 200 may take on a loaded machine
		retryAfter  = time.Second
		minBackoff  = 25 * time.Millisecond // half the backoff base
	)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CADDYWEBHOOK_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CADDYWEBHOOK_CHAOS_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("chaos seed %d (CADDYWEBHOOK_CHAOS_SEED=%d replays this plan)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	fig := newFigures(t, "upstream_chaos")

	// Each event's first answer cycles through every kind, so each shows
	// up several times whatever the seed; the rest are drawn at random.
	plans := map[string][]chaosAnswer{}
	var keys []string
	for i := range events {
		key := fmt.Sprintf("chaos-%02d", i)
		plan := []chaosAnswer{chaosAnswer(i % int(numChaosAnswers))}
		for len(plan) < maxAttempts {
			plan = append(plan, chaosAnswer(rng.IntN(int(numChaosAnswers))))
		}
		plans[key] = plan
		keys = append(keys, key)
	}

	up, url := newChaosUpstream(t, func(r *http.Request, key string, n int) int {
		plan, ok := plans[key]
		if !ok || n > len(plan) {
			return http.StatusOK // beyond the plan: the test reports it
		}
		switch a := plan[n-1]; a {
		case chaosOK:
			return http.StatusOK
		case chaosTimeout:
			select {
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
			return http.StatusOK
		case chaosDrop:
			return statusDrop
		default:
			code, _ := strconv.Atoi(a.String())
			return code
		}
	})
	c := newCaddy(t)
	c.start(t, caddyConfig{
		Webhook: fmt.Sprintf("workers 8\nmax_attempts %d\nbackoff 50ms 200ms\nmax_retry_after 5s\npoll_interval 100ms", maxAttempts),
		Site:    githubSite(url+"/github", "timeout "+timeout.String()),
	})
	for _, key := range keys {
		sendGitHub(t, c, key, "push")
	}
	testutil.EventuallyWithin(t, 60*time.Second, func() bool {
		st := jobStatuses(t, c)
		return settled(st) && st["done"]+st["dead"] == events
	}, func() string { return fmt.Sprintf("every job done or dead: %v\n%s", jobStatuses(t, c), c.logTail()) })

	counts := map[string]int{}
	answers := map[chaosAnswer]int{}
	requests, waits429 := 0, 0
	var minWait429 time.Duration
	for _, j := range c.jobs(t, "github") {
		plan := plans[j.DeliveryID]
		wantStatus, wantAttempts := chaosExpect(plan, maxAttempts)
		counts[j.Status]++
		if j.Status != wantStatus || j.Attempts != wantAttempts {
			t.Errorf("%s; plan %v wants %s after %d attempts", j, plan, wantStatus, wantAttempts)
		}
		if j.Attempts > maxAttempts {
			t.Errorf("%s: more attempts than max_attempts %d", j, maxAttempts)
		}
		if last := plan[wantAttempts-1]; last.permanent() && !strings.Contains(j.LastError, last.String()) {
			t.Errorf("%s: the last error does not name the upstream's %s", j, last)
		}
		ds := up.forKey(j.DeliveryID)
		requests += len(ds)
		if len(ds) != wantAttempts {
			t.Errorf("%s: the upstream got %d requests, want %d: %s", j.DeliveryID, len(ds), wantAttempts, summarize(ds))
			continue
		}
		for i, d := range ds {
			answers[plan[i]]++
			if d.Attempt != strconv.Itoa(i+1) {
				t.Errorf("%s: request %d carries X-Webhook-Attempt %q", j.DeliveryID, i+1, d.Attempt)
			}
			if i == 0 {
				continue
			}
			prev := ds[i-1]
			wait := d.Start.Sub(prev.End)
			switch {
			case plan[i-1] == chaos429:
				waits429++
				if minWait429 == 0 || wait < minWait429 {
					minWait429 = wait
				}
				if wait < retryAfter {
					t.Errorf("%s: attempt %d came %s after a 429 with Retry-After: 1", j.DeliveryID, i+1, wait)
				}
			case plan[i-1] == chaosTimeout:
				// The upstream notices the client gave up only when
				// it next looks, late on a loaded machine, so End
				// says little; the attempt itself lasted the timeout.
				if gap := d.Start.Sub(prev.Start); gap < timeout/2 {
					t.Errorf("%s: attempt %d started %s after the one that timed out", j.DeliveryID, i+1, gap)
				}
			case wait < minBackoff-5*time.Millisecond:
				t.Errorf("%s: attempt %d came %s after a %s, sooner than the backoff allows", j.DeliveryID, i+1, wait, plan[i-1])
			}
		}
	}
	for a := range numChaosAnswers {
		if answers[a] == 0 {
			t.Errorf("the upstream never answered %s: the scenario did not cover it", a)
		}
	}
	if waits429 == 0 {
		t.Error("no retry after a 429 was observed")
	}
	fig.events, fig.requests, fig.accepted = events, events, events
	fig.upstream(up.deliveries())
	fig.extra = fmt.Sprintf("seed=%d done=%d dead=%d upstream_requests=%d answers=%v retries_after_429=%d min_wait_after_429=%s",
		seed, counts["done"], counts["dead"], requests, answers, waits429, minWait429.Round(time.Millisecond))
	fig.log(t)
}
