package caddywebhook

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/caddywebhook/rules"
	"github.com/caddywebhook/caddywebhook/queue"
)

// testSources are the sources of a running config for the admin tests:
// github has the targets http (every event) and exec (push only), with a
// 1 KiB body cap.
func testSources() map[string]sourceConfig {
	return map[string]sourceConfig{"github": {
		targets: []string{"http", "exec"},
		targetsFor: func(ev *rules.Event) []string {
			eventType := ev.EventType
			if eventType == "push" {
				return []string{"http", "exec"}
			}
			return []string{"http"}
		},
		maxBody: 1024,
	}}
}

// publish makes the fixture's running config the process's, as a running
// App's Start does, for the dashboard, which reaches the admin API
// in-process. A test that calls it touches process state: it cannot run in
// parallel.
func (f *adminFixture) publish(t *testing.T) {
	t.Helper()
	cfg := f.cfg.Load()
	current.Store(cfg)
	t.Cleanup(func() { current.CompareAndSwap(cfg, nil) })
}

// configure publishes a copy of the fixture's running config that change
// made, as a new app's Start would: a published config never changes.
func (f *adminFixture) configure(change func(*runningConfig)) {
	c := *f.cfg.Load()
	change(&c)
	f.cfg.Store(&c)
}

// withConfig gives the fixture's running config the test sources, as a
// running App's has its receivers'.
func (f *adminFixture) withConfig(t *testing.T) {
	t.Helper()
	f.cfg.Store(&runningConfig{Store: f.store, Retention: 24 * time.Hour, Routes: adminRoutes, sources: testSources()})
}

// message is the error message of an error response, else the body.
func message(rec *httptest.ResponseRecorder) string {
	var e struct{ Error string }
	if json.Unmarshal(rec.Body.Bytes(), &e) == nil && e.Error != "" {
		return e.Error
	}
	return rec.Body.String()
}

// doBody sends one request with a body through the mux.
func (f *adminFixture) doBody(t *testing.T, method, target, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), method, target, strings.NewReader(body))
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, req)
	return rec
}

// doWant is do that fails the test unless the answer has wantStatus.
func (f *adminFixture) doWant(t *testing.T, method, target string, wantStatus int) *httptest.ResponseRecorder {
	t.Helper()
	rec := f.do(t, method, target)
	if rec.Code != wantStatus {
		t.Fatalf("%s %s: status %d, want %d: %s", method, target, rec.Code, wantStatus, rec.Body)
	}
	return rec
}

