package httptarget

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddywebhook/caddywebhook/caddywebhook/targets/targettest"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/signature"
)

// httpTestNow is the clock of the targets under test.
var httpTestNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// client names the HTTP client a test's target sends with: the worker's
// own HTTP/1.1 exchange that http:// upstreams get (plain.go), or net/http's
// Transport, which https:// and proxied upstreams get. The target's tests
// run on both, so the fast path is held to the plain behaviour.
type client string

// forEachClient runs f as a subtest on each client.
func forEachClient(t *testing.T, f func(t *testing.T, c client)) {
	t.Helper()
	for _, c := range []client{"plain", "transport"} {
		t.Run(string(c), func(t *testing.T) {
			if c == "plain" {
				skipWithoutPlain(t)
			}
			f(t, c)
		})
	}
}

// httpTestSetup starts handler as the upstream and returns a provisioned,
// validated target pointing at it, sending with c. configure may adjust
// the target before Provision.
func httpTestSetup(t *testing.T, c client, handler http.Handler, configure func(*Target)) (*Target, *httptest.Server) {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	tgt := &Target{URL: srv.URL + "/hook", now: func() time.Time { return httpTestNow }}
	if configure != nil {
		configure(tgt)
	}
	if err := targettest.Provision(t, tgt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tgt.Cleanup() })
	if c == "transport" && tgt.plain != nil {
		tgt.plain.close()
		tgt.plain = nil
	}
	return tgt, srv
}

func TestTargetClassifiesStatus(t *testing.T) {
	forEachClient(t, func(t *testing.T, c client) {
		type retryAfter struct {
			after time.Duration
			ok    bool
		}
		tests := []struct {
			name       string
			status     int
			retryAfter string
			want       string
			wantAfter  retryAfter
		}{
			{name: "200 done", status: 200, want: "done"},
			{name: "201 done", status: 201, want: "done"},
			{name: "204 done", status: 204, want: "done"},
			{name: "301 not followed, permanent", status: 301, want: "permanent"},
			{name: "400 permanent", status: 400, want: "permanent"},
			{name: "404 permanent", status: 404, want: "permanent"},
			{name: "408 transient", status: 408, want: "transient"},
			{name: "410 permanent", status: 410, want: "permanent"},
			{name: "425 transient", status: 425, want: "transient"},
			{name: "429 without Retry-After", status: 429, want: "transient"},
			{name: "429 Retry-After delta-seconds", status: 429, retryAfter: "120", want: "transient",
				wantAfter: retryAfter{120 * time.Second, true}},
			{name: "429 Retry-After HTTP-date", status: 429,
				retryAfter: httpTestNow.Add(90 * time.Second).Format(http.TimeFormat), want: "transient",
				wantAfter: retryAfter{90 * time.Second, true}},
			{name: "429 Retry-After HTTP-date in the past", status: 429,
				retryAfter: httpTestNow.Add(-time.Hour).Format(http.TimeFormat), want: "transient",
				wantAfter: retryAfter{0, true}},
			{name: "429 Retry-After garbage ignored", status: 429, retryAfter: "soon", want: "transient"},
			{name: "429 Retry-After negative ignored", status: 429, retryAfter: "-5", want: "transient"},
			{name: "500 transient", status: 500, want: "transient"},
			{name: "502 transient", status: 502, want: "transient"},
			{name: "503 transient", status: 503, want: "transient"},
			{name: "503 Retry-After delta-seconds", status: 503, retryAfter: "7", want: "transient",
				wantAfter: retryAfter{7 * time.Second, true}},
			{name: "400 Retry-After ignored, permanent", status: 400, retryAfter: "7", want: "permanent"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				var redirected atomic.Int32
				mux := http.NewServeMux()
				mux.HandleFunc("/hook", func(w http.ResponseWriter, r *http.Request) {
					if tt.retryAfter != "" {
						w.Header().Set("Retry-After", tt.retryAfter)
					}
					if tt.status >= 300 && tt.status < 400 {
						w.Header().Set("Location", "/elsewhere")
					}
					w.WriteHeader(tt.status)
				})
				mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) {
					redirected.Add(1)
				})
				tgt, _ := httpTestSetup(t, c, mux, nil)

				job := targettest.Job("http")
				err := tgt.Deliver(t.Context(), job)
				if got := targettest.Outcome(err); got != tt.want {
					t.Fatalf("outcome = %s (%v), want %s", got, err, tt.want)
				}
				// Every answer's status is kept with the attempt, a 2xx too.
				if job.Code != queue.CodeOf(tt.status) {
					t.Errorf("job.Code = %v, want %d", job.Code, tt.status)
				}
				if want := fmt.Sprintf("upstream answered %d", tt.status); err != nil && err.Error() != want {
					t.Errorf("error = %q, want %q", err, want)
				}
				after, ok := queue.RetryAfterOf(err)
				if (retryAfter{after, ok}) != tt.wantAfter {
					t.Errorf("RetryAfterOf = %v, %v; want %v, %v", after, ok, tt.wantAfter.after, tt.wantAfter.ok)
				}
				if n := redirected.Load(); n != 0 {
					t.Errorf("redirect followed %d times", n)
				}
			})
		}
	})
}

