package integration

// Two Caddy processes on one PostgreSQL queue: they share the work, never
// deliver one event at overlapping times, and when one is killed the other
// takes its leased jobs over once the leases expire. Runs against the
// server in CADDYWEBHOOK_TEST_POSTGRES_DSN (see .ci/start-postgres).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// pgLease is the instances' lease: short, so a takeover comes quickly.
const pgLease = 2 * time.Second

// pgWorkers is each instance's worker count.
const pgWorkers = 8

// pgTestDB is one test's schema on the test server.
type pgTestDB struct {
	dsn    string
	schema string
}

// newPgTestDB names a schema no test has used (the instances create it)
// and drops it when t ends. Call it before starting Caddy, so the drop
// runs after the instances' cleanups.
func newPgTestDB(t *testing.T) *pgTestDB {
	t.Helper()
	dsn := testutil.PostgresDSN(t)
	return &pgTestDB{dsn: dsn, schema: testutil.FreshSchema(t, dsn)}
}

func (db *pgTestDB) conn(t *testing.T, fn func(ctx context.Context, conn *pgx.Conn) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, db.dsn)
	if err != nil {
		t.Fatalf("connect to the test server: %v", err)
	}
	defer conn.Close(context.Background())
	if err := fn(ctx, conn); err != nil {
		t.Fatalf("query schema %s: %v", db.schema, err)
	}
}

// jobStatuses returns the number of jobs per status, and of events.
func (db *pgTestDB) jobStatuses(t *testing.T) (map[string]int, int) {
	t.Helper()
	counts := map[string]int{}
	var events int
	db.conn(t, func(ctx context.Context, conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, "SELECT status, count(*) FROM "+db.schema+".jobs GROUP BY status")
		if err != nil {
			return err
		}
		for rows.Next() {
			var s string
			var n int
			if err := rows.Scan(&s, &n); err != nil {
				return err
			}
			counts[s] = n
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return conn.QueryRow(ctx, "SELECT count(*) FROM "+db.schema+".events").Scan(&events)
	})
	return counts, events
}

// startPostgresCaddy starts an instance whose queue is db's schema and
// whose receiver delivers to upstreamURL; the DSN reaches Caddy only
// through the environment, as docs/POSTGRES.md recommends.
func startPostgresCaddy(t *testing.T, c *caddyInstance, db *pgTestDB, upstreamURL string) {
	t.Helper()
	text := c.Caddyfile(caddyConfig{
		Webhook: fmt.Sprintf("workers %d\nlease %s\npoll_interval 200ms\nshutdown_grace 1s", pgWorkers, pgLease),
		Site:    githubSite(upstreamURL),
	})
	sqliteLine := "storage sqlite " + c.DBPath + "\n"
	if !strings.Contains(text, sqliteLine) {
		t.Fatalf("the harness's Caddyfile has no %q line to replace:\n%s", sqliteLine, text)
	}
	text = strings.Replace(text, sqliteLine,
		"storage postgres {env."+testutil.DSNEnv+"} {\n\t\t\tschema "+db.schema+"\n\t\t}\n", 1)
	c.run(t, c.writeCaddyfile(t, text))
}

// overlapWatch wraps the upstream's script: it tracks how many requests
// for each delivery id are in flight and records every moment two were.
type overlapWatch struct {
	mu       sync.Mutex
	inFlight map[string]int
	overlaps []string
}

func newOverlapWatch() *overlapWatch { return &overlapWatch{inFlight: map[string]int{}} }

// wrap returns s with the bookkeeping around it.
func (w *overlapWatch) wrap(s script) script {
	return func(r *http.Request, key string, n int) int {
		w.mu.Lock()
		w.inFlight[key]++
		if w.inFlight[key] > 1 {
			w.overlaps = append(w.overlaps, fmt.Sprintf("%s: %d requests at once (the latest to %s)", key, w.inFlight[key], r.URL.Path))
		}
		w.mu.Unlock()
		defer func() {
			w.mu.Lock()
			w.inFlight[key]--
			w.mu.Unlock()
		}()
		return s(r, key, n)
	}
}

// check fails t for each overlap seen since the last check.
func (w *overlapWatch) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, o := range w.overlaps {
		t.Errorf("delivered at overlapping times: %s", o)
	}
	w.overlaps = nil
}

