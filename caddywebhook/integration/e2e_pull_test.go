package integration

// Pull consumers end to end: a real Caddy with a pull target and a
// webhook_consumer endpoint, real `caddy webhook listen` processes (killed,
// restarted, interrupted), and a local app on a port of its own that the
// test stops and starts again.

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// pullToken is the consumer endpoint's token; the audit checks that no log
// of Caddy or of a listener holds it.
const pullToken = "e2e-pull-token-Rt5yN8qW2zL0pX"

func init() {
	forbidInLogs(kindSecret, pullToken)
}

func TestPull(t *testing.T) {
	if testing.Short() {
		t.Skip("the pull suite builds and runs Caddy; skipped with -short")
	}
	t.Run("listener_killed_app_stopped", testPullKilled)
	t.Run("two_listeners", testPullTwoListeners)
	t.Run("interrupt", testPullInterrupt)
	t.Run("server_restart", testPullServerRestart)
	t.Run("wrong_token", testPullWrongToken)
}

// pullConfig is a Caddy with a GitHub receiver whose events go to the pull
// target laptop, and its consumer endpoint on /consume/*. The token comes
// from a file, as {file.…}, so that no config Caddy logs holds it.
func pullConfig(t *testing.T, c *caddyInstance, webhook string) caddyConfig {
	t.Helper()
	tokenFile := filepath.Join(c.dir, "pull-token")
	if err := os.WriteFile(tokenFile, []byte(pullToken), 0o600); err != nil {
		t.Fatal(err)
	}
	site := receiver("/hooks/github", "github", "github", "{env.E2E_GITHUB_SECRET}", "to pull {\n\tname laptop\n}") +
		fmt.Sprintf("\thandle /consume/* {\n\t\twebhook_consumer {\n\t\t\ttoken {file.%s}\n\t\t\ttargets laptop\n\t\t}\n\t}\n", tokenFile)
	return caddyConfig{Webhook: webhook, Site: site}
}

// localApp is the developer's app the listeners forward to: a server on a
// fixed port that the test can stop and start again. It holds a lock per
// event while it answers, and records every time an event was being
// answered twice at once.
type localApp struct {
	addr  string
	delay func() time.Duration

	mu       sync.Mutex
	srv      *http.Server
	inflight map[string]int
	overlaps []string
	ok       map[string]int // 200s answered, per event
	attempts map[string][]string
	headers  map[string]http.Header // the last request's, per event
}

func newLocalApp(t *testing.T, delay func() time.Duration) *localApp {
	t.Helper()
	a := &localApp{
		addr:     fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		delay:    delay,
		inflight: map[string]int{},
		ok:       map[string]int{},
		attempts: map[string][]string{},
		headers:  map[string]http.Header{},
	}
	a.start(t)
	t.Cleanup(a.stop)
	return a
}

func (a *localApp) URL() string { return "http://" + a.addr + "/webhooks" }

func (a *localApp) start(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", a.addr)
	if err != nil {
		t.Fatalf("local app: listen: %v", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(a.serve)}
	a.mu.Lock()
	a.srv = srv
	a.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// stop closes the listener and every connection: the port refuses
// connections until start.
func (a *localApp) stop() {
	a.mu.Lock()
	srv := a.srv
	a.srv = nil
	a.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

func (a *localApp) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var p struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(body, &p)
	key := p.ID
	a.mu.Lock()
	a.inflight[key]++
	if a.inflight[key] > 1 {
		a.overlaps = append(a.overlaps, key)
	}
	a.attempts[key] = append(a.attempts[key], r.Header.Get("X-Webhook-Attempt"))
	a.headers[key] = r.Header.Clone()
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.inflight[key]--
		a.mu.Unlock()
	}()
	select {
	case <-time.After(a.delay()):
	case <-r.Context().Done():
		return
	}
	a.mu.Lock()
	a.ok[key]++
	a.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (a *localApp) okCounts() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]int, len(a.ok))
	for k, v := range a.ok {
		out[k] = v
	}
	return out
}

