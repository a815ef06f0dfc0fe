package caddywebhook_test

// FuzzReceiver fuzzes the receiver's request path in this process: Caddy
// is loaded (caddy.Load) with three receivers (github, stripe, standard)
// over a real SQLite file in a temp dir, and each input becomes one request
// handed to Caddy's HTTP server handler, the way a connection would. The
// invariants, for every input:
//
//   - no panic;
//   - a 2xx only for an event that is in the database afterwards (for a
//     new event, with the body byte for byte);
//   - no 2xx for a request without a valid signature (the fuzzer may add,
//     duplicate or replace signature headers after the harness signs), and
//     nothing stored by any request answered other than 2xx;
//   - the status is one the receiver documents, and never 503 (the store
//     is healthy).
//
// `go test` runs the seeds; a longer run:
//
//	go test -run '^$' -fuzz FuzzReceiver -fuzztime 5m -parallel 1 ./caddywebhook/

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// fuzzMaxBody is the receivers' max_body, small so that 413 is reachable.
const fuzzMaxBody = 4096

// The secrets of the fuzzed receivers.
const (
	fuzzGitHubSecret = "fuzz-secret-github"
	fuzzStripeSecret = "whsec_fuzz-secret-stripe"
)

var fuzzStandardSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("fuzz-secret-standard"))

// fuzzRoutes are the receivers, by the input's route byte.
var fuzzRoutes = []struct{ path, source, scheme, secret string }{
	{"/hooks/github", "github", "github", fuzzGitHubSecret},
	{"/hooks/stripe", "stripe", "stripe", fuzzStripeSecret},
	{"/hooks/standard", "polar", "standard", fuzzStandardSecret},
}

// fuzzTarget is an in-process Caddy with the receivers and a read-only
// handle on its database.
type fuzzTarget struct {
	server *caddyhttp.Server
	db     *sql.DB
}

func setupFuzzReceiver(f testing.TB) *fuzzTarget {
	f.Helper()
	dir := f.TempDir()
	dbPath := filepath.Join(dir, "queue.db")
	var routes []any
	for _, r := range fuzzRoutes {
		routes = append(routes, map[string]any{
			"match": []any{map[string]any{"path": []string{r.path}}},
			"handle": []any{
				// The receiver's placeholders, read when it answers.
				map[string]any{"handler": "headers", "response": map[string]any{"deferred": true, "set": map[string]any{
					"Fuzz-Outcome":     []string{"{webhook.outcome}"},
					"Fuzz-Delivery-Id": []string{"{webhook.delivery_id}"},
				}}},
				map[string]any{
					"handler": "webhook_receiver", "source": r.source, "scheme": r.scheme,
					"secrets": []string{r.secret}, "max_body": fuzzMaxBody, "tolerance": "5m",
					"targets": []any{map[string]any{"deliver": map[string]any{"kind": "http", "url": "http://127.0.0.1:9/unused"}}},
				},
			},
		})
	}
	cfg, err := json.Marshal(map[string]any{
		"admin":   map[string]any{"disabled": true, "config": map[string]any{"persist": false}},
		"logging": map[string]any{"logs": map[string]any{"default": map[string]any{"writer": map[string]any{"output": "discard"}}}},
		"storage": map[string]any{"module": "file_system", "root": filepath.Join(dir, "caddy")},
		"apps": map[string]any{
			// Receive only: no worker takes the jobs away while the
			// fuzzer looks for them. synchronous=normal keeps the
			// fsyncs from setting the pace; the invariants do not
			// depend on it.
			"webhook": map[string]any{"storage": map[string]any{"path": dbPath, "synchronous": "normal"}, "workers": 0},
			"http": map[string]any{"servers": map[string]any{"fuzz": map[string]any{
				"listen":          []string{"127.0.0.1:0"},
				"automatic_https": map[string]any{"disable": true},
				"routes":          routes,
			}}},
		},
	})
	if err != nil {
		f.Fatal(err)
	}
	if err := caddy.Load(cfg, true); err != nil {
		f.Fatalf("load caddy: %v", err)
	}
	f.Cleanup(func() { caddy.Stop() })
	app, err := caddy.ActiveContext().App("http")
	if err != nil {
		f.Fatalf("http app: %v", err)
	}
	srv := app.(*caddyhttp.App).Servers["fuzz"]
	if srv == nil {
		f.Fatal("no server fuzz")
	}
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: dbPath}).EscapedPath()+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	return &fuzzTarget{server: srv, db: db}
}

