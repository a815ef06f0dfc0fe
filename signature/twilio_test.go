package signature

import (
	"bytes"
	"cmp"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// Twilio's published example (https://www.twilio.com/docs/usage/webhooks/webhooks-security):
// Auth Token 12345, the URL and the five parameters below, signed content
// "https://mycompany.com/myapp.php?foo=1&bar=2CallSidCA1234567890ABCDECaller+12349013030Digits1234From+12349013030To+18005551212",
// re-checked with
//
//	printf '%s' "$content" | openssl dgst -sha1 -hmac 12345 -binary | base64
//
// The JSON form and the Webhook Rule's HMAC-SHA256 are computed with
// openssl from the same page's algorithm and twilio-node's
// validateRequestWithBody:
//
//	printf '%s' "https://example.com/twilio/status?bodySHA256=$(printf '%s' "$body" | sha256sum | cut -d' ' -f1)" | openssl dgst -sha1 -hmac 12345 -binary | base64
//	printf '%s' "$content" | openssl dgst -sha256 -hmac sharedkey123 -binary | base64
const (
	twilioToken   = "12345"
	twilioURL     = "https://mycompany.com/myapp.php?foo=1&bar=2"
	twilioForm    = "To=%2B18005551212&CallSid=CA1234567890ABCDE&From=%2B12349013030&Caller=%2B12349013030&Digits=1234"
	twilioSig     = "0/KCTR6DLpKmkAf8muzZqo1nDgQ="
	twilioRuleSig = "bKSE3SFWZTAD0XVKlSs4EC09xbJHAlZ9RjGMZCzAQSQ="

	twilioJSON    = `{"status":"delivered","sid":"SM123"}`
	twilioJSONURL = "https://example.com/twilio/status?bodySHA256=5aec0353bc9763d83b681a52de4be11d8401652c2901792ed1cf9ced91acc091"
	twilioJSONSig = "38Db4ob+IrJTpgXP9ZGt3R55cWY="
)

func TestTwilio(t *testing.T) {
	cfg := Config{Scheme: "twilio", Secrets: []string{twilioToken}}
	form := post(twilioURL, hdr("X-Twilio-Signature", twilioSig), twilioForm)
	jsonReq := post(twilioJSONURL, hdr("X-Twilio-Signature", twilioJSONSig), twilioJSON)
	withPort := form
	withPort.URL = "https://mycompany.com:443/myapp.php?foo=1&bar=2"
	behindProxy := form
	behindProxy.URL = "http://10.0.0.7:8080/myapp.php?foo=1&bar=2"
	proxied := cfg
	proxied.PublicURL = "https://mycompany.com/myapp.php"
	rule := post(twilioURL, hdr("X-Twilio-Signature", twilioRuleSig, "X-Twilio-Webhooks-Signature-Settings", "key=HS123,algorithm=HMAC_SHA256"), twilioForm)
	duplicated := post(twilioURL, hdr("X-Twilio-Signature", twilioSig), twilioForm+"&Digits=1234&&")
	wrongHash := jsonReq
	wrongHash.URL = twilioJSONURL[:len(twilioJSONURL)-1] + "0"

	runVerifyCases(t, []verifyCase{
		{name: "published vector, parameters in any order", cfg: cfg, req: form, want: Result{DeliveryID: bodyID([]byte(twilioForm))}},
		{name: "second token of two", cfg: Config{Scheme: "twilio", Secrets: []string{"old", twilioToken}}, req: form, want: Result{SecretIndex: 1, DeliveryID: bodyID([]byte(twilioForm))}},
		{name: "request shows :443, Twilio signed without", cfg: cfg, req: withPort, want: Result{DeliveryID: bodyID([]byte(twilioForm))}},
		{name: "public URL behind a proxy, query from the request", cfg: proxied, req: behindProxy, want: Result{DeliveryID: bodyID([]byte(twilioForm))}},
		{name: "repeated parameter counted once", cfg: cfg, req: duplicated, want: Result{DeliveryID: bodyID([]byte(twilioForm + "&Digits=1234&&"))}},
		{name: "webhook rule, HMAC-SHA256", cfg: Config{Scheme: "twilio", Secrets: []string{"sharedkey123"}}, req: rule, want: Result{DeliveryID: bodyID([]byte(twilioForm))}},
		{name: "JSON body with bodySHA256", cfg: cfg, req: jsonReq, want: Result{DeliveryID: bodyID([]byte(twilioJSON))}},
		{name: "JSON body, one byte changed", cfg: cfg, req: flipped(jsonReq, 3), err: ErrNoMatch},
		{name: "JSON body, bodySHA256 changed", cfg: cfg, req: wrongHash, err: ErrNoMatch},
		{name: "form, one byte changed", cfg: cfg, req: flipped(form, 20), err: ErrNoMatch},
		{name: "form, parameter added", cfg: cfg, req: post(twilioURL, form.Header, twilioForm+"&X=1"), err: ErrNoMatch},
		{name: "form, bad escape", cfg: cfg, req: post(twilioURL, form.Header, twilioForm+"%G1"), err: ErrNoMatch},
		{name: "another URL", cfg: cfg, req: post("https://mycompany.com/other.php?foo=1&bar=2", form.Header, twilioForm), err: ErrNoMatch},
		{name: "SHA-1 signature under a SHA-256 rule", cfg: cfg, req: post(twilioURL, hdr("X-Twilio-Signature", twilioSig, "X-Twilio-Webhooks-Signature-Settings", "algorithm=HMAC_SHA256"), twilioForm), err: ErrMalformedHeader},
		{name: "no signature", cfg: cfg, req: post(twilioURL, hdr(), twilioForm), err: ErrMissingHeader},
		{name: "signature not base64", cfg: cfg, req: post(twilioURL, hdr("X-Twilio-Signature", "not base64!"), twilioForm), err: ErrMalformedHeader},
	})
}

func TestTwilioSign(t *testing.T) {
	for _, tc := range []struct{ name, url, body, want string }{
		{"form", twilioURL, twilioForm, twilioSig},
		{"json", twilioJSONURL, twilioJSON, twilioJSONSig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := signedRequest(t, "twilio", twilioToken, tc.body, SignOptions{URL: tc.url})
			if got := req.Header.Get("X-Twilio-Signature"); got != tc.want {
				t.Errorf("Sign = %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := New(Config{Scheme: "twilio", Secrets: []string{"s"}, PublicURL: "https://h/p?x=1"}); err == nil {
		t.Error("New accepted a PublicURL with a query")
	}
	if v := setup(t, Config{Scheme: "twilio", Secrets: []string{"s"}, PublicURL: "https://h/p"}); !UsesURL(v) {
		t.Error("UsesURL = false: the query is the request's")
	}
}

func TestOtherPortURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://h.example/p?q=1":       "https://h.example:443/p?q=1",
		"https://h.example:443/p":       "https://h.example/p",
		"http://h.example":              "http://h.example:80",
		"http://h.example:8080/x":       "http://h.example/x",
		"https://u:pw@h.example/x":      "https://u:pw@h.example:443/x",
		"https://[::1]/x":               "https://[::1]:443/x",
		"https://[::1]:8443/x":          "https://[::1]/x",
		"ftp://h.example/x":             "",
		"no scheme":                     "",
		"https:///path":                 "",
		"https://h.example?bodySHA256=": "https://h.example:443?bodySHA256=",
	} {
		if got := otherPortURL(in); got != want {
			t.Errorf("otherPortURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzTwilioParams holds the form parser to net/url: the same names and
// values, sorted and without exact duplicates, and an error for the same
// bodies (net/url also refuses a ';', which Twilio never sends).
func FuzzTwilioParams(f *testing.F) {
	for _, s := range []string{twilioForm, "", "a", "a=", "=b", "a=1&a=1&a=0", "%zz", "a+b=c+d%20e", "&&&", "x=%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var p twilioParams
		ok := p.parse([]byte(body))
		values, err := url.ParseQuery(body)
		if bytes.IndexByte([]byte(body), ';') >= 0 {
			return
		}
		if ok != (err == nil) {
			t.Fatalf("parse(%q) = %v, url.ParseQuery error %v", body, ok, err)
		}
		if !ok {
			return
		}
		var want [][2]string
		for k, vs := range values {
			for _, v := range vs {
				want = append(want, [2]string{k, v})
			}
		}
		slices.SortFunc(want, func(a, b [2]string) int { return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1])) })
		want = slices.Compact(want)
		var got [][2]string
		for _, pair := range p.pairs {
			got = append(got, [2]string{string(p.buf[pair.name:pair.value]), string(p.buf[pair.value:pair.end])})
		}
		if !slices.Equal(got, want) {
			t.Fatalf("parse(%q) = %q, want %q", body, got, want)
		}
	})
}

// FuzzOtherPortURL: adding the default port and removing it again gives
// the URL back, and the path and query are never touched.
func FuzzOtherPortURL(f *testing.F) {
	for _, s := range []string{twilioURL, "https://h:443/p", "http://[::1]/x", "https://u@h", "https://", "x://y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, u string) {
		other := otherPortURL(u)
		if other == "" {
			return
		}
		_, rest, _ := strings.Cut(u, "://")
		if i := strings.IndexAny(rest, "/?#"); i >= 0 && !strings.HasSuffix(other, rest[i:]) {
			t.Fatalf("otherPortURL(%q) = %q changed the path or query", u, other)
		}
		if len(other) > len(u) && otherPortURL(other) != u {
			t.Fatalf("otherPortURL(otherPortURL(%q)) = %q", u, otherPortURL(other))
		}
	})
}
