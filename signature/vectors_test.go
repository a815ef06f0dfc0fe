package signature

import (
	"errors"
	"net/http"
	"testing"
	"time"
)

// The published examples, reproduced with openssl before they were written
// here, and vectors computed with openssl for the schemes whose providers
// publish none. Sign is not used: these are the independent oracle.
const (
	githubDocsSecret = "It's a Secret to Everybody"
	githubDocsBody   = "Hello, World!"
	githubDocsSig    = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"

	standardSpecSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	standardSpecID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	standardSpecTS     = "1614265330"
	standardSpecBody   = `{"test": 2432232314}`
	standardSpecSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

	slackDocsSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	slackDocsTS     = "1531420618"
	slackDocsBody   = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	slackDocsSig    = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"

	// openssl dgst -sha256 -hmac whsec_stripe_test_secret over "1700000000.<body>"
	stripeSecret = "whsec_stripe_test_secret"
	stripeTS     = "1700000000"
	stripeBody   = `{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","data":{"object":{"id":"in_1"}},"type":"invoice.paid"}`
	stripeSig    = "5333bc8fe76c0d215035876449b362b661baa0824959c0c4a74600c6ec1331ca"

	shopifySecret = "shpss_app_secret"
	shopifyBody   = `{"order_id":820982911946154508}`
	shopifySig    = "p/CKWDTJwBsg93ZuK6yc3D6uWRy3/detSbOPGCFKFIA="

	genericSecret    = "generic secret"
	genericBody      = "linear body"
	genericSHA1Hex   = "d7cf8f3572b6c4a215e00beae1efced249d2a538"
	genericSHA512B64 = "hiNaoYzGj/MM4wnI8vV2LlVC/kzjsdjoAofQnJLogA9wUNbTx6fq6BhBRyPckN1YsjT0RFwPL2OMUxDbFghL4w=="

	// Polar's SDK mode: the key is the secret string's bytes.
	polarSecret = "polar_whs_abc123"
	polarID     = "msg_2"
	polarTS     = "1700000000"
	polarBody   = `{"type":"order.paid"}`
	polarSig    = "v1,FnPH6xSchA8LZvwbRt95kTqndGy17hMH6R6spSMXoNg="
)

// clockAt returns a clock stopped at the unix time ts.
func clockAt(t *testing.T, ts string) func() time.Time {
	t.Helper()
	unix, ok := parseUnix(ts)
	if !ok {
		t.Fatalf("bad timestamp %q", ts)
	}
	return func() time.Time { return time.Unix(unix, 0) }
}