// TestTargetUnsendableMetadata: a delivery id or event type taken from
// a JSON body may hold a control character no header can carry. The job is
// parked at once, with the reason, instead of failing every retry.
func TestTargetUnsendableMetadata(t *testing.T) {
	forEachClient(t, func(t *testing.T, c client) {
		tests := []struct {
			name       string
			deliveryID string
			eventType  string
			header     queue.Header // one more stored header, as a transform sets
			want       string       // outcome
			wantErr    string       // in the error, for a failure
		}{
			{"plain values sent", "evt-1", "order.paid", queue.Header{}, "done", ""},
			{"tab is allowed", "evt\t1", "push", queue.Header{}, "done", ""},
			{"newline in the delivery id", "evt\r\nX-Injected: 1", "push", queue.Header{}, "permanent", "delivery id"},
			{"NUL in the event type", "evt-1", "push\x00", queue.Header{}, "permanent", "event type"},
			{"DEL in the delivery id", "evt\x7f", "push", queue.Header{}, "permanent", "delivery id"},
			{"newline in a header value", "evt-1", "push", queue.Header{Name: "X-Note", Value: "a\r\nX-Injected: 1"}, "permanent", "header X-Note"},
			{"space in a header name", "evt-1", "push", queue.Header{Name: "X Note", Value: "a"}, "permanent", "invalid header name"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				var calls atomic.Int32
				tgt, _ := httpTestSetup(t, c, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					calls.Add(1)
					if r.Header.Get("X-Injected") != "" {
						t.Errorf("header injected through the delivery id")
					}
				}), nil)
				job := targettest.Job("http")
				job.DeliveryID, job.EventType = tt.deliveryID, tt.eventType
				if tt.header.Name != "" {
					job.Headers = append(job.Headers, tt.header)
				}
				err := tgt.Deliver(t.Context(), job)
				if got := targettest.Outcome(err); got != tt.want {
					t.Fatalf("outcome = %s (%v), want %s", got, err, tt.want)
				}
				if tt.want == "done" {
					return
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error = %q, want it to name the %s", err, tt.wantErr)
				}
				if n := calls.Load(); n != 0 {
					t.Errorf("upstream called %d times, want 0", n)
				}
			})
		}
	})
}