func TestAdminEvents(t *testing.T) {
	t.Parallel()
	f := setupAdmin(t)
	d := f.seed(t)
	bare, err := f.store.Enqueue(t.Context(), queue.Event{Source: "github", DeliveryID: "ping-1", EventType: "ping", Payload: []byte(`{"zen":"x"}`)})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		target     string
		wantStatus int
		want       []string // source/delivery_id, newest first
	}{
		{"all", "/webhook/events", 200, []string{"github/ping-1", "slack/d-6", "github/d-5", "stripe/d-4", "stripe/d-3", "github/d-2", "github/d-1"}},
		{"no target", "/webhook/events?has_target=false", 200, []string{"github/ping-1"}},
		{"with target of a source", "/webhook/events?has_target=true&source=stripe", 200, []string{"stripe/d-4", "stripe/d-3"}},
		{"event type", "/webhook/events?event_type=push", 200, []string{"github/d-2", "github/d-1"}},
		{"delivery id", "/webhook/events?source=github&delivery_id=d-2", 200, []string{"github/d-2"}},
		{"since, relative", "/webhook/events?since=1h&source=github&event_type=ping", 200, []string{"github/ping-1"}},
		{"until, relative", "/webhook/events?until=1h", 200, []string{}},
		{"since, RFC 3339", "/webhook/events?since=" + adminT0.Add(time.Minute).Format(time.RFC3339), 200, []string{}},
		{"page", "/webhook/events?limit=2", 200, []string{"github/ping-1", "slack/d-6"}},
		{"delivery id without source", "/webhook/events?delivery_id=d-2", 400, nil},
		{"bad since", "/webhook/events?since=yesterday", 400, nil},
		{"empty range", "/webhook/events?since=1h&until=2h", 400, nil},
		{"bad has_target", "/webhook/events?has_target=yes", 400, nil},
		{"unknown parameter", "/webhook/events?status=dead", 400, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := f.doWant(t, http.MethodGet, tt.target, tt.wantStatus)
			if tt.want == nil {
				return
			}
			page := decode[queue.EventPage](t, rec)
			var got []string
			for _, e := range page.Events {
				got = append(got, e.Source+"/"+e.DeliveryID)
			}
			if !slices.Equal(got, tt.want) && !(len(got) == 0 && len(tt.want) == 0) {
				t.Errorf("events = %v, want %v", got, tt.want)
			}
			if page.Events == nil {
				t.Error("events is null, want a list")
			}
		})
	}
	t.Run("jobs of an event", func(t *testing.T) {
		page := decode[queue.EventPage](t, f.do(t, http.MethodGet, "/webhook/events?source=github&delivery_id=d-1"))
		if len(page.Events) != 1 || len(page.Events[0].Jobs) != 1 || page.Events[0].Jobs[0].ID != d.githubHTTPDead ||
			page.Events[0].Jobs[0].Status != queue.StatusDead {
			t.Errorf("event d-1 = %+v, want its dead job %d", page.Events, d.githubHTTPDead)
		}
	})
	t.Run("one event", func(t *testing.T) {
		ev := decode[adminapi.EventResponse](t, f.do(t, http.MethodGet, fmt.Sprintf("/webhook/events/%d", bare.EventID)))
		if ev.DeliveryID != "ping-1" || ev.PayloadText != `{"zen":"x"}` || len(ev.Jobs) != 0 || ev.Headers == nil {
			t.Errorf("event = %+v", ev)
		}
		if rec := f.do(t, http.MethodGet, "/webhook/events/999"); rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "event 999 not found") {
			t.Errorf("unknown event: %d %s", rec.Code, rec.Body)
		}
		if rec := f.do(t, http.MethodGet, "/webhook/events/x"); rec.Code != http.StatusBadRequest {
			t.Errorf("bad id: %d %s", rec.Code, rec.Body)
		}
	})
}

