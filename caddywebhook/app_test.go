package caddywebhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/signature"
)

// The tests of this file and receiver_test.go run Caddy in this process
// (caddy.Load, the admin endpoint off) on a real listener with a real
// SQLite file in t.TempDir(), and read every log line Caddy writes from a
// file. The out-of-process suites with the built binary are in
// ./integration.

// Canaries: none of these may ever appear in a log line.
const (
	testSecret     = "canary-secret-9f8e7d6c5b4a"
	testBodyMarker = "canary-body-1a2b3c4d5e6f"
	testSecretEnv  = "CADDYWEBHOOK_TEST_SECRET"
)

// harness is one in-process Caddy with the webhook app.
type harness struct {
	dir     string
	dbPath  string
	logPath string
	addr    string // host:port of the HTTP listener
	stopped bool
	// apps are more apps for the config beside webhook and http, such as
	// events; before are handlers put ahead of each receiver, such as
	// tracing.
	apps   map[string]any
	before []any
}

// newHarness prepares directories, the secret in the environment and a
// free port; it starts nothing. Caddy is stopped at the end of the test.
func newHarness(t *testing.T) *harness {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "data"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	t.Setenv(testSecretEnv, testSecret)
	addr := testutil.FreeAddr(t)
	h := &harness{
		dir:     dir,
		dbPath:  filepath.Join(dir, "queue.db"),
		logPath: filepath.Join(dir, "caddy.log"),
		addr:    addr,
	}
	t.Cleanup(func() { h.stop(t) })
	return h
}

// echoPlaceholders copies the receiver's placeholders into response
// headers; deferred, so they are read when the receiver writes its status.
var echoPlaceholders = map[string]any{
	"handler": "headers",
	"response": map[string]any{
		"deferred": true,
		"set": map[string]any{
			"Echo-Outcome":     []string{"{webhook.outcome}"},
			"Echo-Source":      []string{"{webhook.source}"},
			"Echo-Delivery-Id": []string{"{webhook.delivery_id}"},
			"Echo-Event-Type":  []string{"{webhook.event_type}"},
		},
	},
}

// receiverConfig is one receiver at /hooks/<source>.
type receiverConfig map[string]any

// githubReceiver returns a github receiver for source with the given
// targets; the secret comes from the environment through a placeholder.
func githubReceiver(source string, targets ...map[string]any) receiverConfig {
	rc := receiverConfig{
		"handler": "webhook_receiver",
		"source":  source,
		"scheme":  "github",
		"secrets": []string{"{env." + testSecretEnv + "}"},
	}
	if len(targets) > 0 {
		rc["targets"] = targets
	}
	return rc
}

// httpTarget is a target delivering to url.
func httpTarget(name, url string, events ...string) map[string]any {
	t := map[string]any{"deliver": map[string]any{"kind": "http", "url": url, "timeout": "5s"}}
	if name != "" {
		t["name"] = name
	}
	if len(events) > 0 {
		t["events"] = events
	}
	return t
}

