package caddywebhook

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/sqlite"
	"github.com/caddywebhook/caddywebhook/signature"
)

// standardSecret is testSecret as a Standard Webhooks secret.
var standardSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte(testSecret))

// TestReceiver sends one kind of request per case to an in-process Caddy
// and checks the status, the (empty) body, what the database holds, the
// outcome word in the access log and in the placeholders, and that no
// secret, signature or body byte reached any log.
func TestReceiver(t *testing.T) {
	small := receiverConfig{
		"handler": "webhook_receiver", "source": "small", "scheme": "github",
		"secrets": []string{"{env." + testSecretEnv + "}"}, "max_body": 64,
		"targets": []map[string]any{httpTarget("", "http://127.0.0.1:9/")},
	}
	std := receiverConfig{
		"handler": "webhook_receiver", "source": "std", "scheme": "standard",
		"secrets": []string{standardSecret},
		"targets": []map[string]any{httpTarget("", "http://127.0.0.1:9/")},
	}
	filtered := githubReceiver("filtered", httpTarget("releases", "http://127.0.0.1:9/", "release"))
	fanout := githubReceiver("fanout",
		httpTarget("", "http://127.0.0.1:9/"),
		httpTarget("", "http://127.0.0.1:9/"),
		httpTarget("pushes", "http://127.0.0.1:9/", "push", "pull_*"),
		httpTarget("never", "http://127.0.0.1:9/", "release"))

	type sent struct {
		resp      response
		signature string // the signature header sent, must not be logged
	}
	// send posts body signed with secret to source's receiver.
	send := func(t *testing.T, h *harness, source, secret, id string, body []byte) sent {
		t.Helper()
		hdr := signed(t, secret, id, "push", body)
		return sent{h.do(t, http.MethodPost, "/hooks/"+source, hdr, bytes.NewReader(body)), hdr.Get("X-Hub-Signature-256")}
	}

	tests := []struct {
		name      string
		receivers []receiverConfig
		// before runs after Caddy started and before the request.
		before func(t *testing.T, h *harness)
		// request sends the request under test.
		request     func(t *testing.T, h *harness) sent
		wantStatus  int
		wantOutcome string
		wantEvents  int64
		wantJobs    []string // targets of the stored jobs, sorted
	}{
		{
			name:      "signed event is stored and accepted",
			receivers: []receiverConfig{githubReceiver("gh", httpTarget("", "http://127.0.0.1:9/"))},
			request: func(t *testing.T, h *harness) sent {
				return send(t, h, "gh", testSecret, "d-1", testBody(1))
			},
			wantStatus: http.StatusAccepted, wantOutcome: "accepted", wantEvents: 1, wantJobs: []string{"http"},
		},
		{
			name:      "engine signing the rebuilt URL and method",
			receivers: []receiverConfig{urlReceiver("byurl", "")},
			request: func(t *testing.T, h *harness) sent {
				return sent{resp: sendURL(t, h, "byurl", "http://"+h.addr+"/hooks/byurl?acct=7", testBody(1))}
			},
			wantStatus: http.StatusAccepted, wantOutcome: "accepted", wantEvents: 1, wantJobs: []string{"http"},
		},
		{
			name:      "engine signing another URL is refused",
			receivers: []receiverConfig{urlReceiver("byurl", "")},
			request: func(t *testing.T, h *harness) sent {
				return sent{resp: sendURL(t, h, "byurl", "https://proxy.example/hooks/byurl?acct=7", testBody(1))}
			},
			wantStatus: http.StatusUnauthorized, wantOutcome: "bad_signature",
		},
		{
			name:      "public_url names the URL a proxy in front received",
			receivers: []receiverConfig{urlReceiver("byurl", "https://proxy.example/hooks/byurl?acct=7")},
			request: func(t *testing.T, h *harness) sent {
				return sent{resp: sendURL(t, h, "byurl", "https://proxy.example/hooks/byurl?acct=7", testBody(1))}
			},
			wantStatus: http.StatusAccepted, wantOutcome: "accepted", wantEvents: 1, wantJobs: []string{"http"},
		},
		{
			name: "preset: paddle",
			receivers: []receiverConfig{{
				"handler": "webhook_receiver", "source": "paddle", "scheme": "paddle", "secrets": []string{testSecret},
				"targets": []map[string]any{httpTarget("", "http://127.0.0.1:9/")},
			}},
			request: func(t *testing.T, h *harness) sent {
				body := []byte(`{"event_id":"d-1","event_type":"transaction.completed"}`)
				hdr, err := signature.Sign("paddle", testSecret, body, signature.SignOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return sent{resp: h.do(t, http.MethodPost, "/hooks/paddle", hdr, bytes.NewReader(body))}
			},
			wantStatus: http.StatusAccepted, wantOutcome: "accepted", wantEvents: 1, wantJobs: []string{"http"},
		},
		{
			name:      "wrong secret is refused and nothing stored",
			receivers: []receiverConfig{githubReceiver("gh", httpTarget("", "http://127.0.0.1:9/"))},
			request: func(t *testing.T, h *harness) sent {
				return send(t, h, "gh", "another-secret", "d-1", testBody(1))
			},
			wantStatus: http.StatusUnauthorized, wantOutcome: "bad_signature",
		},
		{
			name:      "missing signature is refused",
			receivers: []receiverConfig{githubReceiver("gh", httpTarget("", "http://127.0.0.1:9/"))},
			request: func(t *testing.T, h *harness) sent {
				return sent{resp: h.do(t, http.MethodPost, "/hooks/gh", http.Header{"X-Github-Delivery": {"d-1"}}, bytes.NewReader(testBody(1)))}
			},
			wantStatus: http.StatusUnauthorized, wantOutcome: "bad_signature",
		},
		{
			name:      "duplicate delivery is accepted once stored",
			receivers: []receiverConfig{githubReceiver("gh", httpTarget("", "http://127.0.0.1:9/"))},
			before: func(t *testing.T, h *harness) {
				if got := h.post(t, "gh", "d-1", "push", testBody(1)); got != http.StatusAccepted {
					t.Fatalf("first post: %d", got)
				}
			},
			request: func(t *testing.T, h *harness) sent {
				return send(t, h, "gh", testSecret, "d-1", testBody(1))
			},
			wantStatus: http.StatusAccepted, wantOutcome: "duplicate", wantEvents: 1, wantJobs: []string{"http"},
		},
		{
			name:      "body over max_body with a length is refused unread",
			receivers: []receiverConfig{small},
			request: func(t *testing.T, h *harness) sent {
				return send(t, h, "small", testSecret, "d-1", bytes.Repeat([]byte("x"), 65))
			},
			wantStatus: http.StatusRequestEntityTooLarge, wantOutcome: "too_large",
		},
		{
			name:      "chunked body over max_body is refused",
			receivers: []receiverConfig{small},
			request: func(t *testing.T, h *harness) sent {
				body := bytes.Repeat([]byte("x"), 65)
				hdr := signed(t, testSecret, "d-1", "push", body)
				// A reader of unknown length makes the client send chunks.
				return sent{h.do(t, http.MethodPost, "/hooks/small", hdr, io.MultiReader(bytes.NewReader(body))), hdr.Get("X-Hub-Signature-256")}
			},
			wantStatus: http.StatusRequestEntityTooLarge, wantOutcome: "too_large",
		},
		{
			name:      "body of exactly max_body is accepted",
			receivers: []receiverConfig{small},
			request: func(t *testing.T, h *harness) sent {
				return send(t, h, "small", testSecret, "d-1", bytes.Repeat([]byte("x"), 64))
			},
			wantStatus: http.StatusAccepted, wantOutcome: "accepted", wantEvents: 1, wantJobs: []string{"http"},
		},
		{
			name:      "GET is not allowed",
			receivers: []receiverConfig{githubReceiver("gh", httpTarget("", "http://127.0.0.1:9/"))},
			request: func(t *testing.T, h *harness) sent {
				return sent{resp: h.do(t, http.MethodGet, "/hooks/gh", nil, nil)}
			},
			wantStatus: http.StatusMethodNotAllowed, wantOutcome: "method_not_allowed",
		},
		{
			name:      "event matching no target is stored without a job",
			receivers: []receiverConfig{filtered},
			request: func(t *testing.T, h *harness) sent {
				return send(t, h, "filtered", testSecret, "d-1", testBody(1))
			},
			wantStatus: http.StatusAccepted, wantOutcome: "no_target", wantEvents: 1,
		},
		{
			name:      "event fans out to the targets whose events match",
			receivers: []receiverConfig{fanout},
			request: func(t *testing.T, h *harness) sent {
				return send(t, h, "fanout", testSecret, "d-1", testBody(1))
			},
			wantStatus: http.StatusAccepted, wantOutcome: "accepted", wantEvents: 1, wantJobs: []string{"http", "http-2", "pushes"},
		},
		{
			name:      "standard timestamp too old is refused",
			receivers: []receiverConfig{std},
			request: func(t *testing.T, h *harness) sent {
				body := testBody(1)
				hdr, err := signature.Sign("standard", standardSecret, body, signature.SignOptions{ID: "msg_1", Timestamp: time.Now().Add(-time.Hour)})
				if err != nil {
					t.Fatal(err)
				}
				return sent{h.do(t, http.MethodPost, "/hooks/std", hdr, bytes.NewReader(body)), hdr.Get("webhook-signature")}
			},
			wantStatus: http.StatusUnauthorized, wantOutcome: "stale_timestamp",
		},
		{
			name:      "store failure is 503, never 202",
			receivers: []receiverConfig{githubReceiver("gh", httpTarget("", "http://127.0.0.1:9/"))},
			before: func(t *testing.T, h *harness) {
				if err := h.store(t).Close(); err != nil {
					t.Fatal(err)
				}
			},
			request: func(t *testing.T, h *harness) sent {
				return send(t, h, "gh", testSecret, "d-1", testBody(1))
			},
			wantStatus: http.StatusServiceUnavailable, wantOutcome: "store_failed",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.load(t, map[string]any{"workers": 0}, tt.receivers...)
			if tt.before != nil {
				tt.before(t, h)
			}
			got := tt.request(t, h)

			if got.resp.status != tt.wantStatus {
				t.Errorf("status = %d, want %d", got.resp.status, tt.wantStatus)
			}
			if len(got.resp.body) != 0 {
				t.Errorf("body = %q, want empty", got.resp.body)
			}
			if o := got.resp.header.Get("Echo-Outcome"); o != tt.wantOutcome {
				t.Errorf("{webhook.outcome} = %q, want %q", o, tt.wantOutcome)
			}
			if tt.wantOutcome == "store_failed" && got.resp.header.Get("Retry-After") == "" {
				t.Error("a 503 store_failed without Retry-After")
			}
			if tt.wantStatus == http.StatusMethodNotAllowed && got.resp.header.Get("Allow") != http.MethodPost {
				t.Errorf("Allow = %q, want POST", got.resp.header.Get("Allow"))
			}
			if tt.wantStatus == http.StatusAccepted && got.resp.header.Get("Echo-Delivery-Id") != "d-1" {
				t.Errorf("{webhook.delivery_id} = %q, want d-1", got.resp.header.Get("Echo-Delivery-Id"))
			}

			if tt.wantOutcome != "store_failed" {
				s := h.store(t)
				st, err := s.Stats(context.Background(), time.Now())
				if err != nil {
					t.Fatal(err)
				}
				if st.Events != tt.wantEvents {
					t.Errorf("events stored = %d, want %d", st.Events, tt.wantEvents)
				}
				var targets []string
				for _, j := range jobs(t, s) {
					targets = append(targets, j.Target)
				}
				if fmt.Sprint(sortedCopy(targets)) != fmt.Sprint(tt.wantJobs) && len(targets)+len(tt.wantJobs) > 0 {
					t.Errorf("jobs for targets %v, want %v", sortedCopy(targets), tt.wantJobs)
				}
			}

			lines := h.logs(t)
			access := accessLines(lines)
			if len(access) == 0 {
				t.Fatal("no access log line")
			}
			last := access[len(access)-1]
			wh, _ := last["webhook"].(map[string]any)
			if wh["outcome"] != tt.wantOutcome || wh["source"] == nil {
				t.Errorf("access log webhook fields = %v, want outcome %q and the source", wh, tt.wantOutcome)
			}
			raw := h.rawLogs(t)
			assertNoCanaries(t, raw)
			if got.signature != "" && bytes.Contains(raw, []byte(got.signature)) {
				t.Errorf("logs contain the signature %q", got.signature)
			}
		})
	}
}