func TestTargetErrorText(t *testing.T) {
	forEachClient(t, func(t *testing.T, c client) {
		const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		const token = "Bearer tok-0123456789"
		tests := []struct {
			name    string
			body    string
			want    string // prefix of the error
			absent  []string
			maxBody int // bytes of body text after the prefix
		}{
			{
				name: "plain message kept",
				body: "database is down",
				want: "upstream answered 503: database is down",
			},
			{
				name:    "control bytes and newlines made printable",
				body:    "line one\nline\ttwo\x00\x1b[31mred\xff",
				want:    "upstream answered 503: line one line two\uFFFD\uFFFD[31mred\uFFFD",
				maxBody: 512 * 3,
			},
			{
				name:    "long body cut at 512 bytes",
				body:    strings.Repeat("a", 511) + "é" + strings.Repeat("b", 100) + "TAIL-MARKER",
				want:    "upstream answered 503: " + strings.Repeat("a", 511),
				absent:  []string{"TAIL-MARKER", "b", "\uFFFD"},
				maxBody: 512,
			},
			{
				name:   "echoed secrets redacted",
				body:   "you sent " + token + " and I know " + secret,
				want:   "upstream answered 503: you sent [redacted] and I know [redacted]",
				absent: []string{secret, "tok-0123456789"},
			},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				tgt, _ := httpTestSetup(t, c, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.WriteHeader(http.StatusServiceUnavailable)
					io.WriteString(w, tt.body)
				}), func(tgt *Target) {
					tgt.SignSecret = secret
					tgt.Headers = http.Header{"Authorization": {token}}
				})
				err := tgt.Deliver(t.Context(), targettest.Job("http"))
				if err == nil {
					t.Fatal("Deliver succeeded on a 503")
				}
				msg := err.Error()
				if !strings.HasPrefix(msg, tt.want) {
					t.Errorf("error = %q, want prefix %q", msg, tt.want)
				}
				for _, s := range tt.absent {
					if strings.Contains(msg, s) {
						t.Errorf("error = %q contains %q", msg, s)
					}
				}
				if tt.maxBody > 0 {
					if n := len(msg) - len("upstream answered 503: "); n > tt.maxBody {
						t.Errorf("body text is %d bytes, want at most %d", n, tt.maxBody)
					}
				}
				for _, r := range msg {
					if !unicode.IsPrint(r) {
						t.Errorf("error = %q contains unprintable %U", msg, r)
					}
				}
				if !utf8.ValidString(msg) {
					t.Errorf("error = %q is not valid UTF-8", msg)
				}
			})
		}
	})
}

// TestTargetErrorRedactsURLCredentials: an upstream that echoes the
// request line, as many frameworks' 404 pages do, must not get the URL's
// token or password into the job's last error.
func TestTargetErrorRedactsURLCredentials(t *testing.T) {
	forEachClient(t, func(t *testing.T, c client) {
		const token, password = "hunter2-query-secret", "pa55word-in-userinfo"
		tests := []struct {
			name  string
			query string
		}{
			{"plain token", "token=" + token},
			{"escaped token", "token=" + token + "%2Fx&n=1"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				tgt, _ := httpTestSetup(t, c, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.WriteHeader(http.StatusNotFound)
					user, pw, _ := r.BasicAuth()
					fmt.Fprintf(w, "Cannot POST %s (user %s, password %s, decoded %q, Authorization: %s)",
						r.URL.RequestURI(), user, pw, r.URL.Query().Get("token"), r.Header.Get("Authorization"))
				}), func(tgt *Target) {
					tgt.URL = strings.Replace(tgt.URL, "http://", "http://user:"+password+"@", 1) + "?" + tt.query
				})
				err := tgt.Deliver(t.Context(), targettest.Job("http"))
				if got := targettest.Outcome(err); got != "permanent" {
					t.Fatalf("outcome = %s (%v), want permanent", got, err)
				}
				msg := err.Error()
				if !strings.HasPrefix(msg, "upstream answered 404: Cannot POST /hook?") {
					t.Errorf("error = %q, want the echoed request line", msg)
				}
				encoded := base64.StdEncoding.EncodeToString([]byte("user:" + password))
				for _, s := range []string{token, password, encoded} {
					if strings.Contains(msg, s) {
						t.Errorf("error = %q contains %q", msg, s)
					}
				}
			})
		}
	})
}

func TestTargetNetworkError(t *testing.T) {
	forEachClient(t, func(t *testing.T, c client) {
		tgt, srv := httpTestSetup(t, c, http.NotFoundHandler(), func(tgt *Target) {
			tgt.URL += "?token=hunter2-query-secret"
		})
		srv.Close() // nothing listens any more: connection refused

		job := targettest.Job("http")
		err := tgt.Deliver(t.Context(), job)
		if got := targettest.Outcome(err); got != "transient" {
			t.Fatalf("outcome = %s (%v), want transient", got, err)
		}
		if _, ok := queue.RetryAfterOf(err); ok {
			t.Errorf("network error asks for a Retry-After wait")
		}
		if !job.Code.IsZero() {
			t.Errorf("job.Code = %v, want none without an answer", job.Code)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "post to upstream: ") || !strings.Contains(msg, "refused") {
			t.Errorf("error = %q, want a connection refused", msg)
		}
		if strings.Contains(msg, "hunter2") || strings.Contains(msg, "/hook") {
			t.Errorf("error = %q repeats the URL", msg)
		}
	})
}

