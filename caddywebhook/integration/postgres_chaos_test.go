package integration

// Three Caddy instances on one PostgreSQL queue, each reaching the server
// through a proxy of the test's, under steady load, while one has its
// answers from the database held past its lease (claims answered too
// late to start), another is stopped with SIGSTOP past its lease, and the
// third is cut off from the database and then killed. Runs against the
// server in CADDYWEBHOOK_TEST_POSTGRES_DSN (see .ci/start-postgres).

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// chaosInstance is one Caddy of the chaos run and the proxy between it and
// the database.
type chaosInstance struct {
	name  string
	caddy *caddyInstance
	proxy *testutil.Proxy
}

// startChaosInstance starts an instance named name whose queue is db's
// schema, reached through a new proxy, with the extra webhook lines given,
// delivering to upstreamURL.
func startChaosInstance(t *testing.T, db *pgTestDB, name, upstreamURL, webhook string) *chaosInstance {
	t.Helper()
	u, err := url.Parse(db.dsn)
	if err != nil {
		t.Fatal("the test DSN is not a URL")
	}
	in := &chaosInstance{name: name, proxy: testutil.NewProxy(t, u.Host), caddy: newCaddy(t)}
	// The instance's DSN, through its proxy, overrides the suite's; the
	// log audit makes sure neither it nor its password is ever logged.
	dsn := in.proxy.ProxyDSN(t, db.dsn)
	in.caddy.Env = []string{testutil.DSNEnv + "=" + dsn}
	forbidInLogs(kindSecret, dsn)
	if pw, ok := u.User.Password(); ok && pw != "" {
		forbidInLogs(kindSecret, pw)
	}
	text := in.caddy.Caddyfile(caddyConfig{Webhook: webhook, Site: githubSite(upstreamURL)})
	sqliteLine := "storage sqlite " + in.caddy.DBPath + "\n"
	if !strings.Contains(text, sqliteLine) {
		t.Fatalf("the harness's Caddyfile has no %q line to replace:\n%s", sqliteLine, text)
	}
	text = strings.Replace(text, sqliteLine,
		"storage postgres {env."+testutil.DSNEnv+"} {\n\t\t\tschema "+db.schema+"\n\t\t}\n", 1)
	in.caddy.run(t, in.caddy.writeCaddyfile(t, text))
	return in
}

// postOnce sends one GitHub event to c and returns the status (0 when no
// answer came) and how long the answer took.
func postOnce(client *http.Client, c *caddyInstance, id string) (int, time.Duration) {
	body := payload(id, "push")
	req, err := http.NewRequest(http.MethodPost, c.URL("/hooks/github"), bytes.NewReader(body))
	if err != nil {
		return 0, 0
	}
	req.Header = signGitHub(githubSecret, id, "push", body)
	started := time.Now()
	resp, err := client.Do(req)
	took := time.Since(started)
	if err != nil {
		return 0, took
	}
	resp.Body.Close()
	return resp.StatusCode, took
}

// probe is one request sent to the partitioned instance.
type probe struct {
	sent   time.Time
	status int
	took   time.Duration
}