// TestReceiverStoresWhatTargetsNeed checks the stored row: the exact body,
// the content type, the event and delivery headers, never the signature
// header.
func TestReceiverStoresWhatTargetsNeed(t *testing.T) {
	h := newHarness(t)
	h.load(t, map[string]any{"workers": 0}, githubReceiver("gh", httpTarget("", "http://127.0.0.1:9/")))
	body := []byte(" {\"spaces\" :  \"kept\", \"marker\": \"" + testBodyMarker + "\"}\n")
	if got := h.post(t, "gh", "d-9", "release", body); got != http.StatusAccepted {
		t.Fatalf("status %d", got)
	}
	j := onlyJob(t, h.store(t))
	if !bytes.Equal(j.Payload, body) {
		t.Errorf("payload = %q, want the bytes as sent", j.Payload)
	}
	if j.Source != "gh" || j.DeliveryID != "d-9" || j.EventType != "release" || j.Status != queue.StatusPending {
		t.Errorf("job = %+v", j.JobSummary)
	}
	got := map[string]string{}
	for _, hd := range j.Headers {
		got[http.CanonicalHeaderKey(hd.Name)] = hd.Value
	}
	want := map[string]string{"Content-Type": "application/json", "X-Github-Event": "release", "X-Github-Delivery": "d-9"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("stored headers = %v, want %v", got, want)
	}
}