// load runs (or reloads to) a config with the webhook app settings app and
// the receivers.
func (h *harness) load(t *testing.T, app map[string]any, receivers ...receiverConfig) {
	t.Helper()
	if app == nil {
		app = map[string]any{}
	}
	if _, ok := app["storage"]; !ok {
		app["storage"] = map[string]any{"path": h.dbPath}
	}
	var routes []any
	for _, rc := range receivers {
		routes = append(routes, map[string]any{
			"match":  []any{map[string]any{"path": []string{"/hooks/" + rc["source"].(string)}}},
			"handle": append(append([]any{}, h.before...), echoPlaceholders, rc),
		})
	}
	cfg := map[string]any{
		"admin": map[string]any{"disabled": true, "config": map[string]any{"persist": false}},
		"logging": map[string]any{"logs": map[string]any{"default": map[string]any{
			"level":  "DEBUG",
			"writer": map[string]any{"output": "file", "filename": h.logPath},
			// Caddy's access log copies every request header before any
			// handler runs; the signature header must be filtered out by
			// config, as docs/OPERATIONS.md recommends.
			"encoder": map[string]any{
				"format": "filter",
				"wrap":   map[string]any{"format": "json"},
				"fields": map[string]any{
					"request>headers>X-Hub-Signature-256": map[string]any{"filter": "delete"},
					"request>headers>Webhook-Signature":   map[string]any{"filter": "delete"},
					// Handshakes: Asana's secret both ways, Meta's token in the query.
					"request>headers>X-Hook-Secret": map[string]any{"filter": "delete"},
					"resp_headers>X-Hook-Secret":    map[string]any{"filter": "delete"},
					"request>uri": map[string]any{"filter": "query", "actions": []map[string]any{
						{"type": "delete", "parameter": "hub.verify_token"},
					}},
				},
			},
		}}},
		"apps": map[string]any{
			"webhook": app,
			"http": map[string]any{"servers": map[string]any{"hooks": map[string]any{
				"listen":          []string{h.addr},
				"automatic_https": map[string]any{"disable": true},
				"logs":            map[string]any{},
				"routes":          routes,
			}}},
		},
	}
	for name, app := range h.apps {
		cfg["apps"].(map[string]any)[name] = app
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := caddy.Load(raw, true); err != nil {
		t.Fatalf("load config: %v", err)
	}
	h.stopped = false
}

// loadErr is load for a config that must fail; it returns the error.
func (h *harness) loadErr(t *testing.T, app map[string]any, receivers ...receiverConfig) error {
	t.Helper()
	if _, ok := app["storage"]; !ok {
		app["storage"] = map[string]any{"path": h.dbPath}
	}
	var routes []any
	for _, rc := range receivers {
		routes = append(routes, map[string]any{"handle": []any{rc}})
	}
	raw, err := json.Marshal(map[string]any{
		"admin": map[string]any{"disabled": true, "config": map[string]any{"persist": false}},
		"logging": map[string]any{"logs": map[string]any{"default": map[string]any{
			"writer": map[string]any{"output": "file", "filename": h.logPath},
		}}},
		"apps": map[string]any{
			"webhook": app,
			"http": map[string]any{"servers": map[string]any{"hooks": map[string]any{
				"listen": []string{h.addr}, "automatic_https": map[string]any{"disable": true}, "routes": routes,
			}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = caddy.Load(raw, true)
	if err == nil {
		t.Fatal("config loaded; want an error")
	}
	return err
}

// stop stops Caddy: in-flight requests finish and their access log lines
// are written before it returns.
func (h *harness) stop(t *testing.T) {
	t.Helper()
	if h.stopped {
		return
	}
	h.stopped = true
	if err := caddy.Stop(); err != nil {
		t.Errorf("stop caddy: %v", err)
	}
}

// logs stops Caddy and returns every line it logged.
func (h *harness) logs(t *testing.T) []map[string]any {
	t.Helper()
	h.stop(t)
	raw, err := os.ReadFile(h.logPath)
	if err != nil {
		t.Fatal(err)
	}
	var lines []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("log line is not JSON: %v: %s", err, line)
		}
		lines = append(lines, m)
	}
	return lines
}

// rawLogs returns the log file's bytes (call after logs or stop).
func (h *harness) rawLogs(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile(h.logPath)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// store is the store of the running webhook app.
func (h *harness) store(t *testing.T) queue.Store {
	t.Helper()
	q := current.Load()
	if q == nil {
		t.Fatal("no webhook app is running")
	}
	// The app hands out the shared store, which wakes pull consumers on
	// its writes; the backend's store is inside.
	if s, ok := q.Store.(*sharedStore); ok {
		return s.Store
	}
	return q.Store
}

// signed returns a GitHub-signed request body and headers.
func signed(t *testing.T, secret, deliveryID, event string, body []byte) http.Header {
	t.Helper()
	hdr, err := signature.Sign("github", secret, body, signature.SignOptions{ID: deliveryID, EventType: event})
	if err != nil {
		t.Fatal(err)
	}
	hdr.Set("Content-Type", "application/json")
	return hdr
}

// testBody returns a small JSON payload carrying the body canary.
func testBody(n int) []byte {
	return fmt.Appendf(nil, `{"n":%d,"marker":%q}`, n, testBodyMarker)
}

// response is what a request got back.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends one request and returns the response.
func (h *harness) do(t *testing.T, method, path string, hdr http.Header, body io.Reader) response {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+h.addr+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	// A kept-alive connection may belong to the server of the config
	// before a reload, which closes it.
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil && body == nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if err != nil {
		// A connection the old server accepted while a reload shut it down
		// ends without an answer. Senders retry that, and the receiver's
		// dedupe makes it safe, so the harness retries once as they do.
		seeker, ok := body.(io.Seeker)
		if !ok {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		if _, serr := seeker.Seek(0, io.SeekStart); serr != nil {
			t.Fatal(serr)
		}
		req2, rerr := http.NewRequest(method, "http://"+h.addr+path, body)
		if rerr != nil {
			t.Fatal(rerr)
		}
		req2.Header, req2.Close = req.Header, true
		if resp, err = http.DefaultClient.Do(req2); err != nil {
			t.Fatalf("%s %s (retried once): %v", method, path, err)
		}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// post sends a github-signed event to source's receiver.
func (h *harness) post(t *testing.T, source, deliveryID, event string, body []byte) int {
	t.Helper()
	return h.do(t, http.MethodPost, "/hooks/"+source, signed(t, testSecret, deliveryID, event, body), bytes.NewReader(body)).status
}

// jobs lists every job of the store, newest first.
func jobs(t *testing.T, s queue.Store) []queue.JobSummary {
	t.Helper()
	page, err := s.ListJobs(context.Background(), queue.ListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return page.Jobs
}

// upstream is a real HTTP server standing in for a target. Each request is
// reported on got; its handler may hold it until release is closed.
type upstream struct {
	url     string
	got     chan upstreamRequest
	mu      sync.Mutex
	holdFor map[string]chan struct{} // delivery id -> release
}

type upstreamRequest struct {
	deliveryID string
	attempt    string
	body       []byte
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{got: make(chan upstreamRequest, 64), holdFor: map[string]chan struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		id := r.Header.Get("X-Webhook-Delivery-Id")
		u.mu.Lock()
		hold := u.holdFor[id]
		delete(u.holdFor, id)
		u.mu.Unlock()
		if hold != nil {
			u.got <- upstreamRequest{deliveryID: id, attempt: "held"}
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
		u.got <- upstreamRequest{deliveryID: id, attempt: r.Header.Get("X-Webhook-Attempt"), body: b}
		w.WriteHeader(http.StatusNoContent)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	u.url = "http://" + ln.Addr().String() + "/sink"
	return u
}

// hold makes the first request for deliveryID block until the returned
// channel is closed (then it is answered 204) or the client gives up.
func (u *upstream) hold(deliveryID string) chan struct{} {
	ch := make(chan struct{})
	u.mu.Lock()
	u.holdFor[deliveryID] = ch
	u.mu.Unlock()
	return ch
}

// next waits for the upstream's next request.
func (u *upstream) next(t *testing.T) upstreamRequest {
	t.Helper()
	return testutil.Receive(t, u.got)
}

// waitStatus polls the store until job id has status want. The store is
// written by the pool's goroutines, which the test cannot join.
func waitStatus(t *testing.T, s queue.Store, id int64, want queue.Status) queue.JobDetail {
	t.Helper()
	var j queue.JobDetail
	testutil.Eventually(t, func() bool {
		var err error
		if j, err = s.GetJob(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		return j.Status == want
	}, func() string { return fmt.Sprintf("job %d is %s, want %s", id, j.Status, want) })
	return j
}

func TestAppDeliversThroughHTTPTarget(t *testing.T) {
	h := newHarness(t)
	up := newUpstream(t)
	h.load(t, map[string]any{"workers": 2}, githubReceiver("gh", httpTarget("", up.url)))

	body := testBody(1)
	if got := h.post(t, "gh", "d-1", "push", body); got != http.StatusAccepted {
		t.Fatalf("status %d, want 202", got)
	}
	r := up.next(t)
	if r.deliveryID != "d-1" || r.attempt != "1" || !bytes.Equal(r.body, body) {
		t.Fatalf("upstream got id %q attempt %q body %q", r.deliveryID, r.attempt, r.body)
	}
	s := h.store(t)
	js := jobs(t, s)
	if len(js) != 1 || js[0].Target != "http" {
		t.Fatalf("jobs = %+v, want one job for the default target name http", js)
	}
	waitStatus(t, s, js[0].ID, queue.StatusDone)

	// The observer logs after the finish commits, so the line may follow
	// the done status by a moment.
	testutil.Eventually(t, func() bool {
		return hasLog(h.logs(t), func(m map[string]any) bool {
			return m["msg"] == "delivered" && m["source"] == "gh" && m["target"] == "http" && m["delivery_id"] == "d-1"
		})
	}, func() string { return "no delivered log line for d-1" })
	assertNoCanaries(t, h.rawLogs(t))
}

func TestAppWorkersZeroReceivesOnly(t *testing.T) {
	h := newHarness(t)
	up := newUpstream(t)
	h.load(t, map[string]any{"workers": 0}, githubReceiver("gh", httpTarget("", up.url)))
	for i := range 3 {
		if got := h.post(t, "gh", fmt.Sprint("d-", i), "push", testBody(i)); got != http.StatusAccepted {
			t.Fatalf("status %d, want 202", got)
		}
	}
	st, err := h.store(t).Stats(context.Background(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if n := countJobs(st, "gh", "http", queue.StatusPending); n != 3 {
		t.Fatalf("pending jobs = %d, want 3; stats %+v", n, st)
	}
	// Stopping Caddy joins every goroutine of the app: had a pool run, the
	// upstream would have seen a request by now.
	h.stop(t)
	select {
	case r := <-up.got:
		t.Fatalf("upstream got %q with workers 0", r.deliveryID)
	default:
	}
	lines := h.logs(t)
	if !hasLog(lines, func(m map[string]any) bool {
		return strings.Contains(fmt.Sprint(m["msg"]), "receiving and storing only")
	}) {
		t.Error("the start log does not say the queue receives only")
	}
}

// TestAppReloadDrainsAndKeepsOrphans reloads with one database:
// (1) a reload does not wait for a delivery running in the old pool, even
// with a long shutdown_grace; the delivery finishes in the background with
// its lease kept, is recorded once as attempt 1, and the new pool never
// starts it again;
// (2) a job whose target the new config no longer has is never claimed and
// stays visible in the stats.
func TestAppReloadDrainsAndKeepsOrphans(t *testing.T) {
	h := newHarness(t)
	up := newUpstream(t)
	app := func() map[string]any {
		return map[string]any{"workers": 2, "shutdown_grace": "30s", "lease": "1s"}
	}
	h.load(t, app(), githubReceiver("gh", httpTarget("old", up.url)))

	release := up.hold("slow")
	if got := h.post(t, "gh", "slow", "push", testBody(1)); got != http.StatusAccepted {
		t.Fatalf("status %d, want 202", got)
	}
	if r := up.next(t); r.deliveryID != "slow" || r.attempt != "held" {
		t.Fatalf("upstream got %+v, want the held request", r)
	}

	// Reload to a config that keeps the route: it returns without waiting
	// for the running delivery.
	began := time.Now()
	h.load(t, app(), githubReceiver("gh", httpTarget("old", up.url)))
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("reload took %s, want it not to wait for the running delivery (shutdown_grace 30s)", took)
	}
	s := h.store(t)
	slow := jobs(t, s)[0]
	// The new pool delivers new work...
	if got := h.post(t, "gh", "after", "push", testBody(2)); got != http.StatusAccepted {
		t.Fatalf("status %d, want 202", got)
	}
	if r := up.next(t); r.deliveryID != "after" {
		t.Fatalf("upstream got %q after the reload, want after: slow must not be started again", r.deliveryID)
	}
	// ...while the old pool keeps the slow job's lease, leases after leases.
	first := waitStatus(t, s, slow.ID, queue.StatusRunning).LeaseUntil
	testutil.Eventually(t, func() bool {
		j, err := s.GetJob(context.Background(), slow.ID)
		return err == nil && j.LeaseUntil.After(first.Add(2*time.Second))
	}, func() string { return "the draining pool does not extend the running job's lease" })
	close(release)
	j := waitStatus(t, s, slow.ID, queue.StatusDone)
	if j.Attempts != 1 || len(j.History) != 1 {
		t.Errorf("slow job: %d attempts, history %+v; want done once, by attempt 1", j.Attempts, j.History)
	}

	// A config without workers leaves a job for target "old" pending...
	h.load(t, map[string]any{"workers": 0}, githubReceiver("gh", httpTarget("old", up.url)))
	if got := h.post(t, "gh", "orphan", "push", testBody(2)); got != http.StatusAccepted {
		t.Fatalf("status %d, want 202", got)
	}
	// ...and the next config routes gh only to "new".
	h.load(t, app(), githubReceiver("gh", httpTarget("new", up.url)))
	if got := h.post(t, "gh", "fresh", "push", testBody(3)); got != http.StatusAccepted {
		t.Fatalf("status %d, want 202", got)
	}
	if r := up.next(t); r.deliveryID != "fresh" {
		t.Fatalf("upstream got %q, want fresh: the orphan must not be delivered", r.deliveryID)
	}
	s = h.store(t)
	st, err := s.Stats(context.Background(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if n := countJobs(st, "gh", "old", queue.StatusPending); n != 1 {
		t.Errorf("pending jobs for gh/old = %d, want the orphan visible in stats; %+v", n, st.Counts)
	}
	for _, j := range jobs(t, s) {
		if j.DeliveryID == "orphan" && j.Attempts != 0 {
			t.Errorf("orphan has %d attempts, want 0: it must never be claimed", j.Attempts)
		}
	}

	lines := h.logs(t)
	if hasLog(lines, func(m map[string]any) bool { return m["msg"] == "handed_back" }) {
		t.Error("a reload handed a delivery back")
	}
	if !hasLog(lines, func(m map[string]any) bool { return m["msg"] == "webhook pool drained" }) {
		t.Error("no log line says the old pool drained")
	}
	for len(up.got) > 0 {
		if r := <-up.got; r.deliveryID == "slow" {
			t.Errorf("slow was delivered again: %+v", r)
		}
	}
	assertNoCanaries(t, h.rawLogs(t))
}

func TestAppConfigErrors(t *testing.T) {
	// An issued secret file that exists but holds no secret (a crash
	// between its creation and its write, a touch): the endpoint would be
	// neither armed (the file exists) nor able to verify anything.
	emptyIssued := filepath.Join(t.TempDir(), "issued.secret")
	if err := os.WriteFile(emptyIssued, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		app       map[string]any
		receivers []receiverConfig
		want      string
	}{
		{"postgres without dsn", map[string]any{"storage": map[string]any{"backend": "postgres"}}, nil, "webhook: storage: loading module 'postgres': provision webhook.storage.postgres: postgres needs a dsn"},
		{"postgres with synchronous", map[string]any{"storage": map[string]any{"backend": "postgres", "dsn": "postgres://h/db", "synchronous": "full"}}, nil, `webhook.storage.postgres: json: unknown field "synchronous"`},
		{"sqlite with a dsn", map[string]any{"storage": map[string]any{"backend": "sqlite", "dsn": "postgres://h/db"}}, nil, `webhook.storage.sqlite: json: unknown field "dsn"`},
		{"sqlite with a negative max_batch", map[string]any{"storage": map[string]any{"max_batch": -1}}, nil, "webhook.storage.sqlite: invalid configuration: max_batch is -1, must not be negative"},
		{"postgres with a negative max_batch", map[string]any{"storage": map[string]any{"backend": "postgres", "dsn": "postgres://h/db", "max_batch": -1}}, nil, "webhook.storage.postgres: invalid configuration: max_batch is -1, must not be negative"},
		// The list goes on with this test binary's test_gated (disklow_test.go).
		{"unknown backend", map[string]any{"storage": map[string]any{"backend": "redis"}}, nil, `unknown backend "redis" (want sqlite or postgres or `},
		{"negative workers", map[string]any{"workers": -1}, nil, "workers is -1"},
		{"lease too short", map[string]any{"lease": "10ms"}, nil, "lease 10ms is shorter than 1s"},
		{"same source twice", map[string]any{}, []receiverConfig{githubReceiver("dup"), githubReceiver("dup")}, `source "dup" is configured twice`},
		{"no secret", map[string]any{}, []receiverConfig{{"handler": "webhook_receiver", "source": "s", "scheme": "github"}}, "at least one secret is required"},
		{"empty secret placeholder", map[string]any{}, []receiverConfig{{"handler": "webhook_receiver", "source": "s", "scheme": "github", "secrets": []string{"{env.CADDYWEBHOOK_UNSET_VARIABLE}"}}}, "secret #1: placeholder {env.CADDYWEBHOOK_UNSET_VARIABLE} is empty or unset"},
		{"second secret's placeholder named", map[string]any{}, []receiverConfig{{"handler": "webhook_receiver", "source": "s", "scheme": "github", "secrets": []string{"{env." + testSecretEnv + "}", "pre-{env.CADDYWEBHOOK_UNSET_VARIABLE}"}}}, "secret #2: placeholder {env.CADDYWEBHOOK_UNSET_VARIABLE} is empty or unset"},
		{"missing secret file named", map[string]any{}, []receiverConfig{{"handler": "webhook_receiver", "source": "s", "scheme": "github", "secrets": []string{"{file./nonexistent/caddywebhook-secret}"}}}, "secret #1: placeholder {file./nonexistent/caddywebhook-secret} is empty or unset"},
		{"literal braces not quoted", map[string]any{}, []receiverConfig{{"handler": "webhook_receiver", "source": "s", "scheme": "github", "secrets": []string{"{" + testSecret + "}"}}}, "secret #1: a placeholder in it is unknown"},
		{"exec program missing, absolute", map[string]any{}, []receiverConfig{githubReceiver("s", map[string]any{"name": "deploy", "deliver": map[string]any{"kind": "exec", "command": "/nonexistent/caddywebhook-deploy"}})}, `target "deploy": `},
		{"exec program missing, absolute, names the path", map[string]any{}, []receiverConfig{githubReceiver("s", map[string]any{"name": "deploy", "deliver": map[string]any{"kind": "exec", "command": "/nonexistent/caddywebhook-deploy"}})}, `command: program "/nonexistent/caddywebhook-deploy" does not exist`},
		{"exec program missing, relative", map[string]any{}, []receiverConfig{githubReceiver("s", map[string]any{"name": "deploy", "deliver": map[string]any{"kind": "exec", "command": "./no-such-deploy.sh"}})}, `command: program "./no-such-deploy.sh" does not exist`},
		{"unknown scheme", map[string]any{}, []receiverConfig{{"handler": "webhook_receiver", "source": "s", "scheme": "carrier", "secrets": []string{"x"}}}, `Scheme "carrier" unknown`},
		{"bad source name", map[string]any{}, []receiverConfig{{"handler": "webhook_receiver", "source": "a b", "scheme": "github", "secrets": []string{"x"}}}, `source "a b"`},
		{"empty issued secret file", map[string]any{}, []receiverConfig{{"handler": "webhook_receiver", "source": "s", "scheme": "asana", "issued_secret_file": emptyIssued}}, `webhook_receiver "s": issued_secret_file: ` + emptyIssued + ` exists but is empty`},
		{"reserved source", map[string]any{}, []receiverConfig{githubReceiver("_notify")}, `source "_notify": names beginning with '_' are reserved`},
		{"notify without deliver", map[string]any{"notify": map[string]any{"window": "1m"}}, nil, "webhook: notify: deliver is required"},
		{"notify negative pending_age", map[string]any{"notify": map[string]any{"pending_age": -1, "deliver": map[string]any{"kind": "http", "url": "http://127.0.0.1:9/"}}}, nil, "webhook: notify: pending_age must not be negative"},
		{"notify bad url", map[string]any{"notify": map[string]any{"deliver": map[string]any{"kind": "http", "url": "ftp://h/"}}}, nil, "webhook: notify: "},
		{"negative target max_attempts", map[string]any{}, []receiverConfig{githubReceiver("s", map[string]any{"name": "t", "max_attempts": -1, "deliver": map[string]any{"kind": "http", "url": "http://127.0.0.1:9/"}})}, `target "t": max_attempts must not be negative`},
		{"negative target backoff", map[string]any{}, []receiverConfig{githubReceiver("s", map[string]any{"name": "t", "backoff": map[string]any{"base": -1}, "deliver": map[string]any{"kind": "http", "url": "http://127.0.0.1:9/"}})}, `target "t": backoff durations must not be negative`},
		{"pull target with a rate", map[string]any{}, []receiverConfig{githubReceiver("s", map[string]any{"name": "laptop", "rate": "5/s", "deliver": map[string]any{"kind": "pull"}})}, `target "laptop": rate does not apply to a pull target: its consumers decide how fast they take jobs, and the app delivers nothing a breaker could count (docs/CONSUMER.md); remove it`},
		{"pull target with a concurrency and a breaker", map[string]any{}, []receiverConfig{githubReceiver("s", map[string]any{"name": "laptop", "concurrency": 2, "circuit_breaker": map[string]any{"failures": 3}, "deliver": map[string]any{"kind": "pull"}})}, `target "laptop": concurrency and circuit_breaker do not apply to a pull target`},
		{"pull target with all three", map[string]any{}, []receiverConfig{githubReceiver("s", map[string]any{"name": "laptop", "rate": "5/s", "concurrency": 2, "circuit_breaker": map[string]any{"failures": 3}, "deliver": map[string]any{"kind": "pull"}})}, `target "laptop": rate, concurrency and circuit_breaker do not apply to a pull target`},
		{"two unnamed targets clash with a named one", map[string]any{}, []receiverConfig{githubReceiver("s", httpTarget("http-2", "http://127.0.0.1:9/"), httpTarget("", "http://127.0.0.1:9/"), httpTarget("", "http://127.0.0.1:9/"))}, `name "http-2" is used twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			err := h.loadErr(t, tt.app, tt.receivers...)
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), testSecret) {
				t.Errorf("error %q contains the secret", err)
			}
		})
	}
}

func TestAppCleanupAfterFailedProvisionReleasesStore(t *testing.T) {
	h := newHarness(t)
	// The receiver fails after the app opened the store; Caddy cleans the
	// app up, which must release (and so close) the store.
	h.loadErr(t, map[string]any{}, githubReceiver("dup"), githubReceiver("dup"))
	abs, err := filepath.Abs(h.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, loaded := stores.References("sqlite:" + abs); loaded {
		t.Fatal("the store is still in the usage pool after a failed load")
	}
}

// countJobs sums the jobs of one (source, target, status) in st.
func countJobs(st queue.Stats, source, target string, status queue.Status) int64 {
	var n int64
	for _, c := range st.Counts {
		if c.Source == source && c.Target == target && c.Status == status {
			n += c.Jobs
		}
	}
	return n
}

// hasLog reports whether a log line satisfies match.
func hasLog(lines []map[string]any, match func(map[string]any) bool) bool {
	for _, m := range lines {
		if match(m) {
			return true
		}
	}
	return false
}

// assertNoCanaries fails if the secret or the body marker appears in logs.
func assertNoCanaries(t *testing.T, logs []byte) {
	t.Helper()
	for _, c := range []string{testSecret, testBodyMarker} {
		if bytes.Contains(logs, []byte(c)) {
			t.Errorf("logs contain %q", c)
		}
	}
}

// TestAppRetryPolicyPerTarget: a target with max_attempts 2 goes dead after
// two attempts, while another target of the same event keeps the app's
// budget of 4.
func TestAppRetryPolicyPerTarget(t *testing.T) {
	h := newHarness(t)
	var calls sync.Map // target path -> *atomic.Int32
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := calls.LoadOrStore(r.URL.Path, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	t.Cleanup(failing.Close)
	tight := httpTarget("tight", failing.URL+"/tight")
	tight["max_attempts"] = 2
	tight["backoff"] = map[string]any{"base": "10ms"} // max: the app's
	h.load(t, map[string]any{
		"workers":      2,
		"max_attempts": 4,
		"backoff":      map[string]any{"base": "20ms", "max": "20ms"},
	}, githubReceiver("gh", tight, httpTarget("loose", failing.URL+"/loose")))

	if got := h.post(t, "gh", "d-1", "push", testBody(1)); got != http.StatusAccepted {
		t.Fatalf("status %d, want 202", got)
	}
	s := h.store(t)
	for _, j := range jobs(t, s) {
		want := map[string]int{"tight": 2, "loose": 4}[j.Target]
		got := waitStatus(t, s, j.ID, queue.StatusDead)
		if got.Attempts != want {
			t.Errorf("target %s: dead after %d attempts, want %d", j.Target, got.Attempts, want)
		}
		n, _ := calls.Load("/" + j.Target)
		if n == nil || int(n.(*atomic.Int32).Load()) != want {
			t.Errorf("target %s: upstream saw %v requests, want %d", j.Target, n, want)
		}
	}
}