// postAll sends the GitHub events ids, each to the instance pick chooses,
// from a few goroutines at once, and fails unless every one got 202.
func postAll(t *testing.T, ids []string, pick func(i int) *caddyInstance) {
	t.Helper()
	const senders = 8
	var wg sync.WaitGroup
	errs := make(chan error, len(ids))
	next := make(chan int)
	for range senders {
		wg.Go(func() {
			for i := range next {
				c := pick(i)
				body := payload(ids[i], "push")
				hdr := signGitHub(githubSecret, ids[i], "push", body)
				req, err := http.NewRequest(http.MethodPost, c.URL("/hooks/github"), bytes.NewReader(body))
				if err != nil {
					errs <- err
					continue
				}
				req.Header = hdr
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- fmt.Errorf("POST %s: %w", ids[i], err)
					continue
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					errs <- fmt.Errorf("POST %s: status %d, want 202", ids[i], resp.StatusCode)
				}
			}
		})
	}
	for i := range ids {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// answeredAll reports whether every id has a 200 at the upstream.
func answeredAll(ds []delivery, ids []string) bool {
	ok := map[string]bool{}
	for _, d := range ds {
		if d.Status == http.StatusOK {
			ok[d.Key] = true
		}
	}
	for _, id := range ids {
		if !ok[id] {
			return false
		}
	}
	return true
}

// inFlightAt returns the ids whose request on path has not been answered.
func inFlightAt(ds []delivery, path string) []string {
	var ids []string
	for _, d := range ds {
		if d.Path == path && d.End.IsZero() {
			ids = append(ids, d.Key)
		}
	}
	slices.Sort(ids)
	return ids
}

func eventIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return ids
}