// testClient is the client address of httptest.NewRequest's requests.
var testClient = netip.MustParseAddr("192.0.2.1")

// postOf is a POST whose body is body; nil for a request without one.
func postOf(body io.Reader) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r.Body = nil
	if body != nil {
		r.Body = io.NopCloser(body)
	}
	return r
}

// budgetUsed returns the bytes charged to b.
func budgetUsed(b *bodyBudget) int64 {
	all, _ := b.inUse(netip.Addr{})
	return all
}

func TestRequestBodyFill(t *testing.T) {
	const limit = 10
	tests := []struct {
		name    string
		body    io.Reader
		hint    int64
		buf     []byte
		budget  int64 // bytes the receiver may hold beyond pooled buffers
		want    string
		wantErr error
	}{
		{"empty", strings.NewReader(""), 0, nil, 64, "", nil},
		{"nil body", nil, -1, nil, 64, "", nil},
		{"under the limit with a hint", strings.NewReader("hello"), 5, nil, 64, "hello", nil},
		{"at the limit without a hint", strings.NewReader("0123456789"), -1, nil, 64, "0123456789", nil},
		{"one over without a hint", strings.NewReader("0123456789x"), -1, nil, 64, "", errTooLarge},
		{"hint lies low", strings.NewReader("0123456789x"), 2, nil, 64, "", errTooLarge},
		{"one byte at a time", iotest.OneByteReader(strings.NewReader("abcdef")), -1, make([]byte, 0, 1), 64, "abcdef", nil},
		{"reuses a large enough buffer", strings.NewReader("abc"), 3, make([]byte, 0, 64), 0, "abc", nil},
		{"read error", iotest.ErrReader(errors.New("connection reset")), -1, nil, 64, "", errors.New("connection reset")},
		{"request_body cap", http.MaxBytesReader(httptest.NewRecorder(), io.NopCloser(strings.NewReader("0123456789")), 4), -1, nil, 64, "", errTooLarge},
		{"over the budget", strings.NewReader("0123456789"), 10, make([]byte, 0, 4), 8, "", errBusy},
		{"within the budget, to the byte", strings.NewReader("0123456789"), 10, make([]byte, 0, 4), 11, "0123456789", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			budget := &bodyBudget{limit: tt.budget, perClient: tt.budget}
			b := requestBody{budget: budget}
			got, err := b.fill(httptest.NewRecorder(), postOf(tt.body), tt.buf[:0], bodyLimits{max: limit, hint: tt.hint})
			held := b.held
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("error %v", err)
			case tt.wantErr != nil && (err == nil || err.Error() != tt.wantErr.Error()):
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			case tt.wantErr == nil && string(got) != tt.want:
				t.Fatalf("body %q, want %q", got, tt.want)
			}
			if int64(cap(got)) > limit+1 && int64(cap(tt.buf)) <= limit+1 {
				t.Errorf("buffer grew to %d, past limit+1", cap(got))
			}
			if used := budgetUsed(budget); used != held || held > tt.budget {
				t.Errorf("budget holds %d, the body says %d, limit %d", used, held, tt.budget)
			}
			budget.release(testClient, held)
			if used := budgetUsed(budget); used != 0 {
				t.Errorf("budget holds %d after the release", used)
			}
		})
	}
}