// TestTargetResponseHeaderLimit: an upstream whose answer carries
// megabytes of headers fails the attempt, transiently and saying why,
// instead of being read into memory (Go's default limit is 10 MB:
// net/http Transport.MaxResponseHeaderBytes).
func TestTargetResponseHeaderLimit(t *testing.T) {
	forEachClient(t, func(t *testing.T, c client) {
		tests := []struct {
			name    string
			headers int // 1 KiB headers in the answer
			want    string
		}{
			{"a few headers", 4, "done"},
			{"just under the limit", 60, "done"},
			{"7 MB of headers", 7000, "transient"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				value := strings.Repeat("h", 1000)
				tgt, _ := httpTestSetup(t, c, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					for i := range tt.headers {
						w.Header().Set(fmt.Sprintf("X-Pad-%04d", i), value)
					}
					w.WriteHeader(http.StatusOK)
				}), nil)
				err := tgt.Deliver(t.Context(), targettest.Job("http"))
				if got := targettest.Outcome(err); got != tt.want {
					t.Fatalf("outcome = %s (%v), want %s", got, err, tt.want)
				}
				if err != nil && !strings.Contains(err.Error(), "response headers exceeded 65536 bytes") {
					t.Errorf("error = %q, want it to say the headers were too large", err)
				}
			})
		}
	})
}

func TestTargetTimeout(t *testing.T) {
	forEachClient(t, func(t *testing.T, c client) {
		release := make(chan struct{})
		tgt, _ := httpTestSetup(t, c, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}), func(tgt *Target) {
			tgt.Timeout = caddy.Duration(100 * time.Millisecond)
		})
		// Registered after the server's Close, so it runs first and Close does
		// not wait for a handler that a slow client left blocked.
		t.Cleanup(func() { close(release) })

		start := time.Now()
		err := tgt.Deliver(t.Context(), targettest.Job("http"))
		elapsed := time.Since(start)
		if got := targettest.Outcome(err); got != "transient" {
			t.Fatalf("outcome = %s (%v), want transient", got, err)
		}
		if want := "post to upstream: timed out after 100ms"; err.Error() != want {
			t.Errorf("error = %q, want %q", err, want)
		}
		if elapsed > 5*time.Second {
			t.Errorf("Deliver took %v with a 100ms timeout", elapsed)
		}
	})
}

func TestTargetCancelled(t *testing.T) {
	forEachClient(t, func(t *testing.T, c client) {
		arrived := make(chan struct{})
		release := make(chan struct{})
		tgt, _ := httpTestSetup(t, c, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(arrived)
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}), nil)
		t.Cleanup(func() { close(release) })

		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			<-arrived
			cancel()
		}()
		err := tgt.Deliver(ctx, targettest.Job("http"))
		if !errors.Is(err, context.Canceled) || queue.IsPermanent(err) {
			t.Fatalf("Deliver = %v, want a transient context.Canceled", err)
		}
	})
}

// httpTestRequest is what the upstream saw.
type httpTestRequest struct {
	header http.Header
	host   string
	method string
	body   []byte
}

// httpTestRecorder answers 204 and sends each request it sees on the
// returned channel.
func httpTestRecorder(t *testing.T) (http.Handler, <-chan httpTestRequest) {
	t.Helper()
	seen := make(chan httpTestRequest, 16)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read request body: %v", err)
		}
		seen <- httpTestRequest{header: r.Header.Clone(), host: r.Host, method: r.Method, body: body}
		w.WriteHeader(http.StatusNoContent)
	}), seen
}