func (a *localApp) overlapping() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.overlaps...)
}

func (a *localApp) busy() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, v := range a.inflight {
		n += v
	}
	return n
}

// listenProc is one `caddy webhook listen` process. Its stdout (one line
// per delivery) and stderr (notices) go to a file the log audit reads.
type listenProc struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error
}

// startListen runs `caddy webhook listen` against c's consumer endpoint,
// forwarding target laptop's events to url.
func startListen(t *testing.T, c *caddyInstance, url, token string, extra ...string) *listenProc {
	t.Helper()
	return startListenArgs(t, c, token, append([]string{"--target", "laptop", "--forward-to", url}, extra...)...)
}

// startListenArgs runs `caddy webhook listen` against c's consumer
// endpoint with the token and more flags: the targets, where to forward.
func startListenArgs(t *testing.T, c *caddyInstance, token string, extra ...string) *listenProc {
	t.Helper()
	p := &listenProc{logPath: auditLogPath(t, c.name+"-listen"), done: make(chan struct{})}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"webhook", "listen", "--url", c.URL("/consume"), "--token-env", "E2E_PULL_TOKEN", "--wait", "2s"}, extra...)
	p.cmd = exec.Command(caddyBinary(t), args...)
	p.cmd.Env = append(os.Environ(), "E2E_PULL_TOKEN="+token, "HOME="+c.dir)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start listen: %v", err)
	}
	go func() {
		p.err = p.cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	t.Cleanup(func() { p.signal(syscall.SIGKILL) })
	return p
}

func (p *listenProc) signal(sig syscall.Signal) {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(sig)
	}
}

// wait waits for the process to exit and returns its error.
func (p *listenProc) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(stopTimeout):
		t.Fatalf("listen did not exit within %s:\n%s", stopTimeout, p.output(t))
		return nil
	}
}

func (p *listenProc) output(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// deliveryLines counts the lines of deliveries the app answered 200.
func (p *listenProc) deliveryLines(t *testing.T) int {
	t.Helper()
	return strings.Count(p.output(t), "[200] done")
}

// sendPull sends n signed GitHub events named prefix-0… to c, one every
// gap, and returns their ids; run it on a goroutine of its own.
func sendPull(c *caddyInstance, prefix string, n int, gap time.Duration) ([]string, error) {
	ids := make([]string, 0, n)
	for i := range n {
		id := fmt.Sprintf("%s-%03d", prefix, i)
		body := payload(id, "push")
		req, _ := http.NewRequest(http.MethodPost, c.URL("/hooks/github"), bytes.NewReader(body))
		req.Header = signGitHub(githubSecret, id, "push", body)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return ids, err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return ids, fmt.Errorf("send %s: %d", id, resp.StatusCode)
		}
		ids = append(ids, id)
		time.Sleep(gap) // pacing the sender, not waiting for a state
	}
	return ids, nil
}

// pullJob is a job of the pull target, with its attempt history.
type pullJob struct {
	id       int64
	key      string
	status   string
	attempts int
	history  []string // outcome of each recorded attempt, oldest first
	numbers  []int    // attempt number of each
}