func TestAdminJobsFilters(t *testing.T) {
	t.Parallel()
	f := setupAdmin(t)
	d := f.seed(t)
	tests := []struct {
		name       string
		target     string
		wantStatus int
		want       []int64
	}{
		{"event type", "/webhook/jobs?event_type=invoice.paid", 200, []int64{d.stripeHTTPRunning, d.stripeHTTPDead}},
		{"delivery id", "/webhook/jobs?source=github&delivery_id=d-2", 200, []int64{d.githubExecDone}},
		{"since", "/webhook/jobs?since=1m&source=slack", 200, []int64{d.binary}},
		{"until", "/webhook/jobs?until=1m", 200, []int64{}},
		{"delivery id without source", "/webhook/jobs?delivery_id=d-2", 400, nil},
		{"bad until", "/webhook/jobs?until=soon", 400, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := f.doWant(t, http.MethodGet, tt.target, tt.wantStatus)
			if tt.want == nil {
				return
			}
			got := []int64{}
			for _, j := range decode[queue.JobPage](t, rec).Jobs {
				got = append(got, j.ID)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("jobs = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAdminResend(t *testing.T) {
	t.Parallel()
	f := setupAdmin(t)
	d := f.seed(t)
	tests := []struct {
		name       string
		id         int64
		wantStatus int
		wantText   string
	}{
		{"done job", d.githubExecDone, 200, `"resent":true`},
		{"dead job", d.stripeHTTPDead, 200, `"resent":true`},
		{"pending job", d.githubHTTPPending, 409, "only done or dead jobs can be resent"},
		{"running job", d.stripeHTTPRunning, 409, "only done or dead jobs can be resent"},
		{"unknown job", 999, 404, "job 999 not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := f.do(t, http.MethodPost, fmt.Sprintf("/webhook/jobs/%d/resend", tt.id))
			if rec.Code != tt.wantStatus || !strings.Contains(message(rec), tt.wantText) {
				t.Errorf("status %d body %s, want %d with %q", rec.Code, rec.Body, tt.wantStatus, tt.wantText)
			}
		})
	}
	j := f.getJob(t, d.githubExecDone)
	if j.Status != queue.StatusPending || len(j.History) != 1 || j.History[0].Outcome != queue.StatusDone {
		t.Errorf("resent job: status %s, history %+v; want pending with the delivered attempt kept", j.Status, j.History)
	}
	if rec := f.do(t, http.MethodGet, fmt.Sprintf("/webhook/jobs/%d/resend", d.githubExecDone)); rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET resend: %d", rec.Code)
	}
}

func TestAdminSendEvent(t *testing.T) {
	t.Parallel()
	f := setupAdmin(t)
	f.seed(t)
	bare, err := f.store.Enqueue(t.Context(), queue.Event{Source: "github", DeliveryID: "ping-1", EventType: "ping", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	stripe, err := f.store.FindEvent(t.Context(), "stripe", "d-3")
	if err != nil {
		t.Fatal(err)
	}
	f.withConfig(t)
	tests := []struct {
		name       string
		target     string
		wantStatus int
		wantText   string
	}{
		{"to a target of the source", fmt.Sprintf("/webhook/events/%d/send?target=exec", bare.EventID), 200, `"target":"exec"`},
		{"to another target", fmt.Sprintf("/webhook/events/%d/send?target=sms", bare.EventID), 400, `"sms" is not a target of source "github" in the running config (its targets: http, exec)`},
		{"without target", fmt.Sprintf("/webhook/events/%d/send", bare.EventID), 400, "target: is required"},
		{"source not in config", fmt.Sprintf("/webhook/events/%d/send?target=http", stripe.ID), 400, `source "stripe" of event`},
		{"unknown event", "/webhook/events/999/send?target=http", 404, "event 999 not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := f.do(t, http.MethodPost, tt.target)
			if rec.Code != tt.wantStatus || !strings.Contains(message(rec), tt.wantText) {
				t.Errorf("status %d body %s, want %d with %q", rec.Code, rec.Body, tt.wantStatus, tt.wantText)
			}
		})
	}
	ev, err := f.store.GetEvent(t.Context(), bare.EventID)
	if err != nil || len(ev.Jobs) != 1 || ev.Jobs[0].Target != "exec" || ev.Jobs[0].Status != queue.StatusPending {
		t.Errorf("event after send: %+v, %v; want one pending exec job", ev.Jobs, err)
	}
}

func TestAdminInject(t *testing.T) {
	t.Parallel()
	f := setupAdmin(t)
	f.withConfig(t)
	tests := []struct {
		name       string
		body       string
		wantStatus int
		wantText   string
		check      func(t *testing.T, resp adminapi.InjectResponse)
	}{
		{
			name: "push to both targets", wantStatus: 200,
			body: `{"source":"github","event_type":"push","headers":{"X-GitHub-Event":"push"},"body":"{\"ref\":\"main\"}"}`,
			check: func(t *testing.T, resp adminapi.InjectResponse) {
				if !strings.HasPrefix(resp.DeliveryID, "injected-") || resp.Jobs != 2 || !slices.Equal(resp.Targets, []string{"http", "exec"}) {
					t.Errorf("response %+v, want an injected-… id and jobs for http and exec", resp)
				}
				ev, err := f.store.GetEvent(t.Context(), resp.EventID)
				if err != nil {
					t.Fatal(err)
				}
				want := []queue.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "X-GitHub-Event", Value: "push"}, {Name: adminapi.InjectedHeader, Value: "1"}}
				if string(ev.Payload) != `{"ref":"main"}` || fmt.Sprint(ev.Headers) != fmt.Sprint(want) || ev.EventType != "push" {
					t.Errorf("stored event %+v, want payload, headers %v", ev, want)
				}
			},
		},
		{
			name: "given delivery id, base64 body, one target", wantStatus: 200,
			body: `{"source":"github","event_type":"issues","delivery_id":"demo-1","body_base64":"/w==","headers":{"content-type":"application/octet-stream"}}`,
			check: func(t *testing.T, resp adminapi.InjectResponse) {
				ev, err := f.store.FindEvent(t.Context(), "github", "demo-1")
				if err != nil || resp.Jobs != 1 || string(ev.Payload) != "\xff" || ev.Headers[0].Value != "application/octet-stream" {
					t.Errorf("response %+v, event %+v, %v", resp, ev, err)
				}
			},
		},
		{
			name: "the same delivery id again is a duplicate", wantStatus: 200,
			body: `{"source":"github","delivery_id":"demo-1"}`,
			check: func(t *testing.T, resp adminapi.InjectResponse) {
				if !resp.Duplicate || resp.Jobs != 0 {
					t.Errorf("response %+v, want a duplicate", resp)
				}
			},
		},
		{"unknown source", `{"source":"stripe"}`, 400, `source "stripe" is not in the running config`, nil},
		{"no source", `{}`, 400, "source is required", nil},
		{"unknown field", `{"source":"github","payload":"x"}`, 400, `unknown field "payload"`, nil},
		{"both bodies", `{"source":"github","body":"x","body_base64":"eA=="}`, 400, "not both", nil},
		{"bad header name", `{"source":"github","headers":{"Bad Name":"x"}}`, 400, "not a valid header name", nil},
		{"header with a newline", `{"source":"github","headers":{"X-A":"a\nb"}}`, 400, "control character", nil},
		{"the marker header", `{"source":"github","headers":{"x-webhook-injected":"0"}}`, 400, "set by the server", nil},
		{"too large for the source", `{"source":"github","body":"` + strings.Repeat("x", 1025) + `"}`, 413, "larger than source", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := f.doBody(t, http.MethodPost, "/webhook/send", tt.body)
			if rec.Code != tt.wantStatus || !strings.Contains(message(rec), tt.wantText) {
				t.Fatalf("status %d body %s, want %d with %q", rec.Code, rec.Body, tt.wantStatus, tt.wantText)
			}
			if tt.check != nil {
				tt.check(t, decode[adminapi.InjectResponse](t, rec))
			}
		})
	}
}

