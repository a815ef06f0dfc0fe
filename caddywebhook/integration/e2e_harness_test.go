package integration

// The end-to-end harness: a real Caddy with the plugin, built once per test
// binary from ./cmd/caddy and run as a separate process per test, with its own
// ports, data directories, SQLite file and captured log. Building and running
// the process is internal/caddyproc's, which the load test shares.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/caddyproc"
	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// suiteDir holds what outlives a single test: the Caddy binary and every
// instance's log, which the log audit reads at the end. TestMain removes it.
var suiteDir string

// e2eBin is the Caddy binary the suites run, built once per test binary on
// first use, so that a -run that selects no Caddy test does not pay for the
// build.
var e2eBin struct {
	once sync.Once
	path string
	err  error
}

// Deadlines of the harness. They bound the suite when something hangs; no
// test waits for them on its happy path. The suite polls only another
// process's state (the admin API, the database, a log file), with
// testutil.Eventually.
const (
	startTimeout = 30 * time.Second
	stopTimeout  = 30 * time.Second
	// waitTimeout bounds a CLI command or a query of the database, as
	// testutil.Eventually bounds a poll.
	waitTimeout = testutil.WaitTimeout
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "caddywebhook-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "create suite dir:", err)
		os.Exit(1)
	}
	suiteDir = dir
	code := m.Run()
	// Keep the logs of a failed run (or on request) for a post-mortem.
	if code != 0 || os.Getenv("CADDYWEBHOOK_E2E_KEEP") == "1" {
		fmt.Fprintln(os.Stderr, "e2e: Caddy logs kept in", dir)
	} else {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// caddyBinary returns the path of the dev binary, building it on first call.
// It is built without -race on purpose: the race detector slows Caddy down
// several times and the plugin's races are the unit tests' business. Set
// CADDYWEBHOOK_E2E_RACE=1 to build it with -race anyway, or
// CADDYWEBHOOK_E2E_CADDY=/path/to/caddy to run the suite against a binary
// built elsewhere, such as with xcaddy.
func caddyBinary(t *testing.T) string {
	t.Helper()
	e2eBin.once.Do(func() {
		if p := os.Getenv("CADDYWEBHOOK_E2E_CADDY"); p != "" {
			e2eBin.path, e2eBin.err = filepath.Abs(p)
			return
		}
		race := os.Getenv("CADDYWEBHOOK_E2E_RACE") == "1"
		e2eBin.path, e2eBin.err = caddyproc.Build(context.Background(), suiteDir, race)
	})
	if e2eBin.err != nil {
		t.Fatal(e2eBin.err)
	}
	return e2eBin.path
}

// freePort returns a loopback TCP port nobody listens on right now, from
// testutil.FreeAddr, which keeps out of the range the kernel gives clients.
func freePort(t *testing.T) int {
	t.Helper()
	_, port, err := net.SplitHostPort(testutil.FreeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// caddyConfig is the variable part of a test's Caddyfile. The harness adds
// the global options that isolate the instance (admin address, storage, the
// database path, no HTTPS) and the site address.
type caddyConfig struct {
	// Webhook holds extra lines for the global `webhook { }` block.
	Webhook string
	// Site is the body of the site block on the instance's HTTP address.
	Site string
}

// siteLog is the access log of every test site: the one docs/OPERATIONS.md
// recommends. Caddy's access log records request headers, from a copy of the
// request taken before any handler runs, so the receiver cannot remove the
// sender's signature (for gitlab, the secret itself) from it; the filter
// does. The log audit checks that with it nothing secret is left.
const siteLog = `	log {
		format filter {
			request>headers>X-Hub-Signature-256 delete
			request>headers>X-Hub-Signature delete
			request>headers>Stripe-Signature delete
			request>headers>Webhook-Signature delete
			request>headers>Svix-Signature delete
			request>headers>X-Slack-Signature delete
			request>headers>X-Shopify-Hmac-Sha256 delete
			request>headers>X-Gitlab-Token delete
			request>headers>X-Hook-Secret delete
			resp_headers>X-Hook-Secret delete
			request>uri query {
				delete hub.verify_token
			}
			wrap json
		}
	}`

// caddyInstance is one Caddy process (and its restarts) with fixed ports and
// directories.
type caddyInstance struct {
	name      string
	dir       string // config, data and the exec targets' output
	AdminAddr string // host:port of the admin API
	HTTPAddr  string // host:port of the site
	DBPath    string // the webhook app's SQLite file
	WorkDir   string // Caddy's working directory; default: dir
	logPath   string

	// Env holds more NAME=value variables for the process, such as OTEL_*.
	Env []string

	mu   sync.Mutex
	proc *caddyproc.Process // the current run, nil before the first
	runs int
}

// newCaddy prepares an instance; start runs it. Its log goes to the suite's
// log directory so the audit can read it after the test is gone.
func newCaddy(t *testing.T) *caddyInstance {
	t.Helper()
	dir := t.TempDir()
	c := &caddyInstance{
		name:      strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()),
		dir:       dir,
		AdminAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		HTTPAddr:  fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		DBPath:    filepath.Join(dir, "queue.db"),
	}
	c.logPath = auditLogPath(t, c.name)
	if err := os.Mkdir(c.TmpDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.kill)
	return c
}

// TmpDir is the instance's TMPDIR, which exec targets inherit.
func (c *caddyInstance) TmpDir() string { return filepath.Join(c.dir, "tmp") }

// URL returns the site URL for path.
func (c *caddyInstance) URL(path string) string { return "http://" + c.HTTPAddr + path }

// AdminURL returns the admin API URL for path.
func (c *caddyInstance) AdminURL(path string) string { return "http://" + c.AdminAddr + path }

// Caddyfile renders cfg with the instance's isolation options.
func (c *caddyInstance) Caddyfile(cfg caddyConfig) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{\n\tadmin %s\n\tpersist_config off\n\tauto_https off\n", c.AdminAddr)
	fmt.Fprintf(&b, "\tstorage file_system %s\n", filepath.Join(c.dir, "caddy-storage"))
	fmt.Fprintf(&b, "\twebhook {\n\t\tstorage sqlite %s\n", c.DBPath)
	for _, line := range strings.Split(strings.TrimSpace(cfg.Webhook), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			fmt.Fprintf(&b, "\t\t%s\n", line)
		}
	}
	b.WriteString("\t}\n}\n\n")
	fmt.Fprintf(&b, "http://%s {\n%s\n%s\n}\n", c.HTTPAddr, siteLog, cfg.Site)
	return b.String()
}

// writeConfig writes the Caddyfile and returns its path. The name starts with
// "Caddyfile" so that Caddy picks the caddyfile adapter by itself, as it does
// for the demo's Caddyfile.example.
func (c *caddyInstance) writeConfig(t *testing.T, cfg caddyConfig) string {
	t.Helper()
	return c.writeCaddyfile(t, c.Caddyfile(cfg))
}

// writeCaddyfile writes a complete Caddyfile and returns its path.
func (c *caddyInstance) writeCaddyfile(t *testing.T, text string) string {
	t.Helper()
	return c.writeFile(t, "Caddyfile.%d", text)
}

// writeJSON writes a JSON config and returns its path; the .json extension
// tells Caddy to use no adapter.
func (c *caddyInstance) writeJSON(t *testing.T, text string) string {
	t.Helper()
	return c.writeFile(t, "config.%d.json", text)
}

func (c *caddyInstance) writeFile(t *testing.T, pattern, text string) string {
	t.Helper()
	c.mu.Lock()
	c.runs++
	n := c.runs
	c.mu.Unlock()
	path := filepath.Join(c.dir, fmt.Sprintf(pattern, n))
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatalf("write config: %v", err)
	}
	return path
}