func TestTargetForwardsRequest(t *testing.T) {
	forEachClient(t, func(t *testing.T, c client) {
		t.Setenv("CADDYWEBHOOK_TEST_TOKEN", "s3cr3t-token")
		handler, seen := httpTestRecorder(t)
		tgt, _ := httpTestSetup(t, c, handler, func(tgt *Target) {
			tgt.Headers = http.Header{
				"x-origin":         {"caddy"},
				"Authorization":    {"Bearer {env.CADDYWEBHOOK_TEST_TOKEN}"},
				"Host":             {"upstream.internal"},
				"X-Webhook-Source": {"spoofed by config"},
			}
		})

		job := targettest.Job("http")
		job.Payload = make([]byte, 4096)
		rand.Read(job.Payload)
		job.Payload[0] = 0xff // never valid UTF-8: the body must travel as bytes
		job.Attempt = 3
		if err := tgt.Deliver(t.Context(), job); err != nil {
			t.Fatalf("Deliver: %v", err)
		}
		req := <-seen

		if req.method != http.MethodPost {
			t.Errorf("method = %s, want POST", req.method)
		}
		if !bytes.Equal(req.body, job.Payload) {
			t.Errorf("body differs from the payload (%d bytes, want %d)", len(req.body), len(job.Payload))
		}
		if req.host != "upstream.internal" {
			t.Errorf("Host = %q, want upstream.internal", req.host)
		}
		want := map[string]string{
			"Content-Type":          "application/json",
			"X-Github-Event":        "push",
			"X-Origin":              "caddy",
			"Authorization":         "Bearer s3cr3t-token",
			"User-Agent":            "caddywebhook",
			"X-Webhook-Delivery-Id": job.DeliveryID,
			"X-Webhook-Source":      "github",
			"X-Webhook-Event-Type":  "push",
			"X-Webhook-Attempt":     "3",
			"X-Webhook-Job-Id":      "42",
			"X-Webhook-Replay":      "", // a first delivery: absent
			"Webhook-Signature":     "",
		}
		for name, value := range want {
			if got := req.header.Values(name); value == "" && len(got) != 0 || value != "" && (len(got) != 1 || got[0] != value) {
				t.Errorf("header %s = %q, want %q", name, got, value)
			}
		}
	})
}

// TestTargetReplayHeaders: a resend is visible as one. The attempt
// number keeps counting across replays, and X-Webhook-Replay, absent on a
// first delivery, counts the replays, whatever a static header says.
func TestTargetReplayHeaders(t *testing.T) {
	forEachClient(t, func(t *testing.T, c client) {
		tests := []struct {
			name               string
			attempt, replays   int
			wantAttempt, wantR string
		}{
			{"first delivery", 1, 0, "1", ""},
			{"retry", 2, 0, "2", ""},
			{"after one replay", 4, 1, "4", "1"},
			{"after two replays", 7, 2, "7", "2"},
		}
		handler, seen := httpTestRecorder(t)
		tgt, _ := httpTestSetup(t, c, handler, func(tgt *Target) {
			tgt.Headers = http.Header{"X-Webhook-Replay": {"spoofed by config"}}
		})
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				job := targettest.Job("http")
				job.Attempt, job.Replays = tt.attempt, tt.replays
				if err := tgt.Deliver(t.Context(), job); err != nil {
					t.Fatalf("Deliver: %v", err)
				}
				req := <-seen
				if got := req.header.Get("X-Webhook-Attempt"); got != tt.wantAttempt {
					t.Errorf("X-Webhook-Attempt = %q, want %q", got, tt.wantAttempt)
				}
				if got := req.header.Values("X-Webhook-Replay"); tt.wantR == "" && len(got) != 0 || tt.wantR != "" && (len(got) != 1 || got[0] != tt.wantR) {
					t.Errorf("X-Webhook-Replay = %q, want %q", got, tt.wantR)
				}
			})
		}
	})
}