// TestRequestBodyGrowsWithBytesReceived: a declared Content-Length reserves
// nothing; the buffer grows only as bytes arrive (invariant 8).
func TestRequestBodyGrowsWithBytesReceived(t *testing.T) {
	const declared = 1 << 20
	pr, pw := io.Pipe()
	budget := &bodyBudget{limit: 64 << 20, perClient: 64 << 20}
	type result struct {
		buf  []byte
		held int64
		err  error
	}
	done := make(chan result, 1)
	go func() {
		b := requestBody{budget: budget}
		buf, err := b.fill(httptest.NewRecorder(), postOf(pr), make([]byte, 0, minBodyBuffer), bodyLimits{max: declared, hint: declared})
		done <- result{buf, b.held, err}
	}()
	// One byte of the declared MiB, then the sender stops. The pipe's
	// Write returns once the reader took the byte.
	if _, err := pw.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if used := budgetUsed(budget); used != 0 {
		t.Errorf("after 1 byte of a declared MiB the receiver holds %d bytes beyond its pooled buffer, want 0", used)
	}
	// The rest arrives: the buffer grows to what was sent.
	if _, err := pw.Write(bytes.Repeat([]byte("y"), 3*minBodyBuffer)); err != nil {
		t.Fatal(err)
	}
	if used := budgetUsed(budget); used == 0 || used > 4*minBodyBuffer*2 {
		t.Errorf("after %d bytes the receiver holds %d bytes", 3*minBodyBuffer+1, used)
	}
	pw.CloseWithError(io.ErrUnexpectedEOF)
	r := <-done
	if !errors.Is(r.err, io.ErrUnexpectedEOF) || len(r.buf) != 3*minBodyBuffer+1 {
		t.Errorf("read %d bytes, error %v", len(r.buf), r.err)
	}
	budget.release(testClient, r.held)
}