// TestPostgresTwoInstances runs two Caddy processes on one schema. Each
// delivers to its own path of one recording upstream, so the upstream
// knows which instance sent what.
//
// Under load (events sent to both at once) every event is delivered, by
// both instances, and no event is ever in flight at the upstream twice.
// Then A holds jobs (its requests hang) for longer than a lease while B
// idles: B never claims them while A lives and extends its leases. A is
// killed with SIGKILL, and B takes A's jobs over once their leases have
// expired, as a second attempt; nothing is lost.
func TestPostgresTwoInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end tests build and run Caddy; skipped with -short")
	}
	db := newPgTestDB(t)
	if cfg, err := pgconn.ParseConfig(db.dsn); err == nil {
		forbidInLogs(kindSecret, db.dsn, cfg.Password)
	}
	watch := newOverlapWatch()
	up := newUpstream(t, watch.wrap(always(http.StatusOK)))
	a, b := newCaddy(t), newCaddy(t)
	startPostgresCaddy(t, a, db, up.URL("/a"))
	startPostgresCaddy(t, b, db, up.URL("/b"))

	// Phase 1: load through both instances.
	load := eventIDs("load", 200)
	started := time.Now()
	postAll(t, load, func(i int) *caddyInstance { return []*caddyInstance{a, b}[i%2] })
	got := up.waitFor(t, "every load event answered 200", func(ds []delivery) bool { return answeredAll(ds, load) })
	elapsed := time.Since(started)
	byPath := map[string]int{}
	cross := 0
	for _, d := range got {
		byPath[d.Path]++
		var n int
		fmt.Sscanf(d.Key, "load-%d", &n)
		if (n%2 == 0) != (d.Path == "/a") {
			cross++ // received by one instance, delivered by the other
		}
	}
	t.Logf("phase 1: %d events through 2 instances in %s (%.0f events/s end to end); %d deliveries by A, %d by B, %d by the instance that did not receive the event",
		len(load), elapsed.Round(time.Millisecond), float64(len(load))/elapsed.Seconds(), byPath["/a"], byPath["/b"], cross)
	if cross == 0 {
		t.Error("phase 1: no instance delivered an event the other received; they do not share one queue")
	}
	if len(got) != len(load) {
		t.Logf("phase 1: %d requests for %d events (a redelivery after an expired lease)", len(got), len(load))
	}
	watch.check(t)

	// Phase 2: fill every worker of both instances, so that A surely
	// holds leased jobs while some are still pending.
	release := make(chan struct{})
	up.setScript(watch.wrap(func(r *http.Request, _ string, _ int) int {
		if r.URL.Path == "/a" {
			<-r.Context().Done() // held until A dies
			return http.StatusServiceUnavailable
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return http.StatusOK
	}))
	takeover := eventIDs("takeover", 3*pgWorkers)
	postAll(t, takeover, func(int) *caddyInstance { return a })
	var held []string
	up.waitFor(t, fmt.Sprintf("%d requests in flight from each instance", pgWorkers), func(ds []delivery) bool {
		held = inFlightAt(ds, "/a")
		return len(held) == pgWorkers && len(inFlightAt(ds, "/b")) == pgWorkers
	})
	isHeld := map[string]bool{}
	var others []string
	for _, id := range held {
		isHeld[id] = true
	}
	for _, id := range takeover {
		if !isHeld[id] {
			others = append(others, id)
		}
	}

	// B delivers its own and the pending jobs, then idles, polling, while
	// A's deliveries hang for longer than a lease: only A's lease
	// extensions keep B off them, and were B to claim one, the overlap
	// watch would see its request beside A's. This wait is the window
	// watched, not a wait for a state.
	close(release)
	up.waitFor(t, "B to deliver every job A does not hold", func(ds []delivery) bool { return answeredAll(ds, others) })
	<-time.After(pgLease + pgLease/2)
	watch.check(t)
	if got := inFlightAt(up.deliveries(), "/a"); !slices.Equal(got, held) {
		t.Fatalf("A's requests in flight changed while it held them: %v, want %v", got, held)
	}

	killed := time.Now()
	a.signal(t, syscall.SIGKILL)
	a.wait(t, stopTimeout) // "signal: killed", as intended

	got = up.waitFor(t, "every takeover event answered 200", func(ds []delivery) bool { return answeredAll(ds, takeover) })
	var first, last time.Duration
	for _, d := range got {
		if !isHeld[d.Key] || d.Path != "/b" {
			continue
		}
		after := d.Start.Sub(killed)
		if first == 0 || after < first {
			first = after
		}
		last = max(last, after)
		// A extended its leases every lease/3 to a lease from then, so
		// its last lease ran to about 2/3 of a lease after the kill or
		// later; the bound leaves another third for a late extension.
		if after < pgLease/3 {
			t.Errorf("%s: B started it %s after A was killed, before A's lease (%s) could have expired", d.Key, after.Round(time.Millisecond), pgLease)
		}
		if d.Attempt != "2" {
			t.Errorf("%s: B delivered it as attempt %s, want 2 (A's attempt counts: A died holding it)", d.Key, d.Attempt)
		}
	}
	t.Logf("phase 2: A killed holding %d jobs; B took them over %s–%s after the kill (lease %s)",
		len(held), first.Round(time.Millisecond), last.Round(time.Millisecond), pgLease)
	for _, id := range held {
		if n := len(up.forKey(id)); n != 2 {
			t.Errorf("%s: %d requests at the upstream, want 2 (A's, cut off by the kill, and B's)", id, n)
		}
	}
	watch.check(t)

	// Nothing lost: every job of both phases is done.
	want := len(load) + len(takeover)
	var counts map[string]int
	var events int
	testutil.Eventually(t, func() bool {
		counts, events = db.jobStatuses(t)
		return counts["done"] == want
	}, func() string { return fmt.Sprintf("%d done jobs; have %v", want, counts) })
	if len(counts) != 1 || events != want {
		t.Errorf("jobs by status %v, %d events; want %d, all done", counts, events, want)
	}

	// B's admin API reports the shared queue, the jobs A received included.
	status, body := b.adminDo(t, http.MethodGet, "/webhook/stats", nil)
	var st struct {
		Counts []struct {
			Status string
			Jobs   int
		}
		Events int
	}
	if err := json.Unmarshal(body, &st); status != http.StatusOK || err != nil {
		t.Fatalf("B's stats: %d %v: %s", status, err, body)
	}
	done := 0
	for _, c := range st.Counts {
		if c.Status == "done" {
			done += c.Jobs
		}
	}
	if done != want || st.Events != want {
		t.Errorf("B's stats: %d done jobs and %d events, want %d of each: %s", done, st.Events, want, body)
	}

	b.stop(t)
	leaks, lines, err := scanLogs([]string{a.logPath, b.logPath}, map[string]string{db.dsn: kindSecret, bodyMarker: kindBody})
	if err != nil {
		t.Fatal(err)
	}
	if lines == 0 {
		t.Error("the instances wrote no log lines")
	}
	if cfg, err := pgconn.ParseConfig(db.dsn); err == nil && cfg.Password != "" {
		pw, _, _ := scanLogs([]string{a.logPath, b.logPath}, map[string]string{cfg.Password: kindSecret})
		leaks = append(leaks, pw...)
	}
	for _, l := range leaks {
		t.Errorf("%s:%d: %s in the log after …%s", l.file, l.line, l.kind, l.context)
	}
}