// TestTargetURLUserinfo: credentials in the target URL travel as Basic
// auth, as an http.Client would send them, unless the config sets its own
// Authorization header; they never travel in the request line.
func TestTargetURLUserinfo(t *testing.T) {
	forEachClient(t, func(t *testing.T, c client) {
		tests := []struct {
			name     string
			userinfo string
			headers  http.Header
			want     []string
		}{
			{"user and password", "deliver:pa55-word", nil, []string{"Basic " + base64.StdEncoding.EncodeToString([]byte("deliver:pa55-word"))}},
			{"user only", "deliver", nil, []string{"Basic " + base64.StdEncoding.EncodeToString([]byte("deliver:"))}},
			{"configured header wins", "deliver:pa55-word", http.Header{"Authorization": {"Bearer tok"}}, []string{"Bearer tok"}},
			{"no userinfo", "", nil, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				handler, seen := httpTestRecorder(t)
				tgt, _ := httpTestSetup(t, c, handler, func(tgt *Target) {
					if tt.userinfo != "" {
						tgt.URL = strings.Replace(tgt.URL, "http://", "http://"+tt.userinfo+"@", 1)
					}
					tgt.Headers = tt.headers
				})
				if err := tgt.Deliver(t.Context(), targettest.Job("http")); err != nil {
					t.Fatalf("Deliver: %v", err)
				}
				req := <-seen
				if got := req.header.Values("Authorization"); !slices.Equal(got, tt.want) {
					t.Errorf("Authorization = %q, want %q", got, tt.want)
				}
			})
		}
	})
}

func TestTargetEventTypeHeaderOmittedWhenEmpty(t *testing.T) {
	forEachClient(t, func(t *testing.T, c client) {
		handler, seen := httpTestRecorder(t)
		tgt, _ := httpTestSetup(t, c, handler, nil)
		job := targettest.Job("http")
		job.EventType = ""
		job.Headers = []queue.Header{{Name: "X-Webhook-Event-Type", Value: "stored"}}
		if err := tgt.Deliver(t.Context(), job); err != nil {
			t.Fatalf("Deliver: %v", err)
		}
		if got := (<-seen).header.Values("X-Webhook-Event-Type"); len(got) != 0 {
			t.Errorf("X-Webhook-Event-Type = %q, want none", got)
		}
	})
}

func TestTargetSignsRequest(t *testing.T) {
	forEachClient(t, func(t *testing.T, c client) {
		key := make([]byte, 32)
		rand.Read(key)
		secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
		t.Setenv("CADDYWEBHOOK_TEST_SIGN_SECRET", secret)
		handler, seen := httpTestRecorder(t)
		tgt, _ := httpTestSetup(t, c, handler, func(tgt *Target) {
			tgt.SignSecret = "{env.CADDYWEBHOOK_TEST_SIGN_SECRET}"
			tgt.now = time.Now // the verifier checks the timestamp against its clock
		})

		deliver := func(job *queue.Job) httpTestRequest {
			t.Helper()
			if err := tgt.Deliver(t.Context(), job); err != nil {
				t.Fatalf("Deliver: %v", err)
			}
			return <-seen
		}
		job := targettest.Job("http")
		first := deliver(job)
		job.Attempt = 2
		retry := deliver(job)
		other := targettest.Job("http")
		other.Target = "http-2"
		otherTarget := deliver(other)

		verifier, err := signature.New(signature.Config{Scheme: signature.SchemeStandard, Secrets: []string{secret}})
		if err != nil {
			t.Fatalf("signature.New: %v", err)
		}
		res, err := verifier.Verify(signature.Request{Method: "POST", Header: first.header, Body: first.body})
		if err != nil {
			t.Fatalf("forwarded request does not verify: %v", err)
		}
		if res.DeliveryID != first.header.Get("webhook-id") || !strings.HasPrefix(res.DeliveryID, "msg_") {
			t.Errorf("verified id = %q, webhook-id = %q", res.DeliveryID, first.header.Get("webhook-id"))
		}
		if _, err := verifier.Verify(signature.Request{Method: "POST", Header: first.header, Body: append([]byte(" "), first.body...)}); !errors.Is(err, signature.ErrNoMatch) {
			t.Errorf("altered body verifies: %v", err)
		}
		wrongKey := make([]byte, 32)
		rand.Read(wrongKey)
		wrong, err := signature.New(signature.Config{Scheme: signature.SchemeStandard,
			Secrets: []string{"whsec_" + base64.StdEncoding.EncodeToString(wrongKey)}})
		if err != nil {
			t.Fatalf("signature.New: %v", err)
		}
		if _, err := wrong.Verify(signature.Request{Method: "POST", Header: first.header, Body: first.body}); !errors.Is(err, signature.ErrNoMatch) {
			t.Errorf("another secret verifies: %v", err)
		}

		if a, b := first.header.Get("webhook-id"), retry.header.Get("webhook-id"); a != b {
			t.Errorf("webhook-id changed between attempts: %q, %q", a, b)
		}
		if a, b := first.header.Get("webhook-id"), otherTarget.header.Get("webhook-id"); a == b {
			t.Errorf("two targets of one event share webhook-id %q", a)
		}

		config, err := json.Marshal(tgt)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		if strings.Contains(string(config), secret) || !strings.Contains(string(config), "{env.CADDYWEBHOOK_TEST_SIGN_SECRET}") {
			t.Errorf("config = %s, want the placeholder and not the secret", config)
		}
	})
}