// TestReceiverBodyBudget: past max_body_inflight, a request gets 503 with
// Retry-After instead of memory, and the bytes come back when a request is
// answered.
func TestReceiverBodyBudget(t *testing.T) {
	v, err := signature.New(signature.Config{Scheme: "github", Secrets: []string{testSecret}})
	if err != nil {
		t.Fatal(err)
	}
	rc := &Receiver{Source: "s", verifier: v, maxBody: 64 << 10}
	rc.inflight.limit, rc.inflight.perClient = 64<<10, 64<<10
	// A sender that sent 40 KiB of a declared 64 KiB holds 64 KiB of
	// buffer (doubling from 4 KiB) and keeps the connection open.
	pr, pw := io.Pipe()
	// A well-formed signature that will not match: the body is read.
	forged := "sha256=" + strings.Repeat("0", 64)
	slow := httptest.NewRequest(http.MethodPost, "/", pr)
	slow.ContentLength = 64 << 10
	slow.Header.Set("X-Hub-Signature-256", forged)
	slowDone := make(chan int, 1)
	go func() {
		w := httptest.NewRecorder()
		rc.ServeHTTP(w, slow, nil)
		slowDone <- w.Code
	}()
	if _, err := pw.Write(make([]byte, 40<<10)); err != nil {
		t.Fatal(err)
	}
	// The pipe's Write returned, so the reader took every byte, into a
	// buffer charged before each read.
	if used := budgetUsed(&rc.inflight); used <= 32<<10 {
		t.Fatalf("%d bytes in flight after 40 KiB were read", used)
	}

	// A second one that sends 40 KiB finds no room.
	second := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(make([]byte, 40<<10)))
	second.Header.Set("X-Hub-Signature-256", forged)
	w := httptest.NewRecorder()
	rc.ServeHTTP(w, second, nil)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Errorf("second request: %d, Retry-After %q; want 503 with Retry-After", w.Code, w.Header().Get("Retry-After"))
	}

	// The first ends unsigned: 401, and its bytes are given back.
	pw.Close()
	if code := <-slowDone; code != http.StatusUnauthorized {
		t.Errorf("slow request: %d, want 401", code)
	}
	if used := budgetUsed(&rc.inflight); used != 0 {
		t.Errorf("%d bytes still charged after every request was answered", used)
	}
	w = httptest.NewRecorder()
	third := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(make([]byte, 40<<10)))
	third.Header.Set("X-Hub-Signature-256", forged)
	rc.ServeHTTP(w, third, nil)
	if w.Code != http.StatusUnauthorized {
		t.Errorf("third request: %d, want 401 (room again)", w.Code)
	}
}

// TestReceiverUnreadableBody covers the 400: a body that breaks off. A real
// client cannot easily send one, so the handler is called directly.
func TestReceiverUnreadableBody(t *testing.T) {
	rc := &Receiver{Source: "s", maxBody: defaultMaxBody}
	req := httptest.NewRequest(http.MethodPost, "/", iotest.ErrReader(io.ErrUnexpectedEOF))
	w := httptest.NewRecorder()
	if err := rc.ServeHTTP(w, req, nil); err != nil {
		t.Fatal(err)
	}
	if w.Code != http.StatusBadRequest || w.Body.Len() != 0 {
		t.Errorf("got %d %q, want 400 with no body", w.Code, w.Body)
	}
}

func TestTargetFilterWants(t *testing.T) {
	tests := []struct {
		name   string
		events []string
		event  string
		want   bool
	}{
		{"no filter takes all", nil, "anything", true},
		{"no filter takes untyped", nil, "", true},
		{"an empty list is no filter", []string{}, "anything", true},
		{"exact", []string{"push", "release"}, "release", true},
		{"exact miss", []string{"push"}, "pushed", false},
		{"prefix", []string{"invoice.*"}, "invoice.paid", true},
		{"prefix miss", []string{"invoice.*"}, "customer.created", false},
		{"star takes all typed", []string{"*"}, "x", true},
		{"untyped event misses a filter", []string{"push"}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (targetFilter{events: tt.events}).wants(tt.event); got != tt.want {
				t.Errorf("wants(%q) with %q = %v, want %v", tt.event, tt.events, got, tt.want)
			}
		})
	}
}

// urlContent is what urlReceiver signs: the method, the URL and the body.
const urlContent = "{method} {url}\\n{body}"

// urlReceiver is an hmac receiver whose signature covers the request URL,
// as Twilio's, Square's and HubSpot's do.
func urlReceiver(source, publicURL string) receiverConfig {
	rc := receiverConfig{
		"handler": "webhook_receiver", "source": source, "scheme": "hmac", "secrets": []string{testSecret},
		"hmac":        map[string]any{"header": "X-Sig", "signed_content": urlContent},
		"delivery_id": map[string]any{"header": "X-Delivery"},
		"targets":     []map[string]any{httpTarget("", "http://127.0.0.1:9/")},
	}
	if publicURL != "" {
		rc["public_url"] = publicURL
	}
	return rc
}

// sendURL posts body to the receiver of source, signed for url.
func sendURL(t *testing.T, h *harness, source, url string, body []byte) response {
	t.Helper()
	hdr, err := signature.Sign("hmac", testSecret, body, signature.SignOptions{
		SignatureHeader: "X-Sig", SignedContent: urlContent, URL: url, Method: http.MethodPost,
		Header: http.Header{"X-Delivery": {"d-1"}}})
	if err != nil {
		t.Fatal(err)
	}
	return h.do(t, http.MethodPost, "/hooks/"+source+"?acct=7", hdr, bytes.NewReader(body))
}

