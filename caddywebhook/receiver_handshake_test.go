package caddywebhook

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddywebhook/caddywebhook/signature"
)

// TestReceiverHandshakes sends each scheme's handshake to an in-process
// Caddy: the answer is the scheme's, nothing is stored, and the access log
// says handshake; a forged one is 401, and GET is 405 for the schemes
// without a GET handshake.
func TestReceiverHandshakes(t *testing.T) {
	receiver := func(source, scheme string, extra map[string]any) receiverConfig {
		rc := receiverConfig{
			"handler": "webhook_receiver", "source": source, "scheme": scheme, "secrets": []string{testSecret},
			"targets": []map[string]any{httpTarget("", "http://127.0.0.1:9/")},
		}
		for k, v := range extra {
			rc[k] = v
		}
		return rc
	}
	slackSigned := func(body string) http.Header {
		h, err := signature.Sign("slack", testSecret, []byte(body), signature.SignOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	const challenge = `{"type":"url_verification","challenge":"c-123"}`
	issuedFile := filepath.Join(t.TempDir(), "asana.secret")
	notionFile := filepath.Join(t.TempDir(), "notion.secret")
	const notionToken = "secret_issued-0123"
	notionVerification := `{"verification_token":"` + notionToken + `"}`
	graphToken := "Validation: Testing client application reachability for subscription Request-Id: abc"
	// Discord's two PINGs, signed alike: an interaction's (type 1) wants
	// PONG, a webhook event's (type 0) 204 with an empty body
	// (https://discord.com/developers/docs/events/webhook-events).
	discord := receiver("discord", "discord", map[string]any{"secrets": nil, "public_keys": []string{discordTestPub}})
	discordSigned := func(body string) http.Header {
		h, err := signature.Sign("discord", discordTestSeed, []byte(body), signature.SignOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	const interactionPing = `{"application_id":"1234560123453231555","id":"1250000000000000000","token":"aW50ZXJhY3Rpb24","type":1,"version":1}`
	const eventPing = `{"version":1,"application_id":"1234560123453231555","type":0}`

	tests := []struct {
		name        string
		receiver    receiverConfig
		method      string
		path        string // after /hooks/<source>
		header      http.Header
		body        string
		wantStatus  int
		wantBody    string
		wantType    string
		wantOutcome string
		check       func(t *testing.T, got response)
	}{
		{
			name: "slack url_verification echoed", receiver: receiver("slack", "slack", nil),
			method: http.MethodPost, header: slackSigned(challenge), body: challenge,
			wantStatus: 200, wantBody: "c-123", wantType: "text/plain; charset=utf-8", wantOutcome: "handshake",
		},
		{
			name: "forged slack url_verification refused", receiver: receiver("slack", "slack", nil),
			method: http.MethodPost, header: slackSigned(challenge), body: strings.Replace(challenge, "c-123", "c-124", 1),
			wantStatus: 401, wantOutcome: "bad_signature",
		},
		{
			name: "meta GET verification echoed", receiver: receiver("meta", "meta", map[string]any{"verify_token": "{env." + testSecretEnv + "}"}),
			method: http.MethodGet, path: "?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=" + testSecret,
			wantStatus: 200, wantBody: "1158201444", wantType: "text/plain; charset=utf-8", wantOutcome: "handshake",
			check: func(t *testing.T, got response) {
				if got.header.Get("X-Content-Type-Options") != "nosniff" {
					t.Error("no nosniff")
				}
			},
		},
		{
			name: "meta GET with a wrong token refused", receiver: receiver("meta", "meta", map[string]any{"verify_token": "right"}),
			method: http.MethodGet, path: "?hub.mode=subscribe&hub.challenge=1&hub.verify_token=wrong",
			wantStatus: 401, wantOutcome: "bad_signature",
		},
		{
			name: "meta GET that is no handshake is 405", receiver: receiver("meta", "meta", nil),
			method: http.MethodGet, wantStatus: 405, wantOutcome: "method_not_allowed",
			check: func(t *testing.T, got response) {
				if got.header.Get("Allow") != "GET, POST" {
					t.Errorf("Allow = %q", got.header.Get("Allow"))
				}
			},
		},
		{
			name: "GET is 405 for a scheme without a GET handshake", receiver: receiver("slack", "slack", nil),
			method: http.MethodGet, path: "?challenge=1", wantStatus: 405, wantOutcome: "method_not_allowed",
		},
		{
			name: "asana secret written once and echoed", receiver: receiver("asana", "asana", map[string]any{"issued_secret_file": issuedFile}),
			method: http.MethodPost, header: http.Header{"X-Hook-Secret": {"issued-0123"}},
			wantStatus: 200, wantOutcome: "handshake",
			check: func(t *testing.T, got response) {
				if got.header.Get("X-Hook-Secret") != "issued-0123" {
					t.Errorf("X-Hook-Secret = %q", got.header.Get("X-Hook-Secret"))
				}
				b, err := os.ReadFile(issuedFile)
				if err != nil || string(b) != "issued-0123\n" {
					t.Errorf("issued secret file = %q, %v", b, err)
				}
				if fi, err := os.Stat(issuedFile); err != nil || fi.Mode().Perm() != 0o600 {
					t.Errorf("issued secret file mode = %v, %v", fi.Mode(), err)
				}
			},
		},
		{
			name: "asana new secret refused without issued_secret_file", receiver: receiver("asana", "asana", nil),
			method: http.MethodPost, header: http.Header{"X-Hook-Secret": {"issued-0123"}},
			wantStatus: 401, wantOutcome: "bad_signature",
		},
		{
			name: "notion verification token written once", receiver: receiver("notion", "notion", map[string]any{"issued_secret_file": notionFile}),
			method: http.MethodPost, header: http.Header{"Content-Type": {"application/json"}}, body: notionVerification,
			wantStatus: 200, wantOutcome: "handshake",
			check: func(t *testing.T, got response) {
				b, err := os.ReadFile(notionFile)
				if err != nil || string(b) != notionToken+"\n" {
					t.Errorf("notion token file = %q, %v", b, err)
				}
				if fi, err := os.Stat(notionFile); err != nil || fi.Mode().Perm() != 0o600 {
					t.Errorf("notion token file mode = %v, %v", fi.Mode(), err)
				}
			},
		},
		{
			// The file of the case above exists: the endpoint is no longer armed.
			name: "notion second token refused once the file exists", receiver: receiver("notion", "notion", map[string]any{"issued_secret_file": notionFile}),
			method: http.MethodPost, body: strings.Replace(notionVerification, "0123", "4567", 1),
			wantStatus: 401, wantOutcome: "bad_signature",
			check: func(t *testing.T, got response) {
				if b, _ := os.ReadFile(notionFile); string(b) != notionToken+"\n" {
					t.Errorf("notion token file = %q, want the first token", b)
				}
			},
		},
		{
			name: "notion token refused without issued_secret_file", receiver: receiver("notion", "notion", nil),
			method: http.MethodPost, body: notionVerification,
			wantStatus: 401, wantOutcome: "bad_signature",
		},
		{
			name: "msgraph validationToken echoed decoded", receiver: receiver("msgraph", "msgraph", nil),
			method: http.MethodPost, path: "?validationToken=" + url.QueryEscape(graphToken), header: http.Header{"Content-Type": {"text/plain"}},
			wantStatus: 200, wantBody: graphToken, wantType: "text/plain; charset=utf-8", wantOutcome: "handshake",
			check: func(t *testing.T, got response) {
				if got.header.Get("X-Content-Type-Options") != "nosniff" {
					t.Error("no nosniff")
				}
			},
		},
		{
			name: "discord interaction PING answered PONG", receiver: discord,
			method: http.MethodPost, header: discordSigned(interactionPing), body: interactionPing,
			wantStatus: 200, wantBody: `{"type":1}`, wantType: "application/json", wantOutcome: "handshake",
		},
		{
			name: "discord webhook-event PING answered 204", receiver: discord,
			method: http.MethodPost, header: discordSigned(eventPing), body: eventPing,
			wantStatus: 204, wantType: "application/json", wantOutcome: "handshake",
		},
		{
			name: "forged discord webhook-event PING refused", receiver: discord,
			method: http.MethodPost, header: discordSigned(eventPing), body: strings.Replace(eventPing, "1234", "1235", 1),
			wantStatus: 401, wantOutcome: "bad_signature",
		},
		{
			name: "msgraph notification with a forged clientState refused", receiver: receiver("msgraph", "msgraph", nil),
			method: http.MethodPost, body: `{"value":[{"clientState":"guess","changeType":"created"}]}`,
			wantStatus: 401, wantOutcome: "bad_signature",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.load(t, map[string]any{"workers": 0}, tt.receiver)
			var body io.Reader
			if tt.body != "" {
				body = bytes.NewReader([]byte(tt.body))
			}
			sub := tails.subscribe(tailFilter{source: tt.receiver["source"].(string)}, 0)
			if sub == nil {
				t.Fatal("no tail subscription")
			}
			defer tails.unsubscribe(sub)
			got := h.do(t, tt.method, "/hooks/"+tt.receiver["source"].(string)+tt.path, tt.header, body)
			if got.status != tt.wantStatus || string(got.body) != tt.wantBody {
				t.Errorf("answer = %d %q, want %d %q", got.status, got.body, tt.wantStatus, tt.wantBody)
			}
			// The live tail shows the status that was sent.
			select {
			case l := <-sub.lines:
				if l.Status != tt.wantStatus || l.Outcome != tt.wantOutcome {
					t.Errorf("tail line: %s %d, want %s %d", l.Outcome, l.Status, tt.wantOutcome, tt.wantStatus)
				}
			default:
				t.Error("no tail line for the request")
			}
			if tt.wantType != "" && got.header.Get("Content-Type") != tt.wantType {
				t.Errorf("Content-Type = %q, want %q", got.header.Get("Content-Type"), tt.wantType)
			}
			if o := got.header.Get("Echo-Outcome"); o != tt.wantOutcome {
				t.Errorf("{webhook.outcome} = %q, want %q", o, tt.wantOutcome)
			}
			// Every answer that echoes something says nosniff, so that no
			// browser reads a reflected challenge as HTML.
			if len(got.body) > 0 && got.header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("answer %q without X-Content-Type-Options: nosniff", got.body)
			}
			if tt.check != nil {
				tt.check(t, got)
			}
			st, err := h.store(t).Stats(context.Background(), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if st.Events != 0 {
				t.Errorf("events stored = %d, want none", st.Events)
			}
			// A request that carries a secret in its query or headers has
			// no access line (Caddy's would hold it); the receiver's own
			// line stands in for it.
			lines := h.logs(t)
			access := accessLines(lines)
			hidden := tt.receiver["scheme"] == "meta" && strings.Contains(tt.path, "hub.verify_token") || tt.header.Get("X-Hook-Secret") != ""
			if hidden {
				if len(access) != 0 {
					t.Errorf("access log lines for a request carrying a secret: %v", access)
				}
				if !hasLog(lines, func(m map[string]any) bool {
					wh, _ := m["webhook"].(map[string]any)
					return m["msg"] == "request carrying a secret kept out of the access log" && wh["outcome"] == tt.wantOutcome
				}) {
					t.Errorf("no receiver line with outcome %q stands in for the access line", tt.wantOutcome)
				}
			} else {
				if len(access) == 0 {
					t.Fatal("no access log line")
				}
				if wh, _ := access[len(access)-1]["webhook"].(map[string]any); wh["outcome"] != tt.wantOutcome {
					t.Errorf("access log webhook fields = %v, want outcome %q", wh, tt.wantOutcome)
				}
			}
			raw := h.rawLogs(t)
			assertNoCanaries(t, raw)
			if bytes.Contains(raw, []byte("issued-0123")) {
				t.Error("logs contain the issued secret")
			}
		})
	}
}

// countingReader counts the bytes read from it.
type countingReader struct {
	r    io.Reader
	read int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += n
	return n, err
}

// TestReceiverRefusesBeforeReading: a request whose signature header is
// missing or malformed gets 401 and its body, however long its declared
// length, is not read.
func TestReceiverRefusesBeforeReading(t *testing.T) {
	tests := []struct {
		name   string
		scheme string
		header http.Header
	}{
		{"engine preset without its header", "twitch", http.Header{}},
		{"engine preset with a malformed header", "dropbox", http.Header{"X-Dropbox-Signature": {"not-hex"}}},
		{"slack without its timestamp", "slack", http.Header{"X-Slack-Signature": {"v0=00"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := signature.New(signature.Config{Scheme: tt.scheme, Secrets: []string{testSecret}})
			if err != nil {
				t.Fatal(err)
			}
			rc := &Receiver{Source: "s", verifier: v, maxBody: 64 << 20}
			rc.handshaker, _ = v.(signature.Handshaker)
			body := &countingReader{r: bytes.NewReader(bytes.Repeat([]byte("x"), 32<<20))}
			r := httptest.NewRequest(http.MethodPost, "/hooks/s", body)
			r.Header = tt.header
			r.ContentLength = 32 << 20
			w := httptest.NewRecorder()
			if err := rc.ServeHTTP(w, r, nil); err != nil {
				t.Fatal(err)
			}
			if w.Code != http.StatusUnauthorized || body.read != 0 {
				t.Errorf("status %d after reading %d bytes, want 401 after none", w.Code, body.read)
			}
		})
	}
}

// TestReceiverIssuedSecretOnly runs a receiver configured with only an
// issued_secret_file, no secrets, from its handshake to its first event:
// armed, it takes the issued secret and refuses events; after a reload it
// verifies with that secret, and a second handshake with another secret
// is refused.
func TestReceiverIssuedSecretOnly(t *testing.T) {
	h := newHarness(t)
	issued := filepath.Join(t.TempDir(), "asana.secret")
	const secret = "issued-only-0123"
	rc := receiverConfig{
		"handler": "webhook_receiver", "source": "asana", "scheme": "asana", "issued_secret_file": issued,
		"targets": []map[string]any{httpTarget("", "http://127.0.0.1:9/")},
	}
	body := []byte(`{"events":[]}`)
	event := func() int {
		t.Helper()
		hdr, err := signature.Sign("asana", secret, body, signature.SignOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return h.do(t, http.MethodPost, "/hooks/asana", hdr, bytes.NewReader(body)).status
	}
	handshake := func(s string) int {
		t.Helper()
		return h.do(t, http.MethodPost, "/hooks/asana", http.Header{"X-Hook-Secret": {s}}, nil).status
	}

	h.load(t, map[string]any{"workers": 0}, rc)
	if got := event(); got != http.StatusUnauthorized {
		t.Errorf("event before the handshake: %d, want 401", got)
	}
	if got := handshake(secret); got != http.StatusOK {
		t.Fatalf("handshake: %d, want 200", got)
	}
	if got := event(); got != http.StatusUnauthorized {
		t.Errorf("event before the reload: %d, want 401 (the secret is read at provisioning)", got)
	}
	h.load(t, map[string]any{"workers": 0}, rc)
	if got := event(); got != http.StatusAccepted {
		t.Errorf("event after the reload: %d, want 202", got)
	}
	if got := handshake(secret); got != http.StatusOK {
		t.Errorf("repeated handshake with the kept secret: %d, want 200", got)
	}
	if got := handshake("issued-other-4567"); got != http.StatusUnauthorized {
		t.Errorf("handshake with another secret: %d, want 401", got)
	}
	if b, _ := os.ReadFile(issued); string(b) != secret+"\n" {
		t.Errorf("issued secret file = %q, want the first secret", b)
	}
}

// TestReceiverBudgetReleasedOnEveryPath sends bodies larger than any pooled
// buffer, so each is charged to the in-flight budget, down every path a
// read body takes: a handshake answered, a handshake refused, a forgery,
// an unstorable delivery id, an event stored and its duplicate. Each must
// give its bytes back: a leak would leave the receiver answering 503 for
// ever once the leaks add up to its bound.
func TestReceiverBudgetReleasedOnEveryPath(t *testing.T) {
	h := newHarness(t)
	h.load(t, map[string]any{"workers": 0}, receiverConfig{
		"handler": "webhook_receiver", "source": "slack", "scheme": "slack", "secrets": []string{testSecret},
		"delivery_id": map[string]any{"header": "X-Test-Id"},
		"targets":     []map[string]any{httpTarget("", "http://127.0.0.1:9/")},
	})
	pad := strings.Repeat("p", maxPooledBuffer+1)
	signedSlack := func(body string) http.Header {
		hdr, err := signature.Sign("slack", testSecret, []byte(body), signature.SignOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return hdr
	}
	challenge := `{"type":"url_verification","challenge":"c-1","pad":"` + pad + `"}`
	event := `{"type":"event_callback","event_id":"Ev1","pad":"` + pad + `"}`
	withID := func(hdr http.Header, id string) http.Header {
		hdr.Set("X-Test-Id", id)
		return hdr
	}
	tests := []struct {
		name   string
		header http.Header
		body   string
		want   int
	}{
		{"handshake answered", signedSlack(challenge), challenge, http.StatusOK},
		{"handshake refused", signedSlack(challenge), strings.Replace(challenge, "c-1", "c-2", 1), http.StatusUnauthorized},
		{"forged event", signedSlack(event), strings.Replace(event, "Ev1", "Ev2", 1), http.StatusUnauthorized},
		{"unstorable delivery id", withID(signedSlack(event), strings.Repeat("i", maxEventText+1)), event, http.StatusBadRequest},
		{"event stored", withID(signedSlack(event), "d-1"), event, http.StatusAccepted},
		{"duplicate", withID(signedSlack(event), "d-1"), event, http.StatusAccepted},
	}
	src, _ := current.Load().source("slack")
	rc := src.receiver
	for _, tt := range tests {
		got := h.do(t, http.MethodPost, "/hooks/slack", tt.header, strings.NewReader(tt.body))
		if got.status != tt.want {
			t.Errorf("%s: status %d, want %d", tt.name, got.status, tt.want)
		}
		if used := budgetUsed(&rc.inflight); used != 0 {
			t.Errorf("%s: %d bytes still charged after the answer", tt.name, used)
		}
	}
}

// An ed25519 key pair for the discord receivers of these tests, made with
// openssl: the seed (hex) signs, the public key (hex) verifies.
const (
	discordTestSeed = "8ebaec261791ed0f5432d81ad33b130c42c3f528d3951355c361e46c6f7e0771"
	discordTestPub  = "92c81eb58dba9b996d0e9f0f59e32cf77b20b97f9d5becf52d4ec00b25ce604f"
)

// TestHideFromAccessLog: a request carrying a secret loses its access
// line only on a server that writes access lines, where the receiver's
// own line stands in for it; a server without an access log gets no line
// in its stead, so a forged request costs no log line there.
func TestHideFromAccessLog(t *testing.T) {
	rc := &Receiver{keptSecret: receiverSecrets{headers: []string{"X-Hook-Secret"}}}
	tests := []struct {
		name   string
		server *caddyhttp.Server // nil: not served by Caddy
		secret bool
		hidden bool
	}{
		{"access log, secret", &caddyhttp.Server{Logs: &caddyhttp.ServerLogConfig{}}, true, true},
		{"access log, no secret", &caddyhttp.Server{Logs: &caddyhttp.ServerLogConfig{}}, false, false},
		{"no access log, secret", &caddyhttp.Server{}, true, false},
		// The Caddyfile adapter skips the sites without a log directive
		// once another site of the server logs.
		{"site skipped, secret", &caddyhttp.Server{Logs: &caddyhttp.ServerLogConfig{SkipHosts: []string{"example.com"}}}, true, false},
		{"another site skipped, secret", &caddyhttp.Server{Logs: &caddyhttp.ServerLogConfig{SkipHosts: []string{"other.example"}}}, true, true},
		{"unmapped hosts skipped, secret", &caddyhttp.Server{Logs: &caddyhttp.ServerLogConfig{SkipUnmappedHosts: true}}, true, false},
		{"host mapped to a logger, secret", &caddyhttp.Server{Logs: &caddyhttp.ServerLogConfig{SkipUnmappedHosts: true,
			LoggerNames: map[string]caddyhttp.StringArray{"*.com": {"hooks"}}}}, true, true},
		{"outside Caddy, secret", nil, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/hook", nil)
			ctx := context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{})
			if tt.server != nil {
				ctx = context.WithValue(ctx, caddyhttp.ServerCtxKey, tt.server)
			}
			r = r.WithContext(ctx)
			if tt.secret {
				r.Header.Set("X-Hook-Secret", "issued-secret-value")
			}
			if got := rc.hideFromAccessLog(r); got != tt.hidden {
				t.Errorf("hideFromAccessLog = %v, want %v", got, tt.hidden)
			}
		})
	}
}

// TestReceiverTailsTheStatusSent: a Discord webhook event is stored and
// answered 204, and the live tail says 204, not accepted's usual 202.
func TestReceiverTailsTheStatusSent(t *testing.T) {
	// The envelope of https://discord.com/developers/docs/events/webhook-events.
	const event = `{"version":1,"application_id":"1234560123453231555","type":1,"event":{"type":"ENTITLEMENT_CREATE","timestamp":"2024-10-18T18:41:21.109604","data":{"id":"1296925200000000000","sku_id":"1296920000000000000","type":8}}}`
	h := newHarness(t)
	h.load(t, map[string]any{"workers": 0}, receiverConfig{
		"handler": "webhook_receiver", "source": "discord", "scheme": "discord", "public_keys": []string{discordTestPub},
		"targets": []map[string]any{httpTarget("", "http://127.0.0.1:9/")},
	})
	header, err := signature.Sign("discord", discordTestSeed, []byte(event), signature.SignOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sub := tails.subscribe(tailFilter{source: "discord"}, 0)
	if sub == nil {
		t.Fatal("no tail subscription")
	}
	defer tails.unsubscribe(sub)
	if got := h.do(t, http.MethodPost, "/hooks/discord", header, strings.NewReader(event)); got.status != http.StatusNoContent {
		t.Fatalf("answer %d %q, want 204", got.status, got.body)
	}
	select {
	case l := <-sub.lines:
		if l.Outcome != "accepted" || l.Status != http.StatusNoContent || l.EventType != "ENTITLEMENT_CREATE" {
			t.Errorf("tail line %+v, want accepted 204 ENTITLEMENT_CREATE", l)
		}
	default:
		t.Error("no tail line for the event")
	}
}
