package consumer

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/caddywebhook"
	httptarget "github.com/caddywebhook/caddywebhook/caddywebhook/targets/http"
	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/sqlite"
	"github.com/caddywebhook/caddywebhook/signature"
)

func TestParseRoute(t *testing.T) {
	tests := []struct {
		in      string
		want    Route
		wantErr string
	}{
		{in: "http://localhost:3000/hooks", want: Route{URL: "http://localhost:3000/hooks"}},
		{in: "http://localhost:3000/hooks?a=b", want: Route{URL: "http://localhost:3000/hooks?a=b"}},
		{in: "invoice.*=http://localhost:3000/billing", want: Route{Events: []string{"invoice.*"}, URL: "http://localhost:3000/billing"}},
		{in: "invoice.*, customer.created=http://localhost:3000/billing?x=1",
			want: Route{Events: []string{"invoice.*", "customer.created"}, URL: "http://localhost:3000/billing?x=1"}},
		{in: "localhost:3000", wantErr: "give a URL, or event types and a URL"},
		{in: "=http://localhost:3000/", wantErr: "an empty event type"},
		{in: "in*voice=http://localhost:3000/", wantErr: "'*' may only end an event type"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseRoute(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseRoute = %v, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got.URL != tt.want.URL || !slices.Equal(got.Events, tt.want.Events) {
				t.Errorf("ParseRoute = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// recordingApp is a local app that answers 200 and keeps each request's
// delivery id, headers and body.
type recordingApp struct {
	srv  *httptest.Server
	mu   sync.Mutex
	got  map[string]http.Header // per delivery id
	body map[string][]byte
}

func newRecordingApp(t *testing.T) *recordingApp {
	t.Helper()
	a := &recordingApp{got: map[string]http.Header{}, body: map[string][]byte{}}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		id := r.Header.Get(caddywebhook.HeaderDeliveryID)
		a.got[id] = r.Header.Clone()
		a.body[id] = b
		a.mu.Unlock()
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *recordingApp) ids() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var ids []string
	for id := range a.got {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// lockedBuffer is a listener's output, read while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestListenRoutes: each event goes to the first route whose types take
// it, else to the default; with no default, an event no route takes is
// held with a line saying what to do, never reaches an app, and is handed
// back uncharged when the listener stops; a restart with a route for it
// delivers it.
func TestListenRoutes(t *testing.T) {
	h := setup(t, "")
	pushes, releases, rest := newRecordingApp(t), newRecordingApp(t), newRecordingApp(t)
	h.sendTyped(t, "r-push", "push")
	h.sendTyped(t, "r-release", "release")
	h.sendTyped(t, "r-ping", "ping")
	h.sendTyped(t, "r-issues", "issues")

	run := func(t *testing.T, cfg ListenConfig, until func() bool) string {
		t.Helper()
		var out lockedBuffer
		cfg.URL, cfg.Token, cfg.Target, cfg.Wait, cfg.Out, cfg.Log = h.base+"/consume", laptopToken, "laptop", time.Second, &out, &out
		ctx, stop := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- Listen(ctx, cfg) }()
		testutil.Eventually(t, until, func() string { return "the listener's deliveries:\n" + out.String() })
		stop()
		if err := testutil.Receive(t, done); err != nil {
			t.Fatalf("Listen: %v\n%s", err, out.String())
		}
		return out.String()
	}

	// No default: issues is held.
	out := run(t, ListenConfig{Routes: []Route{
		{Events: []string{"push"}, URL: pushes.srv.URL},
		{Events: []string{"rel*", "ping"}, URL: releases.srv.URL},
	}}, func() bool { return h.done(t, "laptop") == 3 })
	if got := pushes.ids(); !slices.Equal(got, []string{"r-push"}) {
		t.Errorf("the push route got %v", got)
	}
	if got := releases.ids(); !slices.Equal(got, []string{"r-ping", "r-release"}) {
		t.Errorf("the release and ping route got %v", got)
	}
	if !strings.Contains(out, "issues  r-issues  held") || !strings.Contains(out, "restart listen with a route or a default") {
		t.Errorf("no held line for r-issues:\n%s", out)
	}
	if !strings.Contains(out, "handed back 1 job uncharged (1 not started)") {
		t.Errorf("the stop does not say it handed back the held job:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "r-push") && !strings.Contains(line, "→ "+pushes.srv.URL) {
			t.Errorf("the delivery line does not say where it went: %q", line)
		}
	}
	pending := h.count(t, "laptop", queue.StatusPending)
	if pending != 1 {
		t.Fatalf("%d laptop jobs pending after the stop, want the held one", pending)
	}
	js := h.jobsOf(t, "laptop", queue.StatusPending)
	if len(js) != 1 || js[0].DeliveryID != "r-issues" || js[0].Attempts != 0 {
		t.Errorf("pending after the stop: %+v, want r-issues with 0 attempts (handed back uncharged)", js)
	}

	// A restart with a default delivers it.
	run(t, ListenConfig{ForwardTo: rest.srv.URL, Routes: []Route{{Events: []string{"push"}, URL: pushes.srv.URL}}},
		func() bool { return h.done(t, "laptop") == 4 })
	if got := rest.ids(); !slices.Equal(got, []string{"r-issues"}) {
		t.Errorf("the default got %v, want r-issues", got)
	}
}

// TestListenHoldsWithoutClaimingAgain: a held event is not claimed again
// and again while the listener runs: one claim, one line, one attempt.
func TestListenHoldsWithoutClaimingAgain(t *testing.T) {
	h := setup(t, "")
	app := newRecordingApp(t)
	h.sendTyped(t, "h-issues", "issues")
	var out lockedBuffer
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Listen(ctx, ListenConfig{URL: h.base + "/consume", Token: laptopToken, Target: "laptop", Wait: 200 * time.Millisecond,
			Routes: []Route{{Events: []string{"push"}, URL: app.srv.URL}}, Out: &out, Log: &out})
	}()
	testutil.Eventually(t, func() bool { return strings.Contains(out.String(), "held") }, func() string { return out.String() })
	// Several claims' worth of waits, each of which would take the job
	// again if it had been handed back.
	h.sendTyped(t, "h-push", "push")
	testutil.Eventually(t, func() bool { return h.done(t, "laptop") == 1 }, func() string { return out.String() })
	stop()
	if err := testutil.Receive(t, done); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "h-issues  held"); n != 1 {
		t.Errorf("%d held lines, want 1:\n%s", n, out.String())
	}
	if js := h.jobsOf(t, "laptop", queue.StatusPending); len(js) != 1 || js[0].Attempts != 0 {
		t.Errorf("pending: %+v, want h-issues uncharged", js)
	}
}

// TestListenHoldCap: past maxHeld held events the listener hands the next
// one back and claims nothing more, routed or not, with one line saying
// so; when it stops, every event is in the queue again, uncharged.
func TestListenHoldCap(t *testing.T) {
	defer func(n int) { maxHeld = n }(maxHeld)
	maxHeld = 2
	h := setup(t, "")
	app := newRecordingApp(t)
	for _, id := range []string{"c-issues-1", "c-issues-2", "c-issues-3"} {
		h.sendTyped(t, id, "issues")
	}
	var out lockedBuffer
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Listen(ctx, ListenConfig{URL: h.base + "/consume", Token: laptopToken, Target: "laptop", Wait: 100 * time.Millisecond,
			Routes: []Route{{Events: []string{"push"}, URL: app.srv.URL}}, Out: &out, Log: &out})
	}()
	testutil.Eventually(t, func() bool { return strings.Contains(out.String(), "claiming no more") }, func() string { return out.String() })
	// A routed event now waits in the queue: several claims' worth of
	// waits would have delivered it.
	h.sendTyped(t, "c-push", "push")
	time.Sleep(time.Second)
	if got := app.ids(); len(got) != 0 {
		t.Errorf("the app got %v while the listener held its most, want nothing", got)
	}
	stop()
	if err := testutil.Receive(t, done); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "  held"); n != 2 {
		t.Errorf("%d held lines, want 2:\n%s", n, out.String())
	}
	if n := strings.Count(out.String(), "holding 2 events of laptop"); n != 1 {
		t.Errorf("%d lines saying the hold is full, want 1:\n%s", n, out.String())
	}
	js := h.jobsOf(t, "laptop", queue.StatusPending)
	if len(js) != 4 {
		t.Fatalf("pending after the stop: %+v, want all 4 events", js)
	}
	for _, j := range js {
		if j.Attempts != 0 {
			t.Errorf("job %s: %d attempts, want it handed back uncharged", j.DeliveryID, j.Attempts)
		}
	}
}

// TestListenSeveralTargets: one listener consumes two pull targets, each
// line naming its target, each event delivered once.
func TestListenSeveralTargets(t *testing.T) {
	h := setup(t, "")
	app := newRecordingApp(t)
	for i := range 3 {
		h.send(t, fmt.Sprintf("multi-%d", i))
	}
	var out lockedBuffer
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Listen(ctx, ListenConfig{URL: h.base + "/consume", Token: laptopToken, Targets: []string{"laptop", "shaped"},
			ForwardTo: app.srv.URL, Wait: time.Second, Out: &out, Log: &out})
	}()
	testutil.Eventually(t, func() bool { return h.done(t, "laptop") == 3 && h.done(t, "shaped") == 3 },
		func() string { return out.String() })
	stop()
	if err := testutil.Receive(t, done); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, target := range []string{"laptop", "shaped"} {
		if n := strings.Count(text, "github → "+target+"  push"); n != 3 {
			t.Errorf("%d lines of target %s, want 3:\n%s", n, target, text)
		}
		if !strings.Contains(text, "Ready! Forwarding "+target+" events") {
			t.Errorf("no Ready line for %s:\n%s", target, text)
		}
	}
	app.mu.Lock()
	defer app.mu.Unlock()
	if string(app.body["multi-1"]) == "" {
		t.Errorf("nothing delivered for multi-1")
	}
}

// TestListenSeveralTargetsRefused: a target the token may not consume
// ends the whole listen with the server's refusal.
func TestListenSeveralTargetsRefused(t *testing.T) {
	h := setup(t, "")
	app := newRecordingApp(t)
	err := Listen(t.Context(), ListenConfig{URL: h.base + "/consume", Token: laptopToken, Targets: []string{"laptop", "other"},
		ForwardTo: app.srv.URL, Wait: time.Second})
	if err == nil || !strings.Contains(err.Error(), "other") {
		t.Fatalf("Listen = %v, want the refusal of target other", err)
	}
}

// TestListenResigns: with Resign, the app gets each event signed as
// GitHub signs, with the app's secret, with GitHub's delivery header.
func TestListenResigns(t *testing.T) {
	h := setup(t, "")
	secret, err := signature.NewSecret(signature.SchemeGitHub)
	if err != nil {
		t.Fatal(err)
	}
	app := newRecordingApp(t)
	h.send(t, "resigned-1")
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Listen(ctx, ListenConfig{URL: h.base + "/consume", Token: laptopToken, Target: "laptop", ForwardTo: app.srv.URL,
			Wait: time.Second, Resign: &httptarget.Resign{Scheme: signature.SchemeGitHub, Secret: secret}})
	}()
	testutil.Eventually(t, func() bool { return h.done(t, "laptop") == 1 }, func() string { return "resigned-1 not delivered" })
	stop()
	if err := testutil.Receive(t, done); err != nil {
		t.Fatal(err)
	}
	app.mu.Lock()
	hdr, body := app.got["resigned-1"], app.body["resigned-1"]
	app.mu.Unlock()
	v, _ := signature.New(signature.Config{Scheme: signature.SchemeGitHub, Secrets: []string{secret}})
	res, err := v.Verify(signature.Request{Method: http.MethodPost, Header: hdr, Body: body})
	if err != nil || res.DeliveryID != "resigned-1" || res.EventType != "push" {
		t.Errorf("the app's request: %+v, %v", res, err)
	}

	err = Listen(t.Context(), ListenConfig{URL: h.base + "/consume", Token: laptopToken, Target: "laptop", ForwardTo: app.srv.URL,
		Resign: &httptarget.Resign{Scheme: signature.SchemeDiscord, Secret: "x"}})
	if err == nil || !strings.Contains(err.Error(), "discord") {
		t.Errorf("Listen with resign discord = %v, want a refusal naming it", err)
	}
}

// jobsOf lists target's jobs in status from the database file.
func (h *harness) jobsOf(t *testing.T, target string, status queue.Status) []queue.JobSummary {
	t.Helper()
	s, err := sqlite.Open(t.Context(), sqlite.Config{Path: h.dbPath})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	page, err := s.ListJobs(t.Context(), queue.ListParams{Filter: queue.Filter{Target: target, Status: status}, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return page.Jobs
}
