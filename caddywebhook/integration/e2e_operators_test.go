package integration

import (
	"bufio"
	"context"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// TestE2EOperators follows one event through the operators' tools of a
// real Caddy: `caddy webhook sign` signs it, it is sent and verified,
// `caddy webhook tail` shows it received and delivered, `caddy webhook
// resend` delivers the done job again with the resend visible to the
// handler, `caddy webhook show --delivery` finds it by the sender's id,
// and `caddy webhook send` injects a test event that arrives marked.
func TestE2EOperators(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end tests build and run Caddy; skipped with -short")
	}
	up := newUpstream(t, always(http.StatusOK))
	c := newCaddy(t)
	c.start(t, caddyConfig{Site: githubSite(up.URL("/github"))})
	tail := startTail(t, c, "--source", "github")

	// sign: the headers a sender adds; the receiver verifies them.
	const id = "ops-demo-1"
	body := payload(id, "push")
	bodyFile := c.writeFile(t, "push-*.json", string(body))
	out, err := c.caddyCmd(t, "webhook", "sign", "--scheme", "github", "--secret-env", "E2E_GITHUB_SECRET",
		"--body", bodyFile, "--event", "push", "--id", id)
	if err != nil {
		t.Fatalf("caddy webhook sign: %v\n%s", err, out)
	}
	header := http.Header{}
	for line := range strings.Lines(out) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if !ok {
			t.Fatalf("sign printed %q, want Name: value lines", out)
		}
		header.Set(name, value)
	}
	if status, resp := post(t, c.URL("/hooks/github"), header, body); status != http.StatusAccepted {
		t.Fatalf("POST signed by the CLI: %d %s\n%s", status, resp, c.logTail())
	}
	up.waitAnswered(t, id, http.StatusOK, 1)
	js := c.waitJobs(t, "github", id, "done")
	job := strconv.FormatInt(js[0].ID, 10)
	tail.waitFor(t, "received  github  accepted 202  delivery "+id)
	tail.waitFor(t, "delivered  github → http  job "+job+" attempt 1")

	// resend: the done job is delivered again; the handler sees the same
	// job and delivery id a second time, and the history keeps both.
	if out, err := c.caddyCmd(t, "webhook", "resend", job, "--address", c.AdminAddr); err != nil || !strings.Contains(out, "resent job "+job) {
		t.Fatalf("caddy webhook resend: %v\n%s", err, out)
	}
	ds := up.waitAnswered(t, id, http.StatusOK, 2)
	var got []delivery
	for _, d := range ds {
		if d.Key == id {
			got = append(got, d)
		}
	}
	if len(got) != 2 || got[1].Header.Get("X-Webhook-Job-Id") != job || got[1].Header.Get("X-Webhook-Delivery-Id") != id {
		t.Errorf("upstream got %s, want job %s delivered twice", summarize(got), job)
	}
	// The handler tells the resend from the first delivery: the attempt
	// number goes on counting and the replay header is set only on it.
	if len(got) == 2 {
		first, again := got[0].Header, got[1].Header
		if first.Get("X-Webhook-Attempt") != "1" || first.Get("X-Webhook-Replay") != "" {
			t.Errorf("first delivery: attempt %q replay %q, want 1 and none", first.Get("X-Webhook-Attempt"), first.Get("X-Webhook-Replay"))
		}
		if again.Get("X-Webhook-Attempt") != "2" || again.Get("X-Webhook-Replay") != "1" {
			t.Errorf("resend: attempt %q replay %q, want 2 and 1", again.Get("X-Webhook-Attempt"), again.Get("X-Webhook-Replay"))
		}
	}
	c.waitJobs(t, "github", id, "done")
	tail.waitFor(t, "delivered  github → http  job "+job+" attempt 2")
	show, err := c.caddyCmd(t, "webhook", "show", job, "--address", c.AdminAddr)
	if err != nil || strings.Count(show, "delivered") != 2 {
		t.Errorf("show %s after resend: %v; want two delivered attempts in the history\n%s", job, err, show)
	}

	// show --delivery: found by the sender's id.
	out, err = c.caddyCmd(t, "webhook", "show", "--source", "github", "--delivery", id, "--address", c.AdminAddr)
	if err != nil || !strings.Contains(out, "delivery id:  "+id) || !strings.Contains(out, job) {
		t.Errorf("caddy webhook show --delivery: %v\n%s", err, out)
	}

	// send: an injected event is delivered, marked, and tailed.
	const injected = "ops-injected-1"
	injBody := c.writeFile(t, "inj-*.json", string(payload(injected, "push")))
	out, err = c.caddyCmd(t, "webhook", "send", "github", "--event", "push", "--body", injBody,
		"--header", "X-GitHub-Event: push", "--delivery", injected, "--address", c.AdminAddr)
	if err != nil || !strings.Contains(out, "injected event") {
		t.Fatalf("caddy webhook send: %v\n%s", err, out)
	}
	ds = up.waitAnswered(t, injected, http.StatusOK, 1)
	for _, d := range ds {
		if d.Key == injected && d.Header.Get("X-Webhook-Injected") != "1" {
			t.Errorf("injected delivery headers %v, want X-Webhook-Injected: 1", d.Header)
		}
	}
	tail.waitFor(t, "received  github  accepted (injected)  delivery "+injected)
}

// tailProc is a running `caddy webhook tail` and the lines it printed.
type tailProc struct {
	mu    sync.Mutex
	lines []string
}

// startTail runs `caddy webhook tail args…` against c until the test ends,
// and returns once it follows the stream.
func startTail(t *testing.T, c *caddyInstance, args ...string) *tailProc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, caddyBinary(t), append([]string{"webhook", "tail", "--address", c.AdminAddr}, args...)...)
	cmd.Dir, cmd.Env = c.dir, c.env()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
	following := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stderr)
		for s.Scan() {
			select {
			case following <- s.Text():
			default:
			}
		}
	}()
	p := &tailProc{}
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, s.Text())
			p.mu.Unlock()
		}
	}()
	select {
	case line := <-following:
		if !strings.Contains(line, "following the webhook queue") {
			t.Fatalf("tail said %q", line)
		}
	case <-time.After(waitTimeout):
		t.Fatal("tail did not start following")
	}
	return p
}

// count returns how many printed lines contain s.
func (p *tailProc) count(s string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.lines {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// waitFor waits until a printed line contains s.
func (p *tailProc) waitFor(t *testing.T, s string) {
	t.Helper()
	p.waitCount(t, s, 1)
}

// waitCount waits until n printed lines contain s.
func (p *tailProc) waitCount(t *testing.T, s string, n int) {
	t.Helper()
	testutil.Eventually(t, func() bool { return p.count(s) >= n }, func() string {
		p.mu.Lock()
		defer p.mu.Unlock()
		return "tail to print " + s + "; printed:\n" + strings.Join(p.lines, "\n")
	})
}