// env isolates Caddy's data and config directories from the machine's and
// hands Caddy the suite's secrets, which configs read as {env.E2E_*}.
func (c *caddyInstance) env() []string {
	return append(append(os.Environ(),
		"HOME="+c.dir,
		"XDG_DATA_HOME="+filepath.Join(c.dir, "data"),
		"XDG_CONFIG_HOME="+filepath.Join(c.dir, "config"),
		"TMPDIR="+c.TmpDir(),
		"E2E_GITHUB_SECRET="+githubSecret,
		"E2E_STRIPE_SECRET="+stripeSecret,
		"E2E_STANDARD_SECRET="+standardSecret,
		"E2E_GITLAB_SECRET="+gitlabSecret,
	), c.Env...)
}

// start runs `caddy run` on cfg and returns once the admin API and the site
// both answer.
func (c *caddyInstance) start(t *testing.T, cfg caddyConfig) {
	t.Helper()
	c.run(t, c.writeConfig(t, cfg))
}

// run runs `caddy run` on the config file at path and returns once the
// admin API and the site both answer.
func (c *caddyInstance) run(t *testing.T, path string) {
	t.Helper()
	p, err := caddyproc.Start(context.Background(), caddyproc.Config{
		Bin:          caddyBinary(t),
		Args:         []string{"run", "--config", path},
		Dir:          cmp.Or(c.WorkDir, c.dir),
		Env:          c.env(),
		LogPath:      c.logPath,
		Admin:        c.AdminAddr,
		HTTP:         c.HTTPAddr,
		StartTimeout: startTimeout,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, c.logTail())
	}
	c.mu.Lock()
	c.proc = p
	c.mu.Unlock()
}

// process returns the current run, failing t if there is none.
func (c *caddyInstance) process(t *testing.T) *caddyproc.Process {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil {
		t.Fatal("caddy is not running")
	}
	return c.proc
}