func TestTailHub(t *testing.T) {
	t.Run("filters", func(t *testing.T) {
		var h tailHub
		all := h.subscribe(tailFilter{}, 0)
		mail := h.subscribe(tailFilter{source: "shop", target: "mail"}, 0)
		dead := h.subscribe(tailFilter{outcome: "dead"}, 0)
		h.publish(adminapi.TailLine{Kind: adminapi.TailReceived, Source: "shop", Outcome: "accepted"})
		h.publish(adminapi.TailLine{Kind: adminapi.TailDelivery, Source: "shop", Target: "mail", Outcome: "delivered"})
		h.publish(adminapi.TailLine{Kind: adminapi.TailDelivery, Source: "shop", Target: "chat", Outcome: "dead"})
		for _, tt := range []struct {
			name string
			sub  *tailSub
			want []string
		}{
			{"everything", all, []string{"accepted", "delivered", "dead"}},
			{"source and target", mail, []string{"delivered"}},
			{"outcome", dead, []string{"dead"}},
		} {
			var got []string
			for len(tt.sub.lines) > 0 {
				got = append(got, (<-tt.sub.lines).Outcome)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
			}
		}
		h.unsubscribe(all)
		h.unsubscribe(mail)
		h.unsubscribe(dead)
		if h.active() {
			t.Error("hub active after every subscriber left")
		}
	})
	t.Run("a slow subscriber loses lines, publish never waits", func(t *testing.T) {
		var h tailHub
		s := h.subscribe(tailFilter{}, 0)
		defer h.unsubscribe(s)
		for range tailBuffer + 10 {
			h.publish(adminapi.TailLine{Kind: adminapi.TailReceived})
		}
		if len(s.lines) != tailBuffer || s.dropped.Load() != 10 {
			t.Errorf("buffered %d, dropped %d; want %d and 10", len(s.lines), s.dropped.Load(), tailBuffer)
		}
	})
}

// readTailLine reads the next data line of a tail stream, skipping
// comments.
func readTailLine(t *testing.T, r *bufio.Reader) adminapi.TailLine {
	t.Helper()
	for {
		s, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read tail: %v", err)
		}
		if data, ok := strings.CutPrefix(strings.TrimSpace(s), "data: "); ok {
			var l adminapi.TailLine
			if err := json.Unmarshal([]byte(data), &l); err != nil {
				t.Fatalf("decode %q: %v", data, err)
			}
			return l
		}
	}
}

