package signature

import (
	"cmp"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// schemeSetup returns a verifier of scheme and the key Sign signs for it
// with, as TestNewAcceptsEveryScheme configures it.
func schemeSetup(t *testing.T, scheme string) (Verifier, string, SignOptions) {
	t.Helper()
	key := "whsec_dGVzdA=="
	cfg := Config{Scheme: scheme, Secrets: []string{key}}
	opts := SignOptions{ID: "id-1", EventType: "push", Timestamp: time.Now(), URL: "https://example.com/hooks"}
	if scheme == SchemeHMAC {
		cfg.SignatureHeader, opts.SignatureHeader = "X-Sig", "X-Sig"
	}
	if s := registry[scheme]; s.preset != nil && s.preset.SecretBase64 {
		key = "dGVzdA=="
		cfg.Secrets = []string{key}
	}
	if d, _ := Lookup(scheme); d.Keys == KeyPublic {
		cfg.Secrets, cfg.PublicKeys = nil, []string{testPublicKey(scheme)}
		key = testPrivateKey(scheme)
	}
	return setup(t, cfg), key, opts
}

// withoutHeaderCheck are the schemes that cannot tell from the headers
// that a POST is no event: their credential is in the body, or an unsigned
// POST may be their handshake.
var withoutHeaderCheck = map[string]string{
	"notion":      "its verification POST is unsigned",
	"woocommerce": "its ping is unsigned",
}

// TestCheckHeadersEveryScheme holds every registered scheme to the two
// halves of CheckHeaders' promise: a request Sign made (a genuine one) is
// never refused before its body is read, and a request without any of
// the scheme's headers is, except by the schemes that cannot tell.
func TestCheckHeadersEveryScheme(t *testing.T) {
	for _, scheme := range Schemes() {
		t.Run(scheme, func(t *testing.T) {
			if registry[scheme].signBody != nil {
				t.Skip("the credential is in the body; CheckHeaders has nothing to read")
			}
			v, key, opts := schemeSetup(t, scheme)
			body := []byte(`{"id":"evt_1","type":"push"}`)
			if scheme == "twilio" {
				body = []byte("From=%2B15550100&Body=hi")
			}
			h, err := Sign(scheme, key, body, opts)
			if err != nil {
				t.Fatalf("Sign: %v", err)
			}
			genuine := Request{Method: http.MethodPost, URL: opts.URL, Header: h}
			if err := CheckHeaders(v, genuine); err != nil {
				t.Errorf("CheckHeaders refused a signed request: %v", err)
			}
			genuine.Body = body
			// ErrTimestamp: the signature verified, the body has no
			// timestamp for the schemes that want one there (linear).
			if _, err := v.Verify(genuine); err != nil && !errors.Is(err, ErrTimestamp) {
				t.Errorf("Verify of the signed request: %v (the case is not a genuine request)", err)
			}
			err = CheckHeaders(v, Request{Method: http.MethodPost, URL: opts.URL, Header: http.Header{}})
			if why, ok := withoutHeaderCheck[scheme]; ok {
				if err != nil {
					t.Errorf("CheckHeaders refused a request without headers (%s): %v", why, err)
				}
				return
			}
			if !errors.Is(err, ErrMissingHeader) {
				t.Errorf("CheckHeaders of a request without headers = %v, want ErrMissingHeader", err)
			}
		})
	}
}

// TestCheckHeadersSchemes refuses what each scheme's Verify refuses for
// its headers alone, and lets through what the scheme's docs allow.
func TestCheckHeadersSchemes(t *testing.T) {
	now := time.Now()
	sign := func(scheme string, opts SignOptions) http.Header {
		t.Helper()
		_, key, base := schemeSetup(t, scheme)
		opts.ID, opts.Timestamp, opts.URL = cmp.Or(opts.ID, base.ID), now, base.URL
		h, err := Sign(scheme, key, []byte(`{}`), opts)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	edit := func(h http.Header, kv ...string) http.Header {
		h = h.Clone()
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				h.Del(kv[i])
			} else {
				h.Set(kv[i], kv[i+1])
			}
		}
		return h
	}
	hex64 := strings.Repeat("ab", 32)
	stripe := sign(SchemeStripe, SignOptions{})
	standard := sign(SchemeStandard, SignOptions{})
	svix := sign("svix", SignOptions{})
	contentful := sign("contentful", SignOptions{})
	tests := []struct {
		name    string
		scheme  string
		header  http.Header
		wantErr error // nil: let through
	}{
		{"github/signed", SchemeGitHub, sign(SchemeGitHub, SignOptions{}), nil},
		{"github/sha1 header only", SchemeGitHub, hdr("X-Hub-Signature", "sha1="+strings.Repeat("a", 40)), ErrMissingHeader},
		{"github/no prefix", SchemeGitHub, hdr("X-Hub-Signature-256", hex64), ErrMalformedHeader},
		{"github/63 hex digits", SchemeGitHub, hdr("X-Hub-Signature-256", "sha256="+hex64[1:]), ErrMalformedHeader},
		{"stripe/two v1, second matches", SchemeStripe, edit(stripe, "Stripe-Signature", strings.Replace(stripe.Get("Stripe-Signature"), "v1=", "v1="+hex64+",v1=", 1)), nil},
		{"stripe/v0 beside v1", SchemeStripe, edit(stripe, "Stripe-Signature", stripe.Get("Stripe-Signature")+",v0="+hex64), nil},
		{"stripe/no t", SchemeStripe, hdr("Stripe-Signature", "v1="+hex64), ErrMalformedHeader},
		{"stripe/v0 only", SchemeStripe, hdr("Stripe-Signature", "t=1700000000,v0="+hex64), ErrNoMatch},
		{"stripe/item without =", SchemeStripe, hdr("Stripe-Signature", "t=1700000000,v1"), ErrMalformedHeader},
		{"standard/signed", SchemeStandard, standard, nil},
		{"standard/svix family", SchemeStandard, svix, nil},
		{"svix/webhook family", "svix", standard, nil},
		{"svix/no id", "svix", edit(svix, "Svix-Id", ""), ErrMissingHeader},
		{"standard/timestamp not a number", SchemeStandard, edit(standard, "Webhook-Timestamp", "soon"), ErrMalformedHeader},
		{"standard/empty signature list", SchemeStandard, edit(standard, "Webhook-Signature", " "), ErrMalformedHeader},
		{"standard/v2 only", SchemeStandard, edit(standard, "Webhook-Signature", "v2,abc"), ErrNoMatch},
		{"polar/no signature", "polar", edit(standard, "Webhook-Signature", ""), ErrMissingHeader},
		{"shopify/not base64", SchemeShopify, hdr("X-Shopify-Hmac-Sha256", "***"), ErrMalformedHeader},
		{"contentful/signed", "contentful", contentful, nil},
		{"contentful/list leaves out the timestamp", "contentful", edit(contentful, "X-Contentful-Signed-Headers", "x-contentful-signed-headers"), ErrMalformedHeader},
		{"contentful/no timestamp", "contentful", edit(contentful, "X-Contentful-Timestamp", ""), ErrMissingHeader},
		{"netlify/two parts", "netlify", hdr("X-Webhook-Signature", "a.b"), ErrMalformedHeader},
		{"twilio/not base64", "twilio", hdr("X-Twilio-Signature", "!!"), ErrMalformedHeader},
		{"twilio/sha1 size under the sha256 rule", "twilio", hdr("X-Twilio-Signature", "AAAAAAAAAAAAAAAAAAAAAAAAAAA=", "X-Twilio-Webhooks-Signature-Settings", "algorithm=HMAC_SHA256"), ErrMalformedHeader},
		{"gitlabsigned/no timestamp", "gitlabsigned", edit(standard, "Webhook-Timestamp", ""), ErrMissingHeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, _, _ := schemeSetup(t, tt.scheme)
			err := CheckHeaders(v, Request{Method: http.MethodPost, URL: "https://example.com/hooks", Header: tt.header})
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("CheckHeaders = %v, want %v", err, tt.wantErr)
			}
		})
	}
}