func TestTargetReusesConnections(t *testing.T) {
	forEachClient(t, func(t *testing.T, c client) {
		var mu sync.Mutex
		conns := map[string]int{} // requests per client address: one per connection
		tgt, _ := httpTestSetup(t, c, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			conns[r.RemoteAddr]++
			calls := 0
			for _, n := range conns {
				calls += n
			}
			mu.Unlock()
			// Alternate a failure and a success, both with a body the target
			// must drain for the connection to be reused.
			if calls%2 == 1 {
				w.WriteHeader(http.StatusBadGateway)
			}
			w.Write(bytes.Repeat([]byte("x"), 20<<10))
		}), nil)
		for range 6 {
			_ = tgt.Deliver(t.Context(), targettest.Job("http"))
		}
		mu.Lock()
		defer mu.Unlock()
		if len(conns) != 1 {
			t.Errorf("6 sequential deliveries used %d connections (%v), want 1", len(conns), conns)
		}
		for _, n := range conns {
			if n != 6 {
				t.Errorf("upstream saw %d requests, want 6", n)
			}
		}
	})
}

func TestTargetConfigErrors(t *testing.T) {
	t.Setenv("CADDYWEBHOOK_TEST_EMPTY", "")
	tests := []struct {
		name   string
		target Target
		want   string // in the Provision or Validate error
	}{
		{name: "url missing", target: Target{}, want: "url: "},
		{name: "url relative", target: Target{URL: "/hook"}, want: "url: scheme must be http or https"},
		{name: "url ftp", target: Target{URL: "ftp://example.com/hook"}, want: "url: scheme must be http or https"},
		{name: "url without host", target: Target{URL: "http:///hook"}, want: "url: must be absolute"},
		{name: "url unknown placeholder", target: Target{URL: "http://h/{webhook.event_type}"}, want: "url: a placeholder in it is unknown"},
		{name: "url empty env", target: Target{URL: "{env.CADDYWEBHOOK_TEST_EMPTY}"}, want: "url: placeholder {env.CADDYWEBHOOK_TEST_EMPTY} is empty or unset"},
		{name: "negative timeout", target: Target{URL: "http://h/", Timeout: -1}, want: "timeout: must not be negative"},
		{name: "bad header name", target: Target{URL: "http://h/", Headers: http.Header{"Bad Name": {"v"}}}, want: `headers: invalid header name "Bad Name"`},
		{name: "sign secret not base64", target: Target{URL: "http://h/", SignSecret: "whsec_not*base64!"}, want: "sign_secret: "},
		{name: "sign secret empty env", target: Target{URL: "http://h/", SignSecret: "{env.CADDYWEBHOOK_TEST_EMPTY}"}, want: "sign_secret: placeholder {env.CADDYWEBHOOK_TEST_EMPTY} is empty or unset"},
		{name: "header empty env", target: Target{URL: "http://h/", Headers: http.Header{"Authorization": {"Bearer {env.CADDYWEBHOOK_TEST_EMPTY}"}}}, want: "headers: Authorization: placeholder {env.CADDYWEBHOOK_TEST_EMPTY} is empty or unset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tgt := tt.target
			err := targettest.Provision(t, &tgt)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
			if tt.target.SignSecret != "" && strings.Contains(err.Error(), "not*base64") {
				t.Errorf("error %q repeats the secret", err)
			}
		})
	}
}

