package integration

// Helpers of the reliability suite (reliability_test.go) that the
// end-to-end harness (e2e_*_test.go) does not have: a signed load generator,
// an in-flight tracker for the recording upstream, a chaos front for it that
// can set Retry-After and drop connections, polling with a deadline longer
// than the harness's, and a figures line per scenario for docs/RELIABILITY.md.

import (
	"bytes"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// tracker counts, per event key, the requests the upstream is answering
// right now, and remembers every time a key was being answered twice at
// once: the same job delivered by two workers while a lease holds.
type tracker struct {
	mu       sync.Mutex
	inflight map[string]int
	total    int      // requests being answered now, all keys
	overlaps []string // keys seen in flight twice at once
}

func newTracker() *tracker { return &tracker{inflight: map[string]int{}} }

// wrap returns s with the tracking around it.
func (tr *tracker) wrap(s script) script {
	return func(r *http.Request, key string, n int) int {
		tr.mu.Lock()
		tr.inflight[key]++
		tr.total++
		if tr.inflight[key] > 1 {
			tr.overlaps = append(tr.overlaps, key)
		}
		tr.mu.Unlock()
		defer func() {
			tr.mu.Lock()
			tr.inflight[key]--
			tr.total--
			tr.mu.Unlock()
		}()
		return s(r, key, n)
	}
}

// newBusyUpstream starts an upstream that answers every delivery 200 after
// a delay drawn from [lo, hi), with a tracker around it.
func newBusyUpstream(t *testing.T, lo, hi time.Duration) (*tracker, *upstream) {
	tr := newTracker()
	return tr, newUpstream(t, tr.wrap(delayScript(lo, hi)))
}

// githubConfig is a Caddy config with webhook as the global options and one
// GitHub receiver delivering to up with a 5 s timeout.
func githubConfig(up *upstream, webhook string) caddyConfig {
	return caddyConfig{Webhook: webhook, Site: githubSite(up.URL("/github"), "timeout 5s")}
}

// busy returns how many requests the upstream is answering now.
func (tr *tracker) busy() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.total
}

// busyKeys returns the keys being answered now.
func (tr *tracker) busyKeys() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var out []string
	for k, n := range tr.inflight {
		if n > 0 {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// overlapping returns the keys that were ever in flight twice at once.
func (tr *tracker) overlapping() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.overlaps)
}

// delayScript answers 200 after a random hold in [lo, hi], or as soon as
// the client gives up.
func delayScript(lo, hi time.Duration) script {
	return func(r *http.Request, _ string, _ int) int {
		d := lo + time.Duration(rand.Int64N(int64(hi-lo)+1))
		select {
		case <-time.After(d):
		case <-r.Context().Done():
		}
		return http.StatusOK
	}
}

// statusDrop is what a chaos script returns to have the connection
// hijacked and closed instead of answered; the upstream records it as the
// request's status.
const statusDrop = 999

// chaosWriter lets a script of the recording upstream do what a status
// cannot say: a 429 gets Retry-After: 1, and statusDrop closes the
// connection without an answer.
type chaosWriter struct {
	http.ResponseWriter
	dropped bool
}

func (w *chaosWriter) WriteHeader(code int) {
	switch code {
	case statusDrop:
		w.dropped = true
		if conn, _, err := http.NewResponseController(w.ResponseWriter).Hijack(); err == nil {
			conn.Close()
		}
		return
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", "1")
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *chaosWriter) Write(b []byte) (int, error) {
	if w.dropped {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// newChaosUpstream is newUpstream whose answers go through a chaosWriter;
// targets use the returned URL, the recording is u's.
func newChaosUpstream(t *testing.T, s script) (u *upstream, url string) {
	t.Helper()
	u = newUpstream(t, s)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.serve(&chaosWriter{ResponseWriter: w}, r)
	}))
	t.Cleanup(front.Close)
	return u, front.URL
}

// signLoad signs a GitHub event for the load generator. Every signature
// the harness's signGitHub makes is registered for the log audit, which
// searches every log line for every registered string; with thousands of
// events that would make the audit slow, so only one in auditSample is
// registered, which still catches a logger that leaks them (it would leak
// all of them).
func signLoad(n int, id string, body []byte) http.Header {
	const auditSample = 50
	if n%auditSample == 0 {
		return signGitHub(githubSecret, id, "push", body)
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(hmacSHA256([]byte(githubSecret), body)))
	h.Set("X-GitHub-Delivery", id)
	h.Set("X-GitHub-Event", "push")
	return h
}