func TestAdminTail(t *testing.T) {
	f := setupAdmin(t)
	srv := httptest.NewServer(f.handler)
	defer srv.Close()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/webhook/tail?source=shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("status %d, Content-Type %q", resp.StatusCode, ct)
	}
	r := bufio.NewReader(resp.Body)
	// The greeting comes after the subscription.
	if s, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(s, ":") {
		t.Fatalf("first line %q, %v", s, err)
	}
	info := &requestInfo{source: "forge", outcome: outcomeAccepted}
	tails.publishReceived(info) // another source: filtered out
	info = &requestInfo{source: "shop", outcome: outcomeAccepted, status: 202, deliveryID: "d1", eventType: "order.paid"}
	tails.publishReceived(info)
	initMetrics()
	obs := &observer{logger: zap.NewNop()}
	job := &queue.Job{ID: 7, EventID: 3, Source: "shop", Target: "mail", DeliveryID: "d1", Attempt: 2}
	obs.JobFinished(job, queue.Completion{Status: queue.StatusPending, Error: "upstream answered 503", Duration: 1500 * time.Microsecond}, true, nil)

	got := readTailLine(t, r)
	if got.Kind != adminapi.TailReceived || got.Source != "shop" || got.Outcome != "accepted" || got.Status != 202 || got.DeliveryID != "d1" {
		t.Errorf("received line %+v", got)
	}
	got = readTailLine(t, r)
	want := adminapi.TailLine{Kind: adminapi.TailDelivery, Source: "shop", Target: "mail", Outcome: "retry", DeliveryID: "d1", EventID: 3, JobID: 7,
		Attempt: 2, DurationMS: 1.5, Error: "upstream answered 503"}
	got.Time = time.Time{}
	if got != want {
		t.Errorf("delivery line %+v, want %+v", got, want)
	}
}

// TestAdminTailLimits: past max_tails a tail is refused with 503, and a
// tail whose reader lags longer than tail_max_lag is closed, whether it
// takes lines too old or stops reading its connection.
func TestAdminTailLimits(t *testing.T) {
	f := setupAdmin(t)
	srv := httptest.NewServer(f.handler)
	defer srv.Close()
	open := func(t *testing.T) (*http.Response, context.CancelFunc) {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/webhook/tail", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close(); cancel() })
		return resp, cancel
	}

	t.Run("past max_tails 503", func(t *testing.T) {
		f.configure(func(c *runningConfig) { c.maxTails = 2 })
		for range 2 {
			if resp, _ := open(t); resp.StatusCode != http.StatusOK {
				t.Fatalf("tail within the cap: %d", resp.StatusCode)
			}
		}
		resp, _ := open(t)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "max_tails") {
			t.Errorf("third tail: %d %q, Retry-After %q; want 503 naming max_tails", resp.StatusCode, b, resp.Header.Get("Retry-After"))
		}
	})
	t.Run("default cap", func(t *testing.T) {
		var h tailHub
		for i := range defaultMaxTails {
			if h.subscribe(tailFilter{}, 0) == nil {
				t.Fatalf("subscriber %d refused under the default cap %d", i+1, defaultMaxTails)
			}
		}
		if h.subscribe(tailFilter{}, 0) != nil {
			t.Errorf("subscriber past the default cap %d accepted", defaultMaxTails)
		}
	})

	t.Run("a line older than tail_max_lag closes the tail", func(t *testing.T) {
		f.configure(func(c *runningConfig) { c.maxTails, c.tailMaxLag = 0, time.Second })
		resp, _ := open(t)
		r := bufio.NewReader(resp.Body)
		if s, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(s, ":") {
			t.Fatalf("first line %q, %v", s, err)
		}
		tails.publish(adminapi.TailLine{Kind: adminapi.TailReceived, Source: "stale", Time: time.Now().Add(-time.Minute)})
		rest, err := io.ReadAll(r)
		if err != nil || strings.Contains(string(rest), "stale") {
			t.Errorf("after a stale line: %q, %v; want the stream closed without it", rest, err)
		}
	})

	t.Run("a reader that stops reading is dropped", func(t *testing.T) {
		const lag = 300 * time.Millisecond
		f.configure(func(c *runningConfig) { c.maxTails, c.tailMaxLag = 0, lag })
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, "GET /webhook/tail HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		// Read the answer's head, then never read again.
		if _, err := bufio.NewReader(conn).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		// Lines fill the connection's buffers until a write blocks; it
		// may block for the lag only.
		start := time.Now()
		for tails.active() && time.Since(start) < 30*time.Second {
			for range 1000 {
				tails.publish(adminapi.TailLine{Kind: adminapi.TailReceived, Source: strings.Repeat("s", 200), Error: strings.Repeat("e", 200)})
			}
		}
		if tails.active() {
			t.Fatalf("the stalled tail is still subscribed after %v (tail_max_lag %v)", time.Since(start), lag)
		}
		t.Logf("stalled tail dropped %v after lines began (tail_max_lag %v)", time.Since(start).Round(time.Millisecond), lag)
	})
}
