package integration

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// testFIFOKill: a receiver with an ordering key, senders that send each
// key's events one after the other (resending until 202, through the
// kills), an upstream that fails a quarter of the attempts at random, and
// Caddy killed with SIGKILL again and again. Every attempt of a key's event
// starts only after each earlier event of that key was answered 200 (the
// order holds through retries and kills); every accepted event is
// delivered; and a key whose first event goes dead (on_dead hold, the
// default) holds its later events blocked without holding up any other key.
func testFIFOKill(t *testing.T) {
	t.Parallel()
	const (
		keys   = 6
		perKey = 20
		kills  = 3
	)
	fig := newFigures(t, "fifo_kill9")
	// A quarter of the events fail their first attempt; kills may charge
	// a few more, hence a budget of 6.
	up := newUpstream(t, func(r *http.Request, key string, n int) int {
		if strings.HasPrefix(key, "fifo-stuck-") || n == 1 && rand.IntN(4) == 0 {
			return http.StatusServiceUnavailable
		}
		return delayScript(2*time.Millisecond, 15*time.Millisecond)(r, key, 0)
	})
	c := newCaddy(t)
	cfg := caddyConfig{
		Webhook: "workers 4\nlease 1s\npoll_interval 100ms\nmax_attempts 6\nbackoff 50ms 200ms",
		Site: receiver("/hooks/github", "github", "github", "{env.E2E_GITHUB_SECRET}",
			"ordering_key header X-Order-Key", toHTTP(up.URL("/github"), "timeout 5s")),
	}
	c.start(t, cfg)

	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var (
		mu       sync.Mutex
		accepted []string
		wg       sync.WaitGroup
	)
	send := func(key string, seq int) {
		id := fmt.Sprintf("fifo-%s-%03d", key, seq)
		body := payload(id, "push")
		hdr := signLoad(seq, id, body)
		hdr.Set("X-Order-Key", key)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			req, err := http.NewRequest(http.MethodPost, c.URL("/hooks/github"), strings.NewReader(string(body)))
			if err != nil {
				t.Error(err)
				return
			}
			req.Header = hdr.Clone()
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusAccepted {
					mu.Lock()
					accepted = append(accepted, id)
					mu.Unlock()
					return
				}
			}
			<-tick.C // Caddy is down or refused: as a sender would, try again
		}
	}
	for k := range keys {
		wg.Go(func() {
			for i := range perKey {
				send(fmt.Sprint("k", k), i)
			}
		})
	}
	wg.Go(func() {
		for i := range 4 {
			send("stuck", i)
		}
	})

	for i := range kills {
		started := len(up.deliveries())
		testutil.EventuallyWithin(t, 30*time.Second, func() bool {
			return len(up.deliveries()) >= started+15
		}, func() string { return fmt.Sprintf("kill %d: deliveries to get going\n%s", i+1, c.logTail()) })
		c.signal(t, syscall.SIGKILL)
		c.wait(t, stopTimeout)
		c.start(t, cfg)
	}
	wg.Wait()
	var ids []string
	for _, id := range accepted {
		if !strings.HasPrefix(id, "fifo-stuck-") {
			ids = append(ids, id)
		}
	}
	waitDelivered(t, c, up, ids, 90*time.Second)

	ds := up.deliveries()
	checkBodies(t, ds)
	// The order: an attempt of event seq of a key starts only after every
	// earlier event of the key was answered 200.
	type attempt struct {
		seq        int
		start, end time.Time
		ok         bool
	}
	byKey := map[string][]attempt{}
	for _, d := range ds {
		var key string
		var seq int
		if _, err := fmt.Sscanf(strings.ReplaceAll(d.Key, "-", " "), "fifo %s %d", &key, &seq); err != nil {
			t.Errorf("delivery %q: %v", d.Key, err)
			continue
		}
		byKey[key] = append(byKey[key], attempt{seq, d.Start, d.End, d.Status == http.StatusOK})
	}
	violations := 0
	for key, as := range byKey {
		firstOK := map[int]time.Time{} // seq -> end of its first 200
		for _, a := range as {
			if a.ok && !a.end.IsZero() && (firstOK[a.seq].IsZero() || a.end.Before(firstOK[a.seq])) {
				firstOK[a.seq] = a.end
			}
		}
		for _, a := range as {
			for prev := range a.seq {
				if end := firstOK[prev]; end.IsZero() || end.After(a.start) {
					if violations++; violations <= 5 {
						t.Errorf("key %s: event %d started at %s, before event %d was delivered (%s)",
							key, a.seq, a.start.Format(time.StampMicro), prev, end.Format(time.StampMicro))
					}
					break
				}
			}
		}
	}

	// The stuck key: its first event is dead and holds the key; the rest
	// wait, blocked, never sent; no other key waited for it (all delivered).
	stuck := map[string]string{}
	for _, j := range c.jobs(t, "github") {
		if strings.HasPrefix(j.DeliveryID, "fifo-stuck-") {
			stuck[j.DeliveryID] = j.Status
		}
	}
	for i := range 4 {
		id := fmt.Sprintf("fifo-stuck-%03d", i)
		want := "blocked"
		if i == 0 {
			want = "dead"
		}
		if stuck[id] != want {
			t.Errorf("%s is %q, want %s", id, stuck[id], want)
		}
	}
	var stuckSeqs []int
	for _, a := range byKey["stuck"] {
		stuckSeqs = append(stuckSeqs, a.seq)
	}
	if slices.ContainsFunc(stuckSeqs, func(s int) bool { return s != 0 }) {
		t.Errorf("the stuck key's later events reached the upstream: %v", stuckSeqs)
	}

	fig.events, fig.requests, fig.accepted = keys*perKey+4, len(accepted), len(accepted)
	fig.upstream(ds)
	fig.extra = fmt.Sprintf("keys=%d per_key=%d kills=%d order_violations=%d", keys, perKey, kills, violations)
	fig.log(t)
}