// loadGen sends signed GitHub events with fresh delivery ids to one
// instance from several goroutines, each at most one per interval.
type loadGen struct {
	c        *caddyInstance
	prefix   string
	senders  int
	interval time.Duration
	retry    resend // when an event is sent again
	client   *http.Client

	mu       sync.Mutex
	next     int
	requests int
	accepted []string // ids answered 202, in order
	statuses map[int]int
	errors   int
	refused  []string // "id: status" of the answers not resent
	dropped  []string // "id: error" of the requests that got no answer
	started  time.Time
	elapsed  time.Duration

	stop chan struct{}
	wg   sync.WaitGroup
}

// resend says when the load generator sends an event again.
type resend int

const (
	// resendNoAnswer resends an event that got no answer at all (the
	// connection failed or closed first), as every sender does; any
	// answer but 202 is a refusal.
	resendNoAnswer resend = iota
	// resendUntilAccepted resends an event until it is answered 202, as
	// GitHub and Stripe do, through a Caddy that is down.
	resendUntilAccepted
)

// newLoad prepares a generator; start runs it.
func newLoad(c *caddyInstance, prefix string, senders int, interval time.Duration, retry resend) *loadGen {
	return &loadGen{
		c: c, prefix: prefix, senders: senders, interval: interval, retry: retry,
		// A new connection per request: on reload and stop Caddy closes
		// idle keep-alive connections, and a POST written to one at that
		// moment fails in the transport, which does not resend a POST.
		client:   &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
		statuses: map[int]int{},
		stop:     make(chan struct{}),
	}
}

func (lg *loadGen) start() {
	lg.started = time.Now()
	for range lg.senders {
		lg.wg.Go(lg.run)
	}
}

// halt stops taking new ids, lets every sender finish the event it holds
// (with retry: until it is accepted) and returns.
func (lg *loadGen) halt() {
	close(lg.stop)
	lg.wg.Wait()
	lg.elapsed = time.Since(lg.started)
}

func (lg *loadGen) stopped() bool {
	select {
	case <-lg.stop:
		return true
	default:
		return false
	}
}

func (lg *loadGen) run() {
	tick := time.NewTicker(lg.interval)
	defer tick.Stop()
	for !lg.stopped() {
		lg.mu.Lock()
		lg.next++
		n := lg.next
		lg.mu.Unlock()
		id := fmt.Sprintf("%s-%05d", lg.prefix, n)
		body := payload(id, "push")
		hdr := signLoad(n, id, body)
		for {
			status, err := lg.send(hdr, body)
			lg.mu.Lock()
			lg.requests++
			again := false
			switch {
			case err != nil:
				lg.errors++
				lg.dropped = append(lg.dropped, id+": "+err.Error())
				again = true
			case status == http.StatusAccepted:
				lg.accepted = append(lg.accepted, id)
			default:
				lg.statuses[status]++
				again = lg.retry == resendUntilAccepted
				if !again {
					lg.refused = append(lg.refused, fmt.Sprintf("%s: %d", id, status))
				}
			}
			lg.mu.Unlock()
			if !again {
				break
			}
			// Caddy is down, or dropped or refused it: try again at the
			// next tick, even after halt.
			<-tick.C
		}
		<-tick.C
	}
}