// TestTargetConfigErrorsKeepSecrets: a literal secret with braces in it
// reads as a placeholder that is not one; the error says so without
// quoting any part of the secret. Caddy's replacer quotes the brace pair
// ("unrecognized placeholder {…}"), which is how the forwarder's own
// signing secret, or a token in the URL, reached the load error.
func TestTargetConfigErrorsKeepSecrets(t *testing.T) {
	const secret = "s3cr3t-part-of-the-key"
	tests := []struct {
		name   string
		target Target
		want   string
	}{
		{"sign_secret", Target{URL: "http://h/", SignSecret: "whsec_c2VjcmV0{" + secret + "}"}, "sign_secret: a placeholder in it is unknown"},
		{"url", Target{URL: "http://h/hook?token={" + secret + "}"}, "url: a placeholder in it is unknown"},
		{"header", Target{URL: "http://h/", Headers: http.Header{"X-Token": {"{" + secret + "}"}}}, "headers: X-Token: a placeholder in it is unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tgt := tt.target
			err := targettest.Provision(t, &tgt)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q quotes the secret", err)
			}
		})
	}
}

func TestTargetUnmarshalCaddyfile(t *testing.T) {
	targettest.CheckCaddyfile(t, []targettest.CaddyfileCase[Target]{
		{
			Name:  "url only",
			Input: `http http://127.0.0.1:9000/build`,
			Want:  Target{URL: "http://127.0.0.1:9000/build"},
		},
		{
			Name: "every option",
			Input: `http https://hooks.internal/build {
				timeout 30s
				header X-Origin caddy
				header X-Origin edge
				header Authorization "Bearer {env.TOKEN}"
				sign {env.INTERNAL_SECRET}
			}`,
			Want: Target{
				URL:        "https://hooks.internal/build",
				Timeout:    caddy.Duration(30 * time.Second),
				Headers:    http.Header{"X-Origin": {"caddy", "edge"}, "Authorization": {"Bearer {env.TOKEN}"}},
				SignSecret: "{env.INTERNAL_SECRET}",
			},
		},
		{Name: "url missing", Input: `http`, WantErr: "missing the upstream URL"},
		{Name: "extra argument", Input: `http http://h/ extra`, WantErr: `unexpected argument "extra"`},
		{Name: "unknown option", Input: "http http://h/ {\n retries 3\n}", WantErr: `unknown option "retries"`},
		{Name: "timeout missing", Input: "http http://h/ {\n timeout\n}", WantErr: "timeout: missing the duration"},
		{Name: "timeout bad", Input: "http http://h/ {\n timeout soon\n}", WantErr: "timeout: "},
		{Name: "timeout two values", Input: "http http://h/ {\n timeout 1s 2s\n}", WantErr: "timeout: takes one duration"},
		{Name: "header without value", Input: "http http://h/ {\n header X-Origin\n}", WantErr: "header: takes a name and a value"},
		{Name: "sign without secret", Input: "http http://h/ {\n sign\n}", WantErr: "sign: takes one secret"},
		{Name: "sign two secrets", Input: "http http://h/ {\n sign a b\n}", WantErr: "sign: takes one secret"},
	})
}

func TestTargetParseRetryAfter(t *testing.T) {
	tests := []struct {
		name  string
		value string
		want  time.Duration
		ok    bool
	}{
		{name: "empty", value: "", ok: false},
		{name: "zero", value: "0", want: 0, ok: true},
		{name: "seconds with spaces", value: " 30 ", want: 30 * time.Second, ok: true},
		{name: "huge seconds clamped", value: "99999999999999999999999", want: time.Duration(1<<63 - 1), ok: true},
		{name: "fraction rejected", value: "1.5", ok: false},
		{name: "IMF-fixdate", value: "Mon, 30 Nov 2026 12:02:00 GMT", want: 2 * time.Minute, ok: true},
		{name: "RFC 850 date", value: "Monday, 30-Nov-26 12:00:10 GMT", want: 10 * time.Second, ok: true},
		{name: "asctime date", value: "Mon Nov 30 12:00:05 2026", want: 5 * time.Second, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseRetryAfter(tt.value, httpTestNow)
			if got != tt.want || ok != tt.ok {
				t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tt.value, got, ok, tt.want, tt.ok)
			}
		})
	}
}