// running reports whether the current process has not exited.
func (c *caddyInstance) running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proc != nil && c.proc.Running()
}

// signal sends sig to the running process.
func (c *caddyInstance) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := c.process(t).Signal(sig); err != nil {
		t.Fatalf("signal caddy: %v", err)
	}
}

// wait waits for the running process to exit and returns its error.
func (c *caddyInstance) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	err := c.process(t).Wait(timeout)
	if errors.Is(err, caddyproc.ErrRunning) {
		t.Fatalf("%v\n%s", err, c.logTail())
	}
	return err
}

// stop sends SIGTERM (Caddy's graceful stop: apps are stopped, the pool gets
// its grace period) and waits for a clean exit.
func (c *caddyInstance) stop(t *testing.T) {
	t.Helper()
	if err := c.process(t).Stop(stopTimeout); err != nil {
		t.Fatalf("caddy exited with %v\n%s", err, c.logTail())
	}
}

// kill ends a process that is still running at the end of the test: first
// gracefully, so the log is complete for the audit, then with SIGKILL.
func (c *caddyInstance) kill() {
	c.mu.Lock()
	p := c.proc
	c.mu.Unlock()
	if p != nil {
		_ = p.Stop(stopTimeout)
	}
}

// rss returns the resident set size of the running Caddy, in bytes.
func (c *caddyInstance) rss(t *testing.T) int64 {
	t.Helper()
	rss, _, err := c.process(t).Memory()
	if err != nil {
		t.Skipf("no /proc to read Caddy's memory from: %v", err)
	}
	return rss
}

// caddyCmd runs the dev binary with args (a CLI subcommand) in the
// instance's environment and returns its combined output.
func (c *caddyInstance) caddyCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, caddyBinary(t), args...)
	cmd.Dir = c.dir
	cmd.Env = c.env()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// reload applies cfg to the running instance with `caddy reload`.
func (c *caddyInstance) reload(t *testing.T, cfg caddyConfig) {
	t.Helper()
	path := c.writeConfig(t, cfg)
	out, err := c.caddyCmd(t, "reload", "--config", path, "--address", c.AdminAddr)
	if err != nil {
		t.Fatalf("caddy reload: %v\n%s\n%s", err, out, c.logTail())
	}
}

// logTail returns the end of the instance's log, for failure messages.
func (c *caddyInstance) logTail() string {
	b, err := os.ReadFile(c.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	const max = 6000
	if len(b) > max {
		b = b[len(b)-max:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return "--- caddy log (tail) ---\n" + string(b)
}

// adminDo sends a request to the admin API and returns the status and body.
func (c *caddyInstance) adminDo(t *testing.T, method, path string, body io.Reader) (int, []byte) {
	t.Helper()
	status, b, err := caddyproc.Admin(c.AdminAddr).Do(context.Background(), method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	return status, b
}

// accessEntry is one line of the site's access log, with the fields the
// receiver adds.
type accessEntry struct {
	URI        string
	Proto      string
	Status     int
	Outcome    string
	DeliveryID string
	Source     string
}

// accessLog returns the access log entries for uri, oldest first.
func (c *caddyInstance) accessLog(t *testing.T, uri string) []accessEntry {
	t.Helper()
	b, err := os.ReadFile(c.logPath)
	if err != nil {
		t.Fatalf("read log: %v", err)
	}
	var out []accessEntry
	for _, line := range bytes.Split(b, []byte("\n")) {
		var e struct {
			Logger  string `json:"logger"`
			Status  int    `json:"status"`
			Request struct {
				URI   string `json:"uri"`
				Proto string `json:"proto"`
			} `json:"request"`
			Webhook struct {
				Outcome    string `json:"outcome"`
				DeliveryID string `json:"delivery_id"`
				Source     string `json:"source"`
			} `json:"webhook"`
		}
		if json.Unmarshal(line, &e) != nil || !strings.HasPrefix(e.Logger, "http.log.access") || e.Request.URI != uri {
			continue
		}
		out = append(out, accessEntry{URI: e.Request.URI, Proto: e.Request.Proto, Status: e.Status, Outcome: e.Webhook.Outcome,
			DeliveryID: e.Webhook.DeliveryID, Source: e.Webhook.Source})
	}
	return out
}

// waitAccessLog polls the log until it has at least n access entries for
// uri: Caddy writes an entry after the response has gone out.
func (c *caddyInstance) waitAccessLog(t *testing.T, uri string, n int) []accessEntry {
	t.Helper()
	var es []accessEntry
	testutil.Eventually(t, func() bool {
		es = c.accessLog(t, uri)
		return len(es) >= n
	}, func() string {
		return fmt.Sprintf("%d access log entries for %s, have %d\n%s", n, uri, len(es), c.logTail())
	})
	return es
}
