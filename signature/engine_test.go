package signature

import (
	"crypto/sha256"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCompileTemplate(t *testing.T) {
	cases := []struct {
		name    string
		tmpl    string
		want    []part
		wantErr string // the error must contain it; empty: no error
	}{
		{name: "body", tmpl: "{body}", want: []part{{kind: partBody}}},
		{name: "stripe-like", tmpl: "{timestamp}.{body}", want: []part{{kind: partTimestamp}, {kind: partText, text: "."}, {kind: partBody}}},
		{name: "every variable", tmpl: "{method}{url}{id}{header.x-a}",
			want: []part{{kind: partMethod}, {kind: partURL}, {kind: partID}, {kind: partHeader, text: "X-A"}}},
		{name: "caddy's long names", tmpl: "{http.request.method}{http.request.header.X-A}",
			want: []part{{kind: partMethod}, {kind: partHeader, text: "X-A"}}},
		{name: "escapes and braces", tmpl: `{{a}}\n\t\\{body}`, want: []part{{kind: partText, text: "{a}\n\t\\"}, {kind: partBody}}},
		{name: "empty", tmpl: "", wantErr: "empty"},
		{name: "unknown variable", tmpl: "{bdy}", wantErr: "{bdy} unknown"},
		{name: "unclosed", tmpl: "{body", wantErr: "not closed"},
		{name: "stray close", tmpl: "body}", wantErr: "closes nothing"},
		{name: "bad header name", tmpl: "{header.a b}", wantErr: "not a valid header name"},
		{name: "unknown escape", tmpl: `\x`, wantErr: "unknown"},
		{name: "trailing backslash", tmpl: `a\`, wantErr: "at the end"},
		{name: "too long", tmpl: strings.Repeat("a", maxTemplateLen+1), wantErr: "longer than"},
		{name: "too many parts", tmpl: strings.Repeat("{body}.", maxTemplateParts), wantErr: "more than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := compileTemplate(tc.tmpl)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("parts = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestEngine signs with Sign and verifies with New for arrangements of the
// engine, then checks that each signed input matters.
func TestEngine(t *testing.T) {
	const secret = "engine-secret"
	body := []byte(`{"id":"e-1","kind":"k"}`)
	cases := []struct {
		name   string
		cfg    Config // Scheme hmac unless set; Secrets and Now are added
		opts   SignOptions
		tamper map[string]func(r *Request) // each must make Verify fail with ErrNoMatch
	}{
		{
			name: "pairs with timestamp key, base64url, sha512",
			cfg:  Config{SignatureHeader: "X-Sig", SignatureSyntax: "pairs", SignatureKey: "v1", TimestampKey: "t", Algorithm: "sha512", Encoding: "base64url", SignedContent: "{timestamp}.{body}"},
			tamper: map[string]func(*Request){
				"t": func(r *Request) {
					r.Header.Set("X-Sig", strings.Replace(r.Header.Get("X-Sig"), "t=1700000000", "t=1700000001", 1))
				},
			},
		},
		{
			name: "timestamp header in ms, list of prefixed MACs",
			cfg:  Config{SignatureHeader: "X-Sig", SignatureSyntax: "list", SignaturePrefix: "v1=", TimestampHeader: "X-Ts", TimestampFormat: "unix_ms", SignedContent: "{body}|{timestamp}"},
			tamper: map[string]func(*Request){
				"ts": func(r *Request) { r.Header.Set("X-Ts", "1700000000001") },
			},
		},
		{
			name: "url, method, header and id",
			cfg:  Config{SignatureHeader: "X-Sig", Encoding: "base64", DeliveryIDHeader: "X-Id", SignedContent: "{method}\n{url}\n{id}\n{header.X-Account}\n{body}"},
			opts: SignOptions{ID: "id-1", URL: "https://example.com/hook?a=1", Header: http.Header{"X-Account": {"acct"}}},
			tamper: map[string]func(*Request){
				"url":    func(r *Request) { r.URL = "https://example.com/hook?a=2" },
				"method": func(r *Request) { r.Method = "PUT" },
				"id":     func(r *Request) { r.Header.Set("X-Id", "id-2") },
				"header": func(r *Request) { r.Header.Set("X-Account", "other") },
			},
		},
		{
			name: "rfc3339 timestamp header after the body, base64",
			cfg:  Config{SignatureHeader: "X-Sig", Encoding: "base64", TimestampHeader: "X-Ts", TimestampFormat: "rfc3339", SignedContent: "{body}{timestamp}"},
			tamper: map[string]func(*Request){
				"ts": func(r *Request) { r.Header.Set("X-Ts", "2023-11-14T22:13:21Z") },
			},
		},
		{
			name: "public url replaces the request's",
			cfg:  Config{SignatureHeader: "X-Sig", SignedContent: "{url}{body}", PublicURL: "https://public.example/hook"},
			opts: SignOptions{URL: "https://public.example/hook"},
		},
		{
			name: "preset paddle through Sign",
			cfg:  Config{Scheme: "paddle"},
			tamper: map[string]func(*Request){
				"ts": func(r *Request) {
					r.Header.Set("Paddle-Signature", strings.Replace(r.Header.Get("Paddle-Signature"), "ts=1700000000", "ts=1700000001", 1))
				},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Scheme = cmpOrString(cfg.Scheme, SchemeHMAC)
			cfg.Secrets, cfg.Now = []string{"other", secret}, fixedClock
			v := setup(t, cfg)
			opts := tc.opts
			opts.Timestamp = testNow
			opts.SignatureHeader, opts.SignatureSyntax, opts.SignatureKey, opts.SignaturePrefix = tc.cfg.SignatureHeader, tc.cfg.SignatureSyntax, tc.cfg.SignatureKey, tc.cfg.SignaturePrefix
			opts.Algorithm, opts.Encoding, opts.SignedContent = tc.cfg.Algorithm, tc.cfg.Encoding, tc.cfg.SignedContent
			opts.TimestampHeader, opts.TimestampKey, opts.TimestampFormat = tc.cfg.TimestampHeader, tc.cfg.TimestampKey, tc.cfg.TimestampFormat
			opts.DeliveryIDHeader = tc.cfg.DeliveryIDHeader
			h, err := Sign(cfg.Scheme, secret, body, opts)
			if err != nil {
				t.Fatal(err)
			}
			req := Request{Method: "POST", URL: opts.URL, Header: h, Body: body}
			if cfg.PublicURL != "" {
				req.URL = "http://internal:8080/x" // ignored
			}
			res, err := v.Verify(req)
			if err != nil {
				t.Fatalf("Verify: %v (headers %v)", err, h)
			}
			if res.SecretIndex != 1 {
				t.Errorf("SecretIndex = %d, want 1", res.SecretIndex)
			}
			if got := UsesURL(v); got != (strings.Contains(cfg.SignedContent, "{url}") && cfg.PublicURL == "") {
				t.Errorf("UsesURL = %v", got)
			}
			for name, tamper := range tc.tamper {
				r := req
				r.Header = h.Clone()
				tamper(&r)
				if _, err := v.Verify(r); !errors.Is(err, ErrNoMatch) {
					t.Errorf("%s changed: err = %v, want ErrNoMatch", name, err)
				}
			}
			stale := opts
			stale.Timestamp = testNow.Add(-time.Hour)
			if hs, _ := Sign(cfg.Scheme, secret, body, stale); strings.Contains(cfg.SignedContent+cfg.Scheme, "timestamp") || cfg.Scheme == "paddle" {
				if _, err := v.Verify(Request{Method: "POST", URL: opts.URL, Header: hs, Body: body}); !errors.Is(err, ErrTimestamp) {
					t.Errorf("an hour old: err = %v, want ErrTimestamp", err)
				}
			}
		})
	}
}

func cmpOrString(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestEngineHeaders checks how each syntax reads its header.
func TestEngineHeaders(t *testing.T) {
	const secret = "s"
	body := []byte("{}")
	mac := hexMAC(sha256.New, []byte(secret), body, "1700000000", ".")
	pairs := Config{Scheme: SchemeHMAC, Secrets: []string{secret}, Now: fixedClock, SignatureHeader: "X-Sig", SignatureSyntax: "pairs", SignatureKey: "v1", TimestampKey: "t", SignedContent: "{timestamp}.{body}"}
	list := Config{Scheme: SchemeHMAC, Secrets: []string{secret}, SignatureHeader: "X-Sig", SignatureSyntax: "list", SignaturePrefix: "v1="}
	listMAC := hexMAC(sha256.New, []byte(secret), body)
	cases := []struct {
		name    string
		cfg     Config
		value   string
		wantErr error
	}{
		{"pairs/semicolons and spaces", pairs, "t=1700000000; v1=" + mac, nil},
		{"pairs/unknown keys skipped", pairs, "t=1700000000,v0=zz,v1=" + mac, nil},
		{"pairs/two v1, second matches", pairs, "t=1700000000,v1=" + strings.Repeat("0", 64) + ",v1=" + mac, nil},
		{"pairs/no t", pairs, "v1=" + mac, ErrMalformedHeader},
		{"pairs/two t", pairs, "t=1700000000,t=1700000000,v1=" + mac, ErrMalformedHeader},
		{"pairs/item without =", pairs, "t=1700000000,v1", ErrMalformedHeader},
		{"pairs/t not a number", pairs, "t=soon,v1=" + mac, ErrMalformedHeader},
		{"pairs/no v1", pairs, "t=1700000000", ErrMalformedHeader},
		{"pairs/v1 not hex", pairs, "t=1700000000,v1=xyz", ErrNoMatch},
		{"pairs/too many v1", pairs, "t=1700000000" + strings.Repeat(",v1="+mac, MaxSignatures+1), ErrMalformedHeader},
		{"list/second entry matches", list, "v2=abc v1=" + strings.Repeat("0", 64) + ",v1=" + listMAC, nil},
		{"list/empty", list, " , ", ErrMalformedHeader},
		{"list/no prefixed entry", list, "v2=abc", ErrNoMatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := setup(t, tc.cfg)
			_, err := v.Verify(reqOf(hdr("X-Sig", tc.value), body))
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestEngineRejects(t *testing.T) {
	base := func(c Config) Config {
		c.Scheme, c.Secrets = cmpOrString(c.Scheme, SchemeHMAC), []string{"s"}
		if c.SignatureHeader == "" && c.Scheme == SchemeHMAC {
			c.SignatureHeader = "X-Sig"
		}
		return c
	}
	cases := []struct {
		name      string
		cfg       Config
		wantField string
	}{
		{"unknown syntax", base(Config{SignatureSyntax: "csv"}), "SignatureSyntax"},
		{"pairs without key", base(Config{SignatureSyntax: "pairs"}), "SignatureKey"},
		{"key without pairs", base(Config{SignatureKey: "v1"}), "SignatureKey"},
		{"timestamp key without pairs", base(Config{TimestampKey: "t"}), "TimestampKey"},
		{"timestamp key and header", base(Config{SignatureSyntax: "pairs", SignatureKey: "v1", TimestampKey: "t", TimestampHeader: "X-Ts"}), "TimestampHeader"},
		{"same keys", base(Config{SignatureSyntax: "pairs", SignatureKey: "v1", TimestampKey: "v1"}), "TimestampKey"},
		{"list prefix with separator", base(Config{SignatureSyntax: "list", SignaturePrefix: "v1,"}), "SignaturePrefix"},
		{"key with separator", base(Config{SignatureSyntax: "pairs", SignatureKey: "v;1"}), "SignatureKey"},
		{"timestamp without source", base(Config{SignedContent: "{timestamp}.{body}"}), "TimestampHeader"},
		{"id without header", base(Config{SignedContent: "{id}.{body}"}), "DeliveryIDHeader"},
		{"bad template", base(Config{SignedContent: "{nope}"}), "SignedContent"},
		{"unknown timestamp format", base(Config{TimestampHeader: "X-Ts", TimestampFormat: "iso"}), "TimestampFormat"},
		{"timestamp field and header", base(Config{TimestampHeader: "X-Ts", TimestampField: "ts"}), "TimestampField"},
		{"timestamp field for {timestamp}", base(Config{TimestampField: "ts", SignedContent: "{timestamp}{body}"}), "TimestampHeader"},
		{"timestamp field on github", Config{Scheme: SchemeGitHub, Secrets: []string{"s"}, TimestampField: "ts"}, "TimestampField"},
		{"bad timestamp header", base(Config{TimestampHeader: "X Ts"}), "TimestampHeader"},
		{"public url without {url}", base(Config{PublicURL: "https://a/"}), "PublicURL"},
		{"public url not http", base(Config{SignedContent: "{url}", PublicURL: "ftp://a/"}), "PublicURL"},
		{"public url on github", Config{Scheme: SchemeGitHub, Secrets: []string{"s"}, PublicURL: "https://a/"}, "PublicURL"},
		{"engine field on stripe", Config{Scheme: SchemeStripe, Secrets: []string{"s"}, SignedContent: "{body}"}, "SignedContent"},
		{"preset override checked", base(Config{Scheme: "paddle", Encoding: "base32"}), "Encoding"},
		{"public key on a secret scheme", Config{Scheme: SchemeGitHub, Secrets: []string{"s"}, PublicKeys: []string{edPubB64}}, "PublicKeys"},
		{"secret on a public key scheme", Config{Scheme: SchemeDiscord, Secrets: []string{"s"}, PublicKeys: []string{edPubB64}}, "Secrets"},
		{"no key on standard", Config{Scheme: SchemeStandard}, "Secrets"},
		{"empty public key", Config{Scheme: SchemeTelnyx, PublicKeys: []string{""}}, "PublicKeys[0]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.wantField) {
				t.Fatalf("New: %v, want an error naming %s", err, tc.wantField)
			}
		})
	}
}

// TestEveryScheme holds each registered scheme to what adding one must
// give: Sign and New agree, a changed body does not verify, its forwarded
// headers are canonical-safe, and Lookup describes it.
func TestEveryScheme(t *testing.T) {
	names := Schemes()
	if !slices.IsSorted(names) {
		t.Errorf("Schemes() = %v, not sorted", names)
	}
	body := []byte(`{"id":"i-1","type":"t","event_id":"e-1","event_type":"et","webhookTimestamp":1700000000000}`)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			d, ok := Lookup(name)
			if !ok || d.Name != name {
				t.Fatalf("Lookup(%q) = %+v, %v", name, d, ok)
			}
			cfg := Config{Scheme: name, Now: fixedClock}
			key := "whsec_dGVzdA=="
			var opts SignOptions
			switch d.Keys {
			case KeyPublic:
				cfg.PublicKeys, key = []string{testPublicKey(name)}, testPrivateKey(name)
			default:
				if s := registry[name]; s.preset != nil && s.preset.SecretBase64 {
					key = "dGVzdA=="
				}
				cfg.Secrets = []string{key}
			}
			if name == SchemeHMAC {
				cfg.SignatureHeader, opts.SignatureHeader = "X-Sig", "X-Sig"
			}
			v := setup(t, cfg)
			opts.ID, opts.EventType, opts.Timestamp = "id-1", "type-1", testNow
			signed, h, err := SignBody(name, key, body, opts)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := v.Verify(reqOf(h, signed)); err != nil {
				t.Fatalf("Verify of a signed request: %v", err)
			}
			changed := append([]byte(nil), signed...)
			changed[2] ^= 1
			// gitlab, okta and msgraph send the secret itself, mailgun signs
			// a token: the body is not signed.
			if _, err := v.Verify(reqOf(h, changed)); !slices.Contains([]string{SchemeGitLab, "okta", "msgraph", "mailgun"}, name) && !errors.Is(err, ErrNoMatch) {
				t.Errorf("Verify of a changed body: %v, want ErrNoMatch", err)
			}
			for _, f := range d.Forward {
				if !ValidHeaderName(f) || strings.EqualFold(f, "Content-Type") {
					t.Errorf("Forward header %q", f)
				}
			}
		})
	}
}

func TestLookup(t *testing.T) {
	for scheme, want := range map[string][]string{
		SchemeGitHub: {"X-GitHub-Event", "X-GitHub-Delivery", "X-GitHub-Hook-ID", "X-GitHub-Hook-Installation-Target-ID",
			"X-GitHub-Hook-Installation-Target-Type"},
		SchemeShopify: {"X-Shopify-Topic", "X-Shopify-Shop-Domain", "X-Shopify-API-Version", "X-Shopify-Webhook-Id",
			"X-Shopify-Event-Id", "X-Shopify-Triggered-At", "X-Shopify-Name"},
		SchemeGitLab: {"X-Gitlab-Event", "X-Gitlab-Event-UUID", "X-Gitlab-Instance", "X-Gitlab-Webhook-UUID", "Idempotency-Key"},
		SchemeStripe: nil,
		// The delivery id's header is added when the scheme does not list it.
		"linear":       {"Linear-Event", "Linear-Delivery"},
		"lemonsqueezy": {"X-Event-Name"},
	} {
		d, ok := Lookup(scheme)
		if !ok || !slices.Equal(d.Forward, want) {
			t.Errorf("Lookup(%q).Forward = %v, %v; want %v", scheme, d.Forward, ok, want)
		}
	}
	if _, ok := Lookup("nosuch"); ok {
		t.Error("Lookup of an unknown scheme succeeded")
	}
}

func TestSlackHandshake(t *testing.T) {
	const secret = "slack-secret"
	v := setup(t, Config{Scheme: SchemeSlack, Secrets: []string{secret}, Now: fixedClock})
	hs, ok := v.(Handshaker)
	if !ok {
		t.Fatal("the slack verifier is not a Handshaker")
	}
	challenge := `{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`
	signed := func(body string) http.Header {
		h, err := Sign(SchemeSlack, secret, []byte(body), SignOptions{Timestamp: testNow})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	forged := signed(challenge)
	forged.Set("X-Slack-Signature", "v0="+strings.Repeat("0", 64))
	mentions := `{"type":"event_callback","event":{"text":"url_verification"}}`
	cases := []struct {
		name     string
		req      Request
		wantOK   bool
		wantErr  error
		wantBody string
	}{
		{"challenge answered", Request{Method: "POST", Header: signed(challenge), Body: []byte(challenge)}, true, nil, "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"},
		{"forged challenge", Request{Method: "POST", Header: forged, Body: []byte(challenge)}, false, ErrNoMatch, ""},
		{"ordinary event", Request{Method: "POST", Header: signed(`{"type":"event_callback"}`), Body: []byte(`{"type":"event_callback"}`)}, false, nil, ""},
		{"event that mentions the word", Request{Method: "POST", Header: signed(mentions), Body: []byte(mentions)}, false, nil, ""},
		{"no challenge", Request{Method: "POST", Header: signed(`{"type":"url_verification"}`), Body: []byte(`{"type":"url_verification"}`)}, false, ErrMalformedHeader, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, ok, err := hs.Handshake(tc.req)
			if ok != tc.wantOK || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("Handshake = %v, %v; want %v, %v", ok, err, tc.wantOK, tc.wantErr)
			}
			if ok && (resp.Status != http.StatusOK || string(resp.Body) != tc.wantBody || !strings.HasPrefix(resp.ContentType, "text/plain")) {
				t.Errorf("response = %d %q %q", resp.Status, resp.ContentType, resp.Body)
			}
		})
	}
	if _, ok := setup(t, Config{Scheme: SchemeGitHub, Secrets: []string{"s"}}).(Handshaker); ok {
		t.Error("the github verifier is a Handshaker")
	}
}

// TestEngineTimestampField reads a timestamp from the verified body, as
// Linear's webhookTimestamp, in each format and at a nested path.
func TestEngineTimestampField(t *testing.T) {
	const secret = "s"
	cases := []struct {
		name    string
		cfg     Config // Scheme, Secrets, SignatureHeader and Now are added
		body    string
		wantErr error
	}{
		{"ms number", Config{TimestampField: "ts", TimestampFormat: "unix_ms"}, `{"ts":1700000000123}`, nil},
		{"seconds as a string", Config{TimestampField: "ts"}, `{"ts":"1700000000"}`, nil},
		{"nested rfc3339", Config{TimestampField: "meta.sent", TimestampFormat: "rfc3339"}, `{"meta":{"sent":"2023-11-14T22:13:20.5+00:00"}}`, nil},
		{"stale", Config{TimestampField: "ts"}, `{"ts":1699990000}`, ErrTimestamp},
		{"future", Config{TimestampField: "ts", TimestampFormat: "unix_ms"}, `{"ts":1700001000000}`, ErrTimestamp},
		{"missing", Config{TimestampField: "ts"}, `{"id":"x"}`, ErrTimestamp},
		{"not canonical", Config{TimestampField: "ts"}, `{"ts":1.7e9}`, ErrTimestamp},
		{"an object", Config{TimestampField: "ts"}, `{"ts":{"s":1700000000}}`, ErrTimestamp},
		{"rfc3339 as a number", Config{TimestampField: "ts", TimestampFormat: "rfc3339"}, `{"ts":1700000000}`, ErrTimestamp},
		{"not JSON", Config{TimestampField: "ts"}, `ts=1700000000`, ErrTimestamp},
		{"stale but ignored", Config{TimestampField: "ts", IgnoreTimestamp: true}, `{"ts":1}`, nil},
		{"missing but ignored", Config{TimestampField: "ts", IgnoreTimestamp: true}, `{}`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Scheme, cfg.Secrets, cfg.SignatureHeader, cfg.Now = SchemeHMAC, []string{secret}, "X-Sig", fixedClock
			v := setup(t, cfg)
			body := []byte(tc.body)
			h := hdr("X-Sig", hexMAC(sha256.New, []byte(secret), body))
			if _, err := v.Verify(reqOf(h, body)); !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			// A forgery is ErrNoMatch whatever its timestamp.
			forged := hdr("X-Sig", hexMAC(sha256.New, []byte("other"), body))
			if _, err := v.Verify(reqOf(forged, body)); !errors.Is(err, ErrNoMatch) {
				t.Errorf("forged: err = %v, want ErrNoMatch", err)
			}
		})
	}
}

func TestJSONAt(t *testing.T) {
	cases := []struct {
		name string
		body string
		path string
		want string // raw; "" for nil
	}{
		{"top level", `{"id":"x"}`, "id", `"x"`},
		{"nested", `{"event":{"id":"e-1","type":"t"}}`, "event.id", `"e-1"`},
		{"deeper, last wins", `{"a":{"b":{"c":1,"c":2}}}`, "a.b.c", `2`},
		{"object value", `{"a":{"b":{}}}`, "a.b", `{}`},
		{"through an array", `{"a":[{"b":1}]}`, "a.b", ""},
		{"through a string", `{"a":"b"}`, "a.b", ""},
		{"absent", `{"a":{"c":1}}`, "a.b", ""},
		{"escaped member", `{"a":{"\u0062":1}}`, "a.b", `1`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			top, rest, nested := strings.Cut(tc.path, ".")
			raws := make([][]byte, 1)
			if !lookupJSONRaw([]byte(tc.body), []string{top}, raws) {
				t.Fatal("body not valid")
			}
			got := raws[0]
			if nested {
				got = jsonAt(got, rest)
			}
			if string(got) != tc.want {
				t.Errorf("jsonAt = %q, want %q", got, tc.want)
			}
		})
	}
}