func (lg *loadGen) send(hdr http.Header, body []byte) (int, error) {
	req, err := http.NewRequest(http.MethodPost, lg.c.URL("/hooks/github"), bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header = hdr.Clone()
	resp, err := lg.client.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// acceptedIDs returns the ids answered 202 so far, each once.
func (lg *loadGen) acceptedIDs() []string {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	out := slices.Clone(lg.accepted)
	slices.Sort(out)
	return slices.Compact(out)
}

// acceptedCount returns how many requests were answered 202.
func (lg *loadGen) acceptedCount() int {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return len(lg.accepted)
}

// summary describes what the generator sent and got.
func (lg *loadGen) summary() string {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return fmt.Sprintf("%d events, %d requests, %d answered 202, %d transport errors, other statuses %v",
		lg.next, lg.requests, len(lg.accepted), lg.errors, lg.statuses)
}

// answeredOK returns, per key, how many of its requests the upstream
// answered 200.
func answeredOK(ds []delivery) map[string]int {
	out := map[string]int{}
	for _, d := range ds {
		if d.Status == http.StatusOK {
			out[d.Key]++
		}
	}
	return out
}

// requestsPerKey returns, per key, how many requests the upstream got.
func requestsPerKey(ds []delivery) map[string]int {
	out := map[string]int{}
	for _, d := range ds {
		out[d.Key]++
	}
	return out
}

// checkBodies fails t for every delivery whose body is not the payload its
// event was sent with, or whose delivery id header is not its event's: the
// receiver recycles body buffers, and under load a buffer reused too early
// would show up here as another event's bytes.
func checkBodies(t *testing.T, ds []delivery) {
	t.Helper()
	bad := 0
	for _, d := range ds {
		if !bytes.Equal(d.Body, payload(d.Key, "push")) || d.Header.Get("X-Webhook-Delivery-Id") != d.Key {
			if bad++; bad <= 5 {
				t.Errorf("delivery of %q (delivery id header %q) carried %q", d.Key, d.Header.Get("X-Webhook-Delivery-Id"), d.Body)
			}
		}
	}
	if bad > 5 {
		t.Errorf("… %d deliveries with the wrong body in all", bad)
	}
}

// jobStatuses counts the jobs of the instance's database by status.
func jobStatuses(t *testing.T, c *caddyInstance) map[string]int {
	t.Helper()
	out := map[string]int{}
	c.queryDB(t, func(db *sql.DB) error {
		rows, err := db.Query(`SELECT status, count(*) FROM jobs GROUP BY status`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			var n int
			if err := rows.Scan(&s, &n); err != nil {
				return err
			}
			out[s] = n
		}
		return rows.Err()
	})
	return out
}

// settled reports whether no job is pending or running.
func settled(st map[string]int) bool { return st["pending"] == 0 && st["running"] == 0 }

// waitDelivered polls until every id has been answered 200 by the upstream
// and no job is pending or running, the quiescence every scenario ends in.
func waitDelivered(t *testing.T, c *caddyInstance, up *upstream, ids []string, timeout time.Duration) {
	t.Helper()
	var missing []string
	var st map[string]int
	testutil.EventuallyWithin(t, timeout, func() bool {
		ok := answeredOK(up.deliveries())
		missing = missing[:0]
		for _, id := range ids {
			if ok[id] == 0 {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			return false
		}
		st = jobStatuses(t, c)
		return settled(st)
	}, func() string {
		return fmt.Sprintf("%d accepted events not delivered (first: %v); jobs by status %v\n%s",
			len(missing), missing[:min(len(missing), 10)], st, c.logTail())
	})
}

// figures is one scenario's line for docs/RELIABILITY.md. Run the suite
// with -v and grep "figures:" to collect them.
type figures struct {
	scenario   string
	events     int // distinct events sent
	requests   int // HTTP requests sent
	accepted   int // distinct events answered 202
	delivered  int // distinct events the upstream answered 200
	duplicates int // 200 answers beyond the first per event
	resent     int // upstream requests beyond the first per event (retries, cut and handed-back attempts, duplicates)
	lost       int
	extra      string
	started    time.Time
}

// newFigures builds the Caddy binary first (once per run, so the build is
// not part of the figures) and starts scenario's clock.
func newFigures(t *testing.T, scenario string) figures {
	t.Helper()
	caddyBinary(t)
	return figures{scenario: scenario, started: time.Now()}
}

func (f *figures) log(t *testing.T) {
	t.Helper()
	t.Logf("figures: scenario=%s events=%d requests=%d accepted=%d delivered=%d duplicates=%d resent=%d lost=%d duration=%s %s",
		f.scenario, f.events, f.requests, f.accepted, f.delivered, f.duplicates, f.resent, f.lost,
		time.Since(f.started).Round(100*time.Millisecond), f.extra)
}

// upstream sets delivered, duplicates and resent from what the upstream
// got, by delivery id.
func (f *figures) upstream(ds []delivery) {
	ok, all := map[string]int{}, map[string]int{}
	for _, d := range ds {
		id := d.Header.Get("X-Webhook-Delivery-Id")
		all[id]++
		if d.Status == http.StatusOK {
			ok[id]++
		}
	}
	f.delivered, f.duplicates, f.resent = len(ok), 0, 0
	for _, n := range ok {
		f.duplicates += n - 1
	}
	for _, n := range all {
		f.resent += n - 1
	}
}

// countLog returns how many lines of the instance's log contain all of
// parts.
func countLog(t *testing.T, c *caddyInstance, parts ...string) int {
	t.Helper()
	b := readLog(t, c)
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			n++
		}
	}
	return n
}

func readLog(t *testing.T, c *caddyInstance) []byte {
	t.Helper()
	b, err := os.ReadFile(c.logPath)
	if err != nil {
		t.Fatalf("read caddy log: %v", err)
	}
	return b
}