func pullJobs(t *testing.T, c *caddyInstance) []pullJob {
	t.Helper()
	var out []pullJob
	c.queryDB(t, func(db *sql.DB) error {
		rows, err := db.Query(`SELECT j.id, e.delivery_id, j.status, j.attempts FROM jobs j JOIN events e ON e.id = j.event_id
			WHERE j.target = 'laptop' ORDER BY j.id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var j pullJob
			if err := rows.Scan(&j.id, &j.key, &j.status, &j.attempts); err != nil {
				return err
			}
			out = append(out, j)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for i := range out {
			hist, err := db.Query(`SELECT attempt, outcome FROM attempts WHERE job_id = ? ORDER BY seq`, out[i].id)
			if err != nil {
				return err
			}
			for hist.Next() {
				var n int
				var o string
				if err := hist.Scan(&n, &o); err != nil {
					hist.Close()
					return err
				}
				out[i].numbers = append(out[i].numbers, n)
				out[i].history = append(out[i].history, o)
			}
			hist.Close()
		}
		return nil
	})
	return out
}

// testPullKilled: 200 events are sent while the listener is SIGKILLed twice
// and started again, and the local app is stopped for 5 s in the middle.
// Every event reaches the app, every job ends done and none dead, no event
// is answered twice at once, and each job's history shows its attempts.
func testPullKilled(t *testing.T) {
	t.Parallel()
	app := newLocalApp(t, func() time.Duration { return time.Duration(5+rand.IntN(25)) * time.Millisecond })
	c := newCaddy(t)
	// A short lease, so that a killed listener's jobs come back within
	// seconds; quick retries for the deliveries cut by the app's stop.
	c.start(t, pullConfig(t, c, "lease 2s\npoll_interval 200ms\nbackoff 200ms 1s\nmax_attempts 50"))

	type sent struct {
		ids []string
		err error
	}
	sender := make(chan sent, 1)
	go func() {
		ids, err := sendPull(c, "kill", 200, 40*time.Millisecond)
		sender <- sent{ids, err}
	}()
	l := startListen(t, c, app.URL(), pullToken, "--concurrency", "4")
	// Each kill waits for deliveries in flight, so it cuts some short.
	killWhileBusy := func(l *listenProc) *listenProc {
		t.Helper()
		testutil.Eventually(t, func() bool { return app.busy() > 0 }, func() string { return "no delivery in flight to kill\n" + l.output(t) })
		l.signal(syscall.SIGKILL)
		_ = l.wait(t)
		return startListen(t, c, app.URL(), pullToken, "--concurrency", "4")
	}
	l = killWhileBusy(l)
	time.Sleep(time.Second) // let the sender and the new listener run a while
	app.stop()
	stoppedAt := time.Now()
	time.Sleep(2 * time.Second) // the app is down: 5 s in all
	// The second kill, while the app is down and the listener waits for it.
	l.signal(syscall.SIGKILL)
	_ = l.wait(t)
	l = startListen(t, c, app.URL(), pullToken, "--concurrency", "4")
	time.Sleep(time.Until(stoppedAt.Add(5 * time.Second)))
	app.start(t)

	s := <-sender
	if s.err != nil || len(s.ids) != 200 {
		t.Fatalf("sent %d events: %v", len(s.ids), s.err)
	}
	var jobs []pullJob
	testutil.EventuallyWithin(t, 90*time.Second, func() bool {
		jobs = pullJobs(t, c)
		if len(jobs) != 200 {
			return false
		}
		for _, j := range jobs {
			if j.status != "done" {
				return false
			}
		}
		return true
	}, func() string {
		st := map[string]int{}
		for _, j := range jobs {
			st[j.status]++
		}
		return fmt.Sprintf("jobs by status %v\n%s", st, l.output(t))
	})
	ok := app.okCounts()
	for _, id := range s.ids {
		if ok[id] == 0 {
			t.Errorf("event %s never reached the local app", id)
		}
	}
	if o := app.overlapping(); len(o) > 0 {
		t.Errorf("events answered twice at once: %v", o)
	}
	retried := 0
	for _, j := range jobs {
		// The last attempt is in the history, done, with its number; an
		// attempt cut by a kill has no entry (no one lived to record it),
		// one cut by the app's stop is a retry, a hand-back is recorded as
		// running, uncharged.
		n := len(j.history)
		if n == 0 || j.history[n-1] != "done" || j.numbers[n-1] != j.attempts {
			t.Errorf("job %d (%s): %d attempts, history %v %v; want the last entry done with attempt %d",
				j.id, j.key, j.attempts, j.numbers, j.history, j.attempts)
		}
		if j.attempts > 1 || n > 1 {
			retried++
		}
	}
	out := l.output(t)
	if !strings.Contains(out, "refused the connection") || strings.Count(out, "refused the connection") > 1 {
		t.Errorf("the listener started during the app's stop says %d times that the app refused, want once:\n%s",
			strings.Count(out, "refused the connection"), out)
	}
	t.Logf("figures: pull kill/stop: 200 events, %d jobs with more than one attempt or history entry, %d requests to the app",
		retried, sumAttempts(app))
}

func sumAttempts(a *localApp) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, v := range a.attempts {
		n += len(v)
	}
	return n
}

// testPullTwoListeners: two listeners on one target share the work; each
// event reaches the app once while the leases hold.
func testPullTwoListeners(t *testing.T) {
	t.Parallel()
	app := newLocalApp(t, func() time.Duration { return time.Duration(10+rand.IntN(20)) * time.Millisecond })
	c := newCaddy(t)
	c.start(t, pullConfig(t, c, "lease 10s\npoll_interval 200ms"))
	a := startListen(t, c, app.URL(), pullToken, "--concurrency", "2")
	b := startListen(t, c, app.URL(), pullToken, "--concurrency", "2")
	ids, err := sendPull(c, "two", 100, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, 60*time.Second, func() bool {
		ok := app.okCounts()
		for _, id := range ids {
			if ok[id] == 0 {
				return false
			}
		}
		return true
	}, func() string { return fmt.Sprintf("%d of 100 delivered", len(app.okCounts())) })
	for id, n := range app.okCounts() {
		if n != 1 {
			t.Errorf("event %s reached the app %d times, want once", id, n)
		}
	}
	if n := sumAttempts(app); n != 100 {
		t.Errorf("the app got %d requests for 100 events, want 100", n)
	}
	if o := app.overlapping(); len(o) > 0 {
		t.Errorf("events answered twice at once: %v", o)
	}
	// A listener prints a delivery's line once its answer is recorded,
	// a moment after the app answered.
	var na, nb int
	testutil.Eventually(t, func() bool {
		na, nb = a.deliveryLines(t), b.deliveryLines(t)
		return na+nb >= 100
	}, func() string { return fmt.Sprintf("listeners printed %d and %d deliveries of 100", na, nb) })
	if na+nb != 100 || na == 0 || nb == 0 {
		t.Errorf("listeners printed %d and %d deliveries, want 100 shared by both", na, nb)
	}
	testutil.Eventually(t, func() bool {
		for _, j := range pullJobs(t, c) {
			if j.status != "done" {
				return false
			}
		}
		return true
	}, func() string { return "jobs not all done" })
	// The forwarded request is the http target's: metadata headers, the
	// stored content type, no sender signature.
	app.mu.Lock()
	h := app.headers[ids[0]]
	app.mu.Unlock()
	if h.Get("X-Webhook-Delivery-Id") != ids[0] || h.Get("X-Webhook-Source") != "github" || h.Get("X-Webhook-Event-Type") != "push" ||
		h.Get("X-Webhook-Attempt") != "1" || h.Get("X-Webhook-Job-Id") == "" || h.Get("Content-Type") != "application/json" ||
		h.Get("X-Hub-Signature-256") != "" {
		t.Errorf("forwarded headers %v, want the http target's", h)
	}
}

// testPullInterrupt: SIGINT stops claiming and lets the requests the app
// already has finish within --grace, their answers recorded; a second
// SIGINT cuts them short and hands them back at once, uncharged. listen
// says which it did and exits 0.
func testPullInterrupt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		hold      time.Duration // how long the app takes with a request
		twice     bool
		want      string // the job's status afterwards
		wantLine  string
		wantQuick bool // exits long before the app would have answered
	}{
		{name: "requests in flight finish", hold: time.Second, want: "done", wantLine: "stopped: 3 deliveries finished and answered"},
		{name: "a second SIGINT cuts them short", hold: time.Minute, twice: true, want: "pending", wantLine: "stopped: handed back 3 jobs uncharged (3 cut short)", wantQuick: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			app := newLocalApp(t, func() time.Duration { return tt.hold })
			c := newCaddy(t)
			c.start(t, pullConfig(t, c, "lease 30s"))
			l := startListen(t, c, app.URL(), pullToken, "--concurrency", "3")
			if _, err := sendPull(c, "int", 3, 0); err != nil {
				t.Fatal(err)
			}
			testutil.Eventually(t, func() bool { return app.busy() == 3 }, func() string { return "the app never held 3 deliveries\n" + l.output(t) })
			start := time.Now()
			l.signal(syscall.SIGINT)
			if tt.twice {
				testutil.Eventually(t, func() bool {
					return strings.Contains(l.output(t), "stopping: 3 requests the app has may finish within 10s")
				},
					func() string { return "listen did not say it is stopping:\n" + l.output(t) })
				l.signal(syscall.SIGINT)
			}
			if err := l.wait(t); err != nil {
				t.Fatalf("listen exited with %v after SIGINT, want 0:\n%s", err, l.output(t))
			}
			if tt.wantQuick && time.Since(start) > 20*time.Second {
				t.Errorf("listen took %s to stop after the second SIGINT", time.Since(start))
			}
			// Well within the 30 s lease: the jobs are done, or pending
			// again and uncharged.
			for _, j := range pullJobs(t, c) {
				wantAttempts := 1
				if tt.want == "pending" {
					wantAttempts = 0
				}
				if j.status != tt.want || j.attempts != wantAttempts {
					t.Errorf("job %d after SIGINT: %s with %d attempts, want %s with %d", j.id, j.status, j.attempts, tt.want, wantAttempts)
				}
			}
			if out := l.output(t); !strings.Contains(out, tt.wantLine) {
				t.Errorf("listen's output does not say %q:\n%s", tt.wantLine, out)
			}
		})
	}
}

// testPullServerRestart: the listener rides out a restart of the server,
// saying once that it cannot claim, and delivers what comes after.
func testPullServerRestart(t *testing.T) {
	t.Parallel()
	app := newLocalApp(t, func() time.Duration { return time.Millisecond })
	c := newCaddy(t)
	cfg := pullConfig(t, c, "poll_interval 200ms")
	c.start(t, cfg)
	l := startListen(t, c, app.URL(), pullToken)
	delivered := func(ids []string) {
		t.Helper()
		testutil.Eventually(t, func() bool {
			ok := app.okCounts()
			for _, id := range ids {
				if ok[id] == 0 {
					return false
				}
			}
			return true
		}, func() string { return fmt.Sprintf("%d delivered\n%s", len(app.okCounts()), l.output(t)) })
	}
	before, err := sendPull(c, "before", 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	delivered(before)
	c.stop(t)
	testutil.Eventually(t, func() bool { return strings.Contains(l.output(t), "cannot claim") },
		func() string { return "the listener never noticed the server was gone\n" + l.output(t) })
	c.start(t, cfg)
	after, err := sendPull(c, "after", 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	delivered(after)
	out := l.output(t)
	if n := strings.Count(out, "Ready! Forwarding"); n != 2 {
		t.Errorf("the listener said it was ready %d times, want twice (start, reconnect):\n%s", n, out)
	}
	if n := strings.Count(out, "cannot claim"); n > 2 {
		t.Errorf("the listener said %d times that it cannot claim, want it said once per kind of failure:\n%s", n, out)
	}
}

// testPullWrongToken: a listener with a wrong token stops at once, with a
// message that says so and does not repeat the token.
func testPullWrongToken(t *testing.T) {
	t.Parallel()
	c := newCaddy(t)
	c.start(t, pullConfig(t, c, ""))
	wrong := "e2e-wrong-token-Hq3mZ7vB1xK9"
	forbidInLogs(kindSecret, wrong)
	l := startListen(t, c, "http://127.0.0.1:1/webhooks", wrong)
	err := l.wait(t)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("listen with a wrong token: %v, want a failure exit", err)
	}
	if out := l.output(t); !strings.Contains(out, "401") {
		t.Errorf("listen's output does not name the 401:\n%s", out)
	}
}
