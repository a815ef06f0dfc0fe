package phases

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/monitor"
)

// SearchMatches is how many events of the search phase's store its
// expression matches, spread evenly over the store.
const SearchMatches = 10

// searchWhere is the search phase's expression over a store of n seeded
// events: the JSON body's seed number, a string of ten digits, read as an
// int, so that every event's body is parsed, and SearchMatches of them
// match (the 7th, and every n/SearchMatches-th after it).
func searchWhere(n int) (string, int) {
	every := max(n/SearchMatches, 8)
	return fmt.Sprintf(`int(body.seed) %% %d == 7`, every), (n-7)/every + 1
}

// search measures a search by content on a store of o.Search events:
// GET /webhook/events?where=… from the oldest event to the newest,
// following next_cursor, as `caddy webhook events --where` does, with no
// other traffic and no worker. Each request walks the store for the
// admin API's budget (5 s) and answers with what it found and where to go
// on; the phase reports the events walked per second over all the
// requests, the longest request, and Caddy's RSS before and at its peak:
// a scan holds one page of bodies at a time, so the peak must not grow
// with the store.
func (r *runner) search(ctx context.Context) error {
	pr := r.res.Phase("search")
	if err := r.loadConfig(ctx, "search.db", 0, "", 0); err != nil {
		return err
	}
	where, want := searchWhere(r.o.Search)
	r.logf("search: GET /webhook/events?where=%s over %d events, %d to find", where, r.o.Search, want)
	mon := monitor.Start(r.caddies, r.srv)
	mon.WindowStart()
	var (
		found, scanned, requests int
		longest                  time.Duration
		cursor                   int64
	)
	t0 := time.Now()
	for {
		q := url.Values{"where": {where}, "limit": {strconv.Itoa(adminapi.MaxLimit)}}
		if cursor != 0 {
			q.Set("cursor", strconv.FormatInt(cursor, 10))
		}
		t := time.Now()
		out, err := r.caddies[0].Admin().Call(ctx, http.MethodGet, "/webhook/events?"+q.Encode(), nil)
		if err != nil {
			pr.addWindow(mon.Stop())
			return fmt.Errorf("search: %w", err)
		}
		longest = max(longest, time.Since(t))
		var resp adminapi.EventSearchResponse
		if err := json.Unmarshal(out, &resp); err != nil {
			pr.addWindow(mon.Stop())
			return fmt.Errorf("search: decode the answer: %w", err)
		}
		requests++
		found += len(resp.Events)
		scanned += resp.Scanned
		if resp.EvalErrors > 0 {
			pr.check(false, "round %d: the expression failed on %d events: %s", r.round, resp.EvalErrors, resp.EvalError)
		}
		if resp.NextCursor == 0 {
			break
		}
		cursor = resp.NextCursor
	}
	took := time.Since(t0)
	mon.WindowEnd()
	pr.addWindow(mon.Stop())
	pr.check(found == want, "round %d: the search found %d events, want %d", r.round, found, want)
	pr.check(scanned == r.o.Search, "round %d: the search walked %d events, want all %d", r.round, scanned, r.o.Search)
	pr.Counts = append(pr.Counts, fmt.Sprintf("round %d: %d of %d events found in %s over %d requests: %.0f events/s walked, "+
		"the longest request %s; RSS %s before, %s at the peak",
		r.round, found, scanned, took.Round(time.Millisecond), requests, float64(scanned)/took.Seconds(),
		longest.Round(time.Millisecond), MiB(pr.StartRSS), MiB(pr.PeakRSS)))
	r.logf("search: %s", pr.Counts[len(pr.Counts)-1])
	return nil
}