func TestForwardHeaders(t *testing.T) {
	tests := []struct {
		scheme    string
		eventType *FieldSource
		want      string
	}{
		{"github", nil, "[Content-Type X-GitHub-Event X-GitHub-Delivery X-GitHub-Hook-ID X-GitHub-Hook-Installation-Target-ID X-GitHub-Hook-Installation-Target-Type]"},
		{"shopify", nil, "[Content-Type X-Shopify-Topic X-Shopify-Shop-Domain X-Shopify-API-Version X-Shopify-Webhook-Id X-Shopify-Event-Id X-Shopify-Triggered-At X-Shopify-Name]"},
		{"gitlab", nil, "[Content-Type X-Gitlab-Event X-Gitlab-Event-UUID X-Gitlab-Instance X-Gitlab-Webhook-UUID Idempotency-Key]"},
		{"stripe", nil, "[Content-Type]"},
		{"hmac", &FieldSource{Header: "X-Event"}, "[Content-Type X-Event]"},
		{"github", &FieldSource{Header: "x-github-event"}, "[Content-Type X-GitHub-Event X-GitHub-Delivery X-GitHub-Hook-ID X-GitHub-Hook-Installation-Target-ID X-GitHub-Hook-Installation-Target-Type]"},
		{"standard", &FieldSource{JSON: "type"}, "[Content-Type]"},
		{"linear", nil, "[Content-Type Linear-Event Linear-Delivery]"},
		{"nosuch", nil, "[Content-Type]"},
	}
	for _, tt := range tests {
		t.Run(tt.scheme, func(t *testing.T) {
			var names []string
			for _, f := range forwardHeaders(tt.scheme, tt.eventType) {
				names = append(names, f.name)
			}
			if got := fmt.Sprint(names); got != tt.want {
				t.Errorf("forwarded %s, want %s", got, tt.want)
			}
		})
	}
}

// BenchmarkReceiver measures the handler with a real SQLite store: 512-byte
// GitHub-signed bodies from 16 clients per core, each with a new delivery id.
// Run with -benchmem; the store's fsync dominates with synchronous=full.
func BenchmarkReceiver(b *testing.B) {
	for _, sync := range []string{"normal", "full"} {
		b.Run("synchronous="+sync, func(b *testing.B) {
			store, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(b.TempDir(), "q.db"), Synchronous: sync})
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			v, err := signature.New(signature.Config{Scheme: "github", Secrets: []string{testSecret}})
			if err != nil {
				b.Fatal(err)
			}
			app := new(App)
			app.opened.Store(&sharedStore{Store: store})
			rc := &Receiver{Source: "bench", verifier: v, app: app, maxBody: defaultMaxBody,
				forward: forwardHeaders("github", nil), allTargets: []string{"http"}}
			rc.inflight.limit = defaultMaxBodyInflight
			body := bytes.Repeat([]byte("a"), 512)
			hdr, err := signature.Sign("github", testSecret, body, signature.SignOptions{EventType: "push"})
			if err != nil {
				b.Fatal(err)
			}
			var n atomic.Int64
			b.ReportAllocs()
			// 16 goroutines per core: like the load test's 32 connections
			// on 2 cores, enough concurrent requests for group commit.
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				w := &discardWriter{h: http.Header{}}
				for pb.Next() {
					req := &http.Request{Method: http.MethodPost, Header: hdr.Clone(), Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}
					req = req.WithContext(context.Background())
					req.Header.Set("X-Github-Delivery", "d-"+strconv.FormatInt(n.Add(1), 10))
					if err := rc.ServeHTTP(w, req, nil); err != nil || w.code != http.StatusAccepted {
						b.Fatalf("status %d, err %v", w.code, err)
					}
				}
			})
		})
	}
}

// discardWriter is a ResponseWriter that keeps only the status.
type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }

// sortedCopy returns s sorted, nil for an empty s.
func sortedCopy(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// accessLines returns the access log lines among lines.
func accessLines(lines []map[string]any) []map[string]any {
	var out []map[string]any
	for _, m := range lines {
		if l, _ := m["logger"].(string); strings.HasPrefix(l, "http.log.access") {
			out = append(out, m)
		}
	}
	return out
}

// TestReceiverRefusesUnstorableText: a delivery id or event type that is
// not UTF-8, holds a control character (NUL included) or is longer than
// 1024 bytes gets 400 with its own outcome word on both backends, and
// nothing is stored; PostgreSQL used to answer 503 for ever where SQLite
// answered 202, and a long value used to be dropped without a word.
func TestReceiverRefusesUnstorableText(t *testing.T) {
	// fromJSON reads both from the body, which can carry a NUL.
	fromJSON := githubReceiver("json", httpTarget("", "http://127.0.0.1:9/"))
	fromJSON["delivery_id"] = map[string]string{"json": "id"}
	fromJSON["event_type"] = map[string]string{"json": "type"}
	plain := githubReceiver("gh", httpTarget("", "http://127.0.0.1:9/"))
	long := strings.Repeat("x", maxEventText)

	tests := []struct {
		name        string
		source      string
		id, event   string // headers of the github scheme
		body        string
		wantStatus  int
		wantOutcome string
	}{
		{"id of 1024 bytes is stored", "gh", long, "push", `{}`, http.StatusAccepted, "accepted"},
		{"event type of 1024 bytes is stored", "gh", "ok-long-type", long, `{}`, http.StatusAccepted, "accepted"},
		{"id of 1025 bytes", "gh", long + "x", "push", `{}`, http.StatusBadRequest, "bad_delivery_id"},
		{"id over 8 KiB, once silently the body hash", "gh", strings.Repeat("y", 9<<10), "push", `{}`, http.StatusBadRequest, "bad_delivery_id"},
		{"id not UTF-8", "gh", "id-\xff\xfe", "push", `{}`, http.StatusBadRequest, "bad_delivery_id"},
		{"event type not UTF-8", "gh", "bad-type-utf8", "push\xc3\x28", `{}`, http.StatusBadRequest, "bad_event_type"},
		{"event type over 8 KiB, once dropped but forwarded", "gh", "bad-type-long", strings.Repeat("z", 9<<10), `{}`, http.StatusBadRequest, "bad_event_type"},
		{"id with NUL, from JSON", "json", "", "", `{"id":"evt\u0000x","type":"push"}`, http.StatusBadRequest, "bad_delivery_id"},
		{"event type with NUL, from JSON", "json", "", "", `{"id":"evt-nul-type","type":"pu\u0000sh"}`, http.StatusBadRequest, "bad_event_type"},
		{"id with a newline, from JSON", "json", "", "", `{"id":"evt\nx","type":"push"}`, http.StatusBadRequest, "bad_delivery_id"},
		{"UTF-8 id from JSON is stored", "json", "", "", `{"id":"évt-ü","type":"push"}`, http.StatusAccepted, "accepted"},
	}
	backends := []struct {
		name    string
		storage func(t *testing.T) map[string]any // nil: the harness's SQLite file
	}{
		{"sqlite", nil},
		{"postgres", func(t *testing.T) map[string]any {
			return postgresStorage(testutil.FreshSchema(t, testutil.PostgresDSN(t)))
		}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			h := newHarness(t)
			app := map[string]any{"workers": 0}
			if b.storage != nil {
				app["storage"] = b.storage(t)
			}
			h.load(t, app, plain, fromJSON)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					body := []byte(tt.body)
					hdr := signed(t, testSecret, "", "", body)
					hdr.Del("X-Github-Delivery")
					hdr.Del("X-Github-Event")
					if tt.id != "" {
						hdr["X-Github-Delivery"] = []string{tt.id}
						hdr["X-Github-Event"] = []string{tt.event}
					}
					resp := h.do(t, http.MethodPost, "/hooks/"+tt.source, hdr, bytes.NewReader(body))
					if resp.status != tt.wantStatus || resp.header.Get("Echo-Outcome") != tt.wantOutcome {
						t.Errorf("got %d %q, want %d %q", resp.status, resp.header.Get("Echo-Outcome"), tt.wantStatus, tt.wantOutcome)
					}
				})
			}
			// Only the accepted ones are stored.
			var want int
			for _, tt := range tests {
				if tt.wantStatus == http.StatusAccepted {
					want++
				}
			}
			st, err := h.store(t).Stats(t.Context(), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if st.Events != int64(want) {
				t.Errorf("%d events stored, want %d", st.Events, want)
			}
		})
	}
}

// TestReceiverAcceptStatus: a stored event, and its duplicate, are answered
// with the scheme's accept status: 200 for mailgun, which retries a 202
// for hours, 202 for every other scheme.
func TestReceiverAcceptStatus(t *testing.T) {
	tests := []struct {
		name       string
		scheme     string
		sign       func(t *testing.T, body []byte) ([]byte, http.Header)
		wantStatus int
	}{
		{
			name: "mailgun answers 200", scheme: "mailgun", wantStatus: http.StatusOK,
			sign: func(t *testing.T, body []byte) ([]byte, http.Header) {
				b, h, err := signature.SignBody("mailgun", testSecret, body, signature.SignOptions{ID: "mg-token-1"})
				if err != nil {
					t.Fatal(err)
				}
				return b, h
			},
		},
		{
			name: "github answers 202", scheme: "github", wantStatus: http.StatusAccepted,
			sign: func(t *testing.T, body []byte) ([]byte, http.Header) {
				return body, signed(t, testSecret, "gh-1", "push", body)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.load(t, map[string]any{"workers": 0}, receiverConfig{
				"handler": "webhook_receiver", "source": "s", "scheme": tt.scheme, "secrets": []string{testSecret},
				"targets": []map[string]any{httpTarget("", "http://127.0.0.1:9/")},
			})
			body, hdr := tt.sign(t, []byte(`{"event-data":{"event":"delivered"}}`))
			for _, want := range []string{"accepted", "duplicate"} {
				got := h.do(t, http.MethodPost, "/hooks/s", hdr, bytes.NewReader(body))
				if got.status != tt.wantStatus || got.header.Get("Echo-Outcome") != want {
					t.Errorf("%s: answer %d, outcome %q; want %d, %q", want, got.status, got.header.Get("Echo-Outcome"), tt.wantStatus, want)
				}
			}
		})
	}
}