// events returns how many events are stored.
func (ft *fuzzTarget) events(t *testing.T) int {
	t.Helper()
	var n int
	if err := ft.db.QueryRow(`SELECT count(*) FROM events`).Scan(&n); err != nil {
		t.Fatalf("count events: %v", err)
	}
	return n
}

// payload returns the stored payload of (source, deliveryID), and whether
// the event exists.
func (ft *fuzzTarget) payload(t *testing.T, source, deliveryID string) ([]byte, bool) {
	t.Helper()
	var p []byte
	err := ft.db.QueryRow(`SELECT payload FROM events WHERE source = ? AND delivery_id = ?`, source, deliveryID).Scan(&p)
	if err == sql.ErrNoRows {
		return nil, false
	}
	if err != nil {
		t.Fatalf("read event: %v", err)
	}
	return p, true
}

// fuzzSigned names, per scheme, the headers whose values the signature
// covers or is.
var fuzzSigned = map[string][]string{
	"github":   {"X-Hub-Signature-256"},
	"stripe":   {"Stripe-Signature"},
	"standard": {"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"},
}

// fuzzSign sets the route's valid signature headers for body, signed at
// now+skew, with id as the delivery id where the scheme carries one in a
// header. It registers nothing for the log audit: nothing is logged here.
func fuzzSign(h http.Header, route int, id string, skew time.Duration, body []byte) {
	r := fuzzRoutes[route]
	ts := strconv.FormatInt(time.Now().Add(skew).Unix(), 10)
	switch r.scheme {
	case "github":
		h.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(hmacSHA256([]byte(r.secret), body)))
		h.Set("X-GitHub-Delivery", id)
		h.Set("X-GitHub-Event", "push")
	case "stripe":
		h.Set("Stripe-Signature", "t="+ts+",v1="+hex.EncodeToString(hmacSHA256([]byte(r.secret), append([]byte(ts+"."), body...))))
	case "standard":
		key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(r.secret, "whsec_"))
		msg := bytes.Join([][]byte{[]byte(id), []byte(ts), body}, []byte("."))
		h.Set("Webhook-Id", id)
		h.Set("Webhook-Timestamp", ts)
		h.Set("Webhook-Signature", "v1,"+base64.StdEncoding.EncodeToString(hmacSHA256(key, msg)))
	}
}

func hmacSHA256(key, msg []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return m.Sum(nil)
}

// validToken reports whether s is an HTTP token (a method or header name):
// anything else never gets past Caddy's connection handling.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// validValue reports whether s may be a header value on the wire.
func validValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// parseFuzzHeaders turns "Name: value" lines into header operations: a line
// adds a value, a line starting with '=' replaces the header's values, so
// the fuzzer can both duplicate and break the signature headers.
func parseFuzzHeaders(h http.Header, blob string) {
	for _, line := range strings.Split(blob, "\n") {
		set := strings.HasPrefix(line, "=")
		line = strings.TrimPrefix(line, "=")
		name, value, ok := strings.Cut(line, ":")
		value = strings.TrimSpace(value)
		if !ok || !validToken(name) || !validValue(value) {
			continue
		}
		if set {
			h.Set(name, value)
		} else {
			h.Add(name, value)
		}
	}
}