// TestPostgresChaos: three instances share a queue under load; each has
// its own fault, all of them at once:
//
//   - C's answers from the database are held for 3s (its lease is 2s, its
//     store_timeout 5s): its claims are answered after their leases ran
//     out, while A takes the same jobs over and delivers them (a burst of
//     slow ones), and must not start;
//   - B is stopped with SIGSTOP for 3.5s, past its lease;
//   - then A is cut off from the database for 4s (store_timeout 1s):
//     every request it gets meanwhile is answered 503 within its
//     deadline, and once the link heals the next one is 202 at once;
//     then A is killed.
//
// Senders retry a refused event on the next instance, as a sender does
// later. Every accepted event is delivered, and no event is ever in flight
// at the upstream twice at once.
func TestPostgresChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end tests build and run Caddy; skipped with -short")
	}
	const (
		lease          = 2 * time.Second
		storeTimeout   = time.Second // A's
		hold           = 3 * time.Second
		stop           = lease + 3*lease/4
		partition      = 4 * time.Second
		upstreamDelay  = 300 * time.Millisecond
		burst          = 24
		burstDelay     = 1500 * time.Millisecond
		senders        = 4
		gap            = 100 * time.Millisecond
		deadlineSlack  = time.Second // for a loaded machine
		afterHealBound = 2 * time.Second
	)
	db := newPgTestDB(t)
	watch := newOverlapWatch()
	up := newUpstream(t, watch.wrap(func(r *http.Request, key string, _ int) int {
		delay := upstreamDelay
		if strings.HasPrefix(key, "burst-") {
			delay = burstDelay
		}
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
		}
		return http.StatusOK
	}))
	base := fmt.Sprintf("workers 8\nlease %s\npoll_interval 200ms\nshutdown_grace 1s", lease)
	a := startChaosInstance(t, db, "a", up.URL("/a"), base+"\nstore_timeout "+storeTimeout.String())
	b := startChaosInstance(t, db, "b", up.URL("/b"), base)
	c := startChaosInstance(t, db, "c", up.URL("/c"), base+"\nstore_timeout 5s")
	all := []*chaosInstance{a, b, c}

	// The load: each event goes to the next instance in turn; a refusal
	// or no answer sends it to the next one a moment later.
	var (
		mu       sync.Mutex
		accepted = map[string]bool{}
		refused  = map[string]int{} // by instance
		skipA    bool               // A is killed: send it nothing more
		quit     = make(chan struct{})
		wg       sync.WaitGroup
	)
	client := &http.Client{Timeout: 10 * time.Second}
	for s := range senders {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-quit:
					return
				case <-time.After(gap):
				}
				id := fmt.Sprintf("chaos-%d-%04d", s, n)
				for try := 0; try < 30; try++ {
					in := all[(n+try)%len(all)]
					mu.Lock()
					dead := in == a && skipA
					mu.Unlock()
					if dead {
						continue
					}
					status, _ := postOnce(client, in.caddy, id)
					if status == http.StatusAccepted {
						mu.Lock()
						accepted[id] = true
						mu.Unlock()
						break
					}
					mu.Lock()
					refused[in.name]++
					mu.Unlock()
					<-time.After(100 * time.Millisecond)
				}
			}
		})
	}
	<-time.After(time.Second) // warm up: every instance delivering

	// C's answers held, B stopped, at once; then a burst of slow events
	// through A, so that C's next claim (sent within its poll interval)
	// takes some, and A takes them over once that claim's leases run out
	// and is still delivering them when C's late answer arrives.
	c.proxy.HoldAnswers()
	b.caddy.signal(t, syscall.SIGSTOP)
	stopped := time.Now()
	for i := range burst {
		id := fmt.Sprintf("burst-%02d", i)
		if status, _ := postOnce(client, a.caddy, id); status != http.StatusAccepted {
			t.Fatalf("burst event %s: status %d, want 202", id, status)
		}
		mu.Lock()
		accepted[id] = true
		mu.Unlock()
	}
	<-time.After(hold - time.Since(stopped))
	c.proxy.Heal()
	<-time.After(stop - time.Since(stopped))
	b.caddy.signal(t, syscall.SIGCONT)

	// A cut off: a probe every 200ms; then the first request after the
	// heal.
	var probes []probe
	a.proxy.Partition()
	cut := time.Now()
	for time.Since(cut) < partition {
		p := probe{sent: time.Now()}
		p.status, p.took = postOnce(client, a.caddy, fmt.Sprintf("probe-%03d", len(probes)))
		probes = append(probes, p)
		<-time.After(200 * time.Millisecond)
	}
	a.proxy.Heal()
	healStatus, healTook := postOnce(client, a.caddy, "probe-after-heal")
	if healStatus == http.StatusAccepted {
		mu.Lock()
		accepted["probe-after-heal"] = true
		mu.Unlock()
	}
	<-time.After(500 * time.Millisecond)
	mu.Lock()
	skipA = true
	mu.Unlock()
	a.caddy.signal(t, syscall.SIGKILL)
	a.caddy.wait(t, stopTimeout)
	<-time.After(500 * time.Millisecond)
	close(quit)
	wg.Wait()

	mu.Lock()
	ids := make([]string, 0, len(accepted))
	for id := range accepted {
		ids = append(ids, id)
	}
	mu.Unlock()
	slices.Sort(ids)
	testutil.EventuallyWithin(t, 2*time.Minute, func() bool { return answeredAll(up.deliveries(), ids) },
		func() string { return fmt.Sprintf("every one of %d accepted events answered 200", len(ids)) })
	watch.mu.Lock()
	overlaps := len(watch.overlaps)
	watch.mu.Unlock()
	watch.check(t)

	// A's requests during the partition: 503 within the deadline, those
	// sent once a store call could have noticed; then 202 at once.
	late, ok503 := 0, 0
	var slowest time.Duration
	for _, p := range probes {
		switch {
		case p.status == http.StatusServiceUnavailable:
			ok503++
			slowest = max(slowest, p.took)
			if p.took > storeTimeout+deadlineSlack {
				late++
				t.Errorf("a request %s into the partition: 503 after %s, want within store_timeout %s", p.sent.Sub(cut).Round(time.Millisecond), p.took.Round(time.Millisecond), storeTimeout)
			}
		default:
			t.Errorf("a request %s into the partition: status %d after %s, want 503", p.sent.Sub(cut).Round(time.Millisecond), p.status, p.took.Round(time.Millisecond))
		}
	}
	if healStatus != http.StatusAccepted || healTook > afterHealBound {
		t.Errorf("the first request after the heal: %d after %s, want 202 at once", healStatus, healTook.Round(time.Millisecond))
	}

	// C did meet a claim answered too late to start, so the case was run.
	cLog, err := os.ReadFile(c.caddy.logPath)
	if err != nil {
		t.Fatal(err)
	}
	stale := bytes.Count(cLog, []byte("too close to the end of its"))
	if stale == 0 {
		t.Errorf("C's log shows no claim answered too late to start: the scenario did not hold a claim's answer past its lease\n%s", c.caddy.logTail())
	}

	ds := up.deliveries()
	perKey := map[string]int{}
	for _, d := range ds {
		if d.Status == http.StatusOK {
			perKey[d.Key]++
		}
	}
	dups := 0
	for _, n := range perKey {
		dups += n - 1
	}
	mu.Lock()
	lost := 0
	for _, id := range ids {
		if perKey[id] == 0 {
			lost++
		}
	}
	t.Logf("figures: postgres_chaos accepted=%d delivered=%d lost=%d duplicates=%d upstream_requests=%d overlaps=%d stale_claims_handed_back=%d "+
		"partition_probes=%d 503=%d slowest_503=%s late_503=%d first_after_heal=%d in %s refused_by=%v",
		len(ids), len(perKey), lost, dups, len(ds), overlaps, stale, len(probes), ok503, slowest.Round(time.Millisecond), late,
		healStatus, healTook.Round(time.Millisecond), refused)
	mu.Unlock()
}