// TestReceiverOrderingKey: the key is read from the JSON body after
// verification; events of one key wait behind each other, other keys and
// events without a key do not, and a key too long to store is hashed,
// which keeps equal keys equal.
func TestReceiverOrderingKey(t *testing.T) {
	rc := githubReceiver("shop", httpTarget("", "http://127.0.0.1:9/"))
	rc["ordering_key"] = map[string]string{"json": "order.id"}
	h := newHarness(t)
	h.load(t, map[string]any{"workers": 0}, rc)
	long := strings.Repeat("k", 300)
	sends := []struct {
		id, body string
		want     queue.Status
	}{
		{"a1", `{"order":{"id":"A"}}`, queue.StatusPending},
		{"a2", `{"order":{"id":"A"}}`, queue.StatusBlocked},
		{"b1", `{"order":{"id":"B"}}`, queue.StatusPending},
		{"none", `{"order":{}}`, queue.StatusPending},
		{"n1", `{"order":{"id":42}}`, queue.StatusPending},
		{"n2", `{"order":{"id":42}}`, queue.StatusBlocked},
		{"long1", `{"order":{"id":"` + long + `"}}`, queue.StatusPending},
		{"long2", `{"order":{"id":"` + long + `"}}`, queue.StatusBlocked},
	}
	for _, s := range sends {
		if got := h.post(t, "shop", s.id, "order", []byte(s.body)); got != http.StatusAccepted {
			t.Fatalf("POST %s: status %d", s.id, got)
		}
	}
	got := map[string]queue.Status{}
	for _, j := range jobs(t, h.store(t)) {
		got[j.DeliveryID] = j.Status
	}
	for _, s := range sends {
		if got[s.id] != s.want {
			t.Errorf("job of %s is %s, want %s", s.id, got[s.id], s.want)
		}
	}
}

func TestReceiverOrderingKeyValidate(t *testing.T) {
	tests := []struct {
		name string
		key  OrderingKey
		want string // in the error; empty: valid
	}{
		{"header", OrderingKey{Header: "X-Key"}, ""},
		{"json, release", OrderingKey{JSON: "data.id", OnDead: "release"}, ""},
		{"neither", OrderingKey{OnDead: "hold"}, "ordering_key: set exactly one of header and json"},
		{"both", OrderingKey{Header: "X-Key", JSON: "id"}, "ordering_key: set exactly one of header and json"},
		{"bad on_dead", OrderingKey{JSON: "id", OnDead: "drop"}, `on_dead "drop" is not hold or release`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := &Receiver{Source: "shop", Scheme: "github", OrderingKey: &tt.key, secrets: []string{"s3cret"}}
			rc.provisionLimits()
			err := rc.provisionVerifier()
			if err == nil {
				err = rc.Validate()
			}
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate = %v, want an error with %q", err, tt.want)
			case tt.want == "" && rc.orderingHold != (tt.key.OnDead != "release"):
				t.Errorf("orderingHold = %v for on_dead %q", rc.orderingHold, tt.key.OnDead)
			}
		})
	}
}

// TestReceiverRedactsSlackForms: Slack's slash commands and interactivity
// requests are forms that carry the app's verification token
// (https://api.slack.com/slash-commands,
// https://docs.slack.dev/reference/interaction-payloads/block_actions-payload).
// They are accepted as sent, signature and all, and stored with the token
// replaced, the other fields as they were.
func TestReceiverRedactsSlackForms(t *testing.T) {
	const token = "gIkuvaNzQIHg97ATvDxqgjtO"
	tests := []struct {
		name, body, want string
	}{
		{
			name: "slash command",
			body: "token=" + token + "&team_id=T0001&command=%2Fweather&text=94070",
			want: "token=%5Bredacted%5D&team_id=T0001&command=%2Fweather&text=94070",
		},
		{
			name: "interactivity payload",
			body: "payload=" + url.QueryEscape(`{"type":"block_actions","token":"`+token+`","actions":[{"value":"click_me_123"}]}`),
			want: "payload=" + url.QueryEscape(`{"type":"block_actions","token":"[redacted]","actions":[{"value":"click_me_123"}]}`),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.load(t, map[string]any{"workers": 0}, receiverConfig{
				"handler": "webhook_receiver", "source": "slack", "scheme": "slack",
				"secrets": []string{"{env." + testSecretEnv + "}"},
				"targets": []map[string]any{httpTarget("", "http://127.0.0.1:9/")},
			})
			hdr, err := signature.Sign("slack", testSecret, []byte(tt.body), signature.SignOptions{})
			if err != nil {
				t.Fatal(err)
			}
			hdr.Set("Content-Type", "application/x-www-form-urlencoded")
			if got := h.do(t, http.MethodPost, "/hooks/slack", hdr, strings.NewReader(tt.body)); got.status != http.StatusAccepted {
				t.Fatalf("status %d %s, want 202", got.status, got.body)
			}
			j := onlyJob(t, h.store(t))
			if string(j.Payload) != tt.want {
				t.Errorf("stored payload\n%s\nwant\n%s", j.Payload, tt.want)
			}
			h.stop(t)
			if bytes.Contains(h.rawLogs(t), []byte(token)) {
				t.Error("the logs hold the verification token")
			}
		})
	}
}

// onlyJob returns the store's one job, whole; any other count fails t.
func onlyJob(t *testing.T, s queue.Store) queue.JobDetail {
	t.Helper()
	js := jobs(t, s)
	if len(js) != 1 {
		t.Fatalf("%d jobs, want 1", len(js))
	}
	j, err := s.GetJob(context.Background(), js[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	return j
}