// fuzzInput is one fuzzed request.
type fuzzInput struct {
	method  string
	route   uint8 // which receiver, modulo len(fuzzRoutes)
	sign    bool  // sign the body validly before the headers are applied
	id      string
	skew    int16 // seconds between now and the signed timestamp
	headers string
	body    []byte
}

// check sends in to the server, checks the invariants and returns the
// status and outcome; an input that no connection could carry returns 0.
func (ft *fuzzTarget) check(t *testing.T, in fuzzInput) (int, string) {
	t.Helper()
	if !validToken(in.method) || !validValue(in.id) {
		return 0, ""
	}
	r := int(in.route) % len(fuzzRoutes)
	rt := fuzzRoutes[r]
	h := http.Header{}
	if in.sign {
		fuzzSign(h, r, in.id, time.Duration(in.skew)*time.Second, in.body)
	}
	signed := h.Clone()
	parseFuzzHeaders(h, in.headers)
	// Signed means: the first value of every signed header (the one
	// verifiers read) is still the one fuzzSign set.
	authentic := in.sign
	for _, name := range fuzzSigned[rt.scheme] {
		authentic = authentic && len(h.Values(name)) > 0 && h.Values(name)[0] == signed.Get(name)
	}
	req := &http.Request{
		Method: in.method, URL: &url.URL{Path: rt.path}, RequestURI: rt.path,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Host: "fuzz.test", RemoteAddr: "192.0.2.1:4711",
		Header: h, Body: io.NopCloser(bytes.NewReader(in.body)), ContentLength: int64(len(in.body)),
	}
	req = req.WithContext(context.Background())
	before := ft.events(t)
	w := httptest.NewRecorder()
	ft.server.ServeHTTP(w, req)
	after := ft.events(t)
	status := w.Code
	outcome, deliveryID := w.Header().Get("Fuzz-Outcome"), w.Header().Get("Fuzz-Delivery-Id")

	switch status {
	case http.StatusAccepted, http.StatusBadRequest, http.StatusUnauthorized,
		http.StatusMethodNotAllowed, http.StatusRequestEntityTooLarge:
	default:
		t.Fatalf("status %d (outcome %q): not one the receiver answers with a healthy store", status, outcome)
	}
	if status/100 != 2 {
		if after != before {
			t.Fatalf("status %d, yet %d events were stored", status, after-before)
		}
		return status, outcome
	}
	if !authentic {
		t.Fatalf("a request without a valid signature got %d (outcome %q)", status, outcome)
	}
	if after-before > 1 {
		t.Fatalf("one request stored %d events", after-before)
	}
	stored, ok := ft.payload(t, rt.source, deliveryID)
	if !ok {
		t.Fatalf("202 (%s) for %s/%q, which is not in the database", outcome, rt.source, deliveryID)
	}
	switch outcome {
	case "accepted", "no_target":
		if after != before+1 {
			t.Fatalf("outcome %s, but %d events were stored", outcome, after-before)
		}
		if !bytes.Equal(stored, in.body) {
			t.Fatalf("stored payload (%d bytes, sha256 %x) is not the body (%d bytes, sha256 %x)",
				len(stored), sha256.Sum256(stored), len(in.body), sha256.Sum256(in.body))
		}
	case "duplicate":
		if after != before {
			t.Fatalf("a duplicate stored %d events", after-before)
		}
	default:
		t.Fatalf("202 with outcome %q", outcome)
	}
	return status, outcome
}

var fuzzSeedBody = []byte(`{"id":"evt_seed","type":"invoice.paid","data":{}}`)

