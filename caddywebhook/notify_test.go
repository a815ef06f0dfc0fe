package caddywebhook

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/notify"
	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/sqlite"
	"github.com/caddywebhook/caddywebhook/signature"
)

// TestNotifierDeliversSigned: a stored notice, claimed and delivered by an
// http target with sign, reaches a real server with the notice as its body
// and Standard Webhooks headers that verify.
func TestNotifierDeliversSigned(t *testing.T) {
	s, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "queue.db"), Synchronous: "normal"})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	n := notify.New(notify.Config{Store: s})
	key := make([]byte, 32)
	rand.Read(key)
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	t.Setenv("CADDYWEBHOOK_TEST_NOTIFY_SECRET", secret)
	type request struct {
		header http.Header
		body   []byte
	}
	seen := make(chan request, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read request body: %v", err)
		}
		seen <- request{header: r.Header.Clone(), body: body}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	tgt := loadTestTarget(t, "http", map[string]any{"url": srv.URL + "/hook", "sign_secret": "{env.CADDYWEBHOOK_TEST_NOTIFY_SECRET}"})

	n.JobDead(&queue.Job{ID: 7, Source: "gh", Target: "http", DeliveryID: "d", Attempt: 12}, queue.Completion{Error: "upstream answered 500"})
	if sent, err := n.Flush(t.Context(), time.Now(), true); err != nil || sent != 1 {
		t.Fatalf("flush: %d notices stored, %v; want 1", sent, err)
	}
	jobs, err := s.Claim(t.Context(), queue.ClaimParams{
		Owner: "w", Limit: 10, Lease: time.Minute,
		Routes: []queue.Route{{Source: notify.Source, Target: notify.Target}},
	})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim the notice: %d jobs, %v", len(jobs), err)
	}
	if err := tgt.Deliver(t.Context(), jobs[0]); err != nil {
		t.Fatalf("deliver the notice: %v", err)
	}
	req := <-seen
	var nt notify.Notice
	if err := json.Unmarshal(req.body, &nt); err != nil {
		t.Fatalf("body %q: %v", req.body, err)
	}
	if nt.Type != notify.TypeJobDead || nt.Count != 1 || !slices.Equal(nt.JobIDs, []int64{7}) {
		t.Errorf("notice %+v", nt)
	}
	if ct := req.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if src := req.header.Get(HeaderSource); src != notify.Source {
		t.Errorf("%s %q, want %s", HeaderSource, src, notify.Source)
	}
	verifier, err := signature.New(signature.Config{Scheme: signature.SchemeStandard, Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := verifier.Verify(signature.Request{Method: "POST", Header: req.header, Body: req.body}); err != nil {
		t.Errorf("notice signature does not verify: %v", err)
	}
}

// TestStopDrainsStoresTheirNotices: when Caddy exits while a pool of a
// replaced config is still draining, stopDrains (the exit's stop of those
// pools) returns only once the drained pool's notifier has stored the
// notices of its last deliveries, as a reload or an exit of the running
// config does: the process ends right after it.
func TestStopDrainsStoresTheirNotices(t *testing.T) {
	h := newHarness(t)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
		w.WriteHeader(http.StatusInternalServerError)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	app := func() map[string]any {
		return map[string]any{
			"workers": 1, "max_attempts": 1, "shutdown_grace": "30s",
			// A window longer than the test: only a notifier's Stop
			// stores the notice.
			"notify": map[string]any{"window": "1h", "deliver": map[string]any{"kind": "http", "url": "http://127.0.0.1:9/"}},
		}
	}
	receiver := githubReceiver("gh", httpTarget("sink", "http://"+ln.Addr().String()+"/"))
	h.load(t, app(), receiver)
	if got := h.post(t, "gh", "d-1", "push", testBody(1)); got != http.StatusAccepted {
		t.Fatalf("status %d, want 202", got)
	}
	testutil.Receive(t, started)
	// The reload leaves the delivery running in the old pool, which drains.
	h.load(t, app(), receiver)
	s := h.store(t)

	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		stopDrains(context.Background())
	}()
	// The delivery fails within the grace: its job goes dead, a notice
	// for the old config's notifier.
	close(release)
	testutil.Receive(t, stopped)

	page, err := s.ListJobs(t.Context(), queue.ListParams{Filter: queue.Filter{Source: notify.Source}, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Jobs) != 1 || page.Jobs[0].EventType != notify.TypeJobDead {
		t.Fatalf("notice jobs when stopDrains returned: %+v; want one %s", page.Jobs, notify.TypeJobDead)
	}
}

// loadTestTarget loads the target module webhook.targets.<kind> from its
// JSON config, provisioned and validated, as a receiver's `to` would.
func loadTestTarget(t *testing.T, kind string, config map[string]any) Target {
	t.Helper()
	raw, err := json.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	mod, err := ctx.LoadModuleByID("webhook.targets."+kind, raw)
	if err != nil {
		t.Fatalf("load the %s target: %v", kind, err)
	}
	return mod.(Target)
}