// setup returns the Verifier for cfg, failing the test if New refuses it.
func setup(t testing.TB, cfg Config) Verifier {
	t.Helper()
	v, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return v
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

type vector struct {
	name   string
	cfg    Config
	header http.Header
	body   string
	want   Result
}

func publishedVectors(t *testing.T) []vector {
	t.Helper()
	return []vector{
		{
			name:   "github/docs example",
			cfg:    Config{Scheme: SchemeGitHub, Secrets: []string{githubDocsSecret}},
			header: hdr("X-Hub-Signature-256", githubDocsSig, "X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958", "X-GitHub-Event", "push"),
			body:   githubDocsBody,
			want:   Result{DeliveryID: "72d3162e-cc78-11e3-81ab-4c9367dc0958", EventType: "push"},
		},
		{
			name:   "standard/reference vector",
			cfg:    Config{Scheme: SchemeStandard, Secrets: []string{standardSpecSecret}, Now: clockAt(t, standardSpecTS)},
			header: hdr("webhook-id", standardSpecID, "webhook-timestamp", standardSpecTS, "webhook-signature", standardSpecSig),
			body:   standardSpecBody,
			want:   Result{DeliveryID: standardSpecID},
		},
		{
			name:   "slack/docs example",
			cfg:    Config{Scheme: SchemeSlack, Secrets: []string{slackDocsSecret}, Now: clockAt(t, slackDocsTS)},
			header: hdr("X-Slack-Signature", slackDocsSig, "X-Slack-Request-Timestamp", slackDocsTS),
			body:   slackDocsBody,
			want:   Result{DeliveryID: bodyID([]byte(slackDocsBody))},
		},
		{
			name:   "stripe/openssl vector",
			cfg:    Config{Scheme: SchemeStripe, Secrets: []string{stripeSecret}, Now: clockAt(t, stripeTS)},
			header: hdr("Stripe-Signature", "t="+stripeTS+",v1="+stripeSig),
			body:   stripeBody,
			want:   Result{DeliveryID: "evt_1NG8Du2eZvKYlo2CUI79vXWy", EventType: "invoice.paid"},
		},
		{
			name:   "shopify/openssl vector",
			cfg:    Config{Scheme: SchemeShopify, Secrets: []string{shopifySecret}},
			header: hdr("X-Shopify-Hmac-Sha256", shopifySig, "X-Shopify-Event-Id", "98880550-7158-44d4-b7cd-2c97c8a091b5", "X-Shopify-Topic", "orders/create"),
			body:   shopifyBody,
			want:   Result{DeliveryID: "98880550-7158-44d4-b7cd-2c97c8a091b5:orders/create", EventType: "orders/create"},
		},
		{
			name:   "hmac/sha1 hex openssl vector",
			cfg:    Config{Scheme: SchemeHMAC, Secrets: []string{genericSecret}, SignatureHeader: "Linear-Signature", Algorithm: "sha1"},
			header: hdr("Linear-Signature", genericSHA1Hex),
			body:   genericBody,
			want:   Result{DeliveryID: bodyID([]byte(genericBody))},
		},
		{
			name:   "hmac/sha512 base64 prefixed openssl vector",
			cfg:    Config{Scheme: SchemeHMAC, Secrets: []string{genericSecret}, SignatureHeader: "X-Signature", Algorithm: "sha512", Encoding: "base64", SignaturePrefix: "sha512="},
			header: hdr("X-Signature", "sha512="+genericSHA512B64),
			body:   genericBody,
			want:   Result{DeliveryID: bodyID([]byte(genericBody))},
		},
		{
			name:   "standard/polar raw secret openssl vector",
			cfg:    Config{Scheme: SchemeStandard, Secrets: []string{polarSecret}, SecretMode: SecretRaw, Now: clockAt(t, polarTS)},
			header: hdr("webhook-id", polarID, "webhook-timestamp", polarTS, "webhook-signature", polarSig),
			body:   polarBody,
			want:   Result{DeliveryID: polarID, EventType: "order.paid"},
		},
	}
}

func TestPublishedVectors(t *testing.T) {
	for _, tc := range publishedVectors(t) {
		t.Run(tc.name, func(t *testing.T) {
			v := setup(t, tc.cfg)
			got, err := v.Verify(reqOf(tc.header, []byte(tc.body)))
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if got != tc.want {
				t.Errorf("Verify = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestOneByteChange flips one byte of the body, and of the id and timestamp
// where they are signed, in each published vector: none may verify.
func TestOneByteChange(t *testing.T) {
	flip := func(s string, i int) string {
		b := []byte(s)
		b[i] ^= 0x01
		return string(b)
	}
	for _, tc := range publishedVectors(t) {
		v := setup(t, tc.cfg)
		for i := range len(tc.body) {
			if _, err := v.Verify(reqOf(tc.header, []byte(flip(tc.body, i)))); !errors.Is(err, ErrNoMatch) {
				t.Fatalf("%s: body byte %d flipped: err = %v, want ErrNoMatch", tc.name, i, err)
			}
		}
		for _, name := range []string{"Webhook-Id", "Webhook-Timestamp", "X-Slack-Request-Timestamp"} {
			value := tc.header.Get(name)
			if value == "" {
				continue
			}
			// The last digit: still a canonical timestamp, within tolerance.
			h := tc.header.Clone()
			h.Set(name, flip(value, len(value)-1))
			if _, err := v.Verify(reqOf(h, []byte(tc.body))); !errors.Is(err, ErrNoMatch) {
				t.Errorf("%s: %s changed: err = %v, want ErrNoMatch", tc.name, name, err)
			}
		}
		if sig := tc.header.Get("Stripe-Signature"); sig != "" {
			h := tc.header.Clone()
			h.Set("Stripe-Signature", "t=1700000001"+sig[len("t=1700000000"):])
			if _, err := v.Verify(reqOf(h, []byte(tc.body))); !errors.Is(err, ErrNoMatch) {
				t.Errorf("%s: t changed: err = %v, want ErrNoMatch", tc.name, err)
			}
		}
	}
}

// reqOf is the Request of a POST with h and body.
func reqOf(h http.Header, body []byte) Request {
	return Request{Method: http.MethodPost, Header: h, Body: body}
}