// fuzzSeeds are FuzzReceiver's seed corpus and, with the status each must
// get, TestReceiverFuzzHarness's cases: they show that the harness signs
// validly and that check can tell the outcomes apart.
var fuzzSeeds = []struct {
	name string
	in   fuzzInput
	want string // outcome
}{
	{"github signed", fuzzInput{"POST", 0, true, "seed-gh-1", 0, "", fuzzSeedBody}, "accepted"},
	{"github signed again", fuzzInput{"POST", 0, true, "seed-gh-1", 0, "", fuzzSeedBody}, "duplicate"},
	{"stripe signed", fuzzInput{"POST", 1, true, "", 0, "", fuzzSeedBody}, "accepted"},
	{"standard signed", fuzzInput{"POST", 2, true, "msg_seed_1", 0, "", fuzzSeedBody}, "accepted"},
	{"github unsigned", fuzzInput{"POST", 0, false, "seed-gh-2", 0, "X-Hub-Signature-256: sha256=00", fuzzSeedBody}, "bad_signature"},
	{"github signature replaced", fuzzInput{"POST", 0, true, "seed-gh-3", 0, "=X-Hub-Signature-256: sha256=" + strings.Repeat("0", 64), fuzzSeedBody}, "bad_signature"},
	{"github second signature added", fuzzInput{"POST", 0, true, "seed-gh-4", 0, "X-Hub-Signature-256: sha256=" + strings.Repeat("0", 64), fuzzSeedBody}, "accepted"},
	{"stripe 10 minutes old", fuzzInput{"POST", 1, true, "", -600, "", fuzzSeedBody}, "stale_timestamp"},
	{"standard 10 minutes ahead", fuzzInput{"POST", 2, true, "msg_seed_2", 600, "", fuzzSeedBody}, "stale_timestamp"},
	{"stripe signed non-JSON", fuzzInput{"POST", 1, true, "", 0, "", []byte("\xff\xfe not json")}, "accepted"},
	{"github signed empty body", fuzzInput{"POST", 0, true, "seed-gh-empty", 0, "", nil}, "accepted"},
	{"github signed, too large", fuzzInput{"POST", 0, true, "seed-gh-big", 0, "", bytes.Repeat([]byte("a"), fuzzMaxBody+1)}, "too_large"},
	{"github GET", fuzzInput{"GET", 0, true, "seed-gh-get", 0, "", fuzzSeedBody}, "method_not_allowed"},
	{"standard PUT", fuzzInput{"PUT", 2, true, "msg_seed_put", 0, "", fuzzSeedBody}, "method_not_allowed"},
	{"stripe two junk headers", fuzzInput{"POST", 1, false, "", 0, "Stripe-Signature: t=1,v1=00\nStripe-Signature: t=2", fuzzSeedBody}, "bad_signature"},
	{"standard junk", fuzzInput{"POST", 2, false, "", 0, "Webhook-Id: x\nWebhook-Timestamp: 99999999999999999999\nWebhook-Signature: v1,AAAA v2,BBBB", fuzzSeedBody}, "bad_signature"},
	{"github empty delivery header", fuzzInput{"POST", 0, true, "", 0, "=X-GitHub-Delivery: ", fuzzSeedBody}, "accepted"},
	{"standard 9000-byte id", fuzzInput{"POST", 2, true, strings.Repeat("i", 9000), 0, "", fuzzSeedBody}, "bad_signature"},
}

func FuzzReceiver(f *testing.F) {
	ft := setupFuzzReceiver(f)
	for _, s := range fuzzSeeds {
		f.Add(s.in.method, s.in.route, s.in.sign, s.in.id, s.in.skew, s.in.headers, s.in.body)
	}
	f.Fuzz(func(t *testing.T, method string, route uint8, sign bool, id string, skew int16, headers string, body []byte) {
		ft.check(t, fuzzInput{method, route, sign, id, skew, headers, body})
	})
}

// TestReceiverFuzzHarness runs the seeds in order and checks each one's
// outcome, so that FuzzReceiver's invariants are checked on inputs that
// reach every outcome, 202 included.
func TestReceiverFuzzHarness(t *testing.T) {
	ft := setupFuzzReceiver(t)
	for _, s := range fuzzSeeds {
		t.Run(s.name, func(t *testing.T) {
			if _, got := ft.check(t, s.in); got != s.want {
				t.Errorf("outcome %q, want %q", got, s.want)
			}
		})
	}
}
