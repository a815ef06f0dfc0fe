package signature

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

var testNow = time.Unix(1700000000, 0)

func fixedClock() time.Time { return testNow }

// signed returns Sign's headers with optional overrides: a value of ""
// deletes the header.
func signed(t *testing.T, scheme, secret, body string, opts SignOptions, set ...string) http.Header {
	t.Helper()
	if opts.Timestamp.IsZero() {
		opts.Timestamp = testNow
	}
	h, err := Sign(scheme, secret, []byte(body), opts)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	for i := 0; i+1 < len(set); i += 2 {
		if set[i+1] == "" {
			h.Del(set[i])
		} else {
			h.Set(set[i], set[i+1])
		}
	}
	return h
}

func at(d time.Duration) SignOptions { return SignOptions{Timestamp: testNow.Add(d)} }

// stripeHeader builds a Stripe-Signature with the given v1 MACs at testNow.
func stripeHeader(t *testing.T, body string, extra string, secrets ...string) http.Header {
	t.Helper()
	var parts []string
	for _, s := range secrets {
		sig := signed(t, SchemeStripe, s, body, SignOptions{}).Get("Stripe-Signature")
		_, v1, _ := strings.Cut(sig, ",")
		parts = append(parts, v1)
	}
	value := "t=1700000000," + strings.Join(parts, ",")
	if extra != "" {
		value += "," + extra
	}
	return hdr("Stripe-Signature", value)
}

func TestVerify(t *testing.T) {
	const (
		s1, s2, s3 = "secret-one", "secret-two", "secret-three"
		jsonBody   = `{"id":"evt_42","type":"customer.created","data":{"id":"cus_1","type":"inner"}}`
	)
	std := func(secrets ...string) Config {
		return Config{Scheme: SchemeStandard, Secrets: secrets, Now: fixedClock}
	}
	stdKey := "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	stdSig := func(secret string, opts SignOptions) string {
		opts.ID, opts.Timestamp = "msg_1", testNow
		return signed(t, SchemeStandard, secret, jsonBody, opts).Get("Webhook-Signature")
	}
	stdHeader := func(sig string) http.Header {
		return hdr("Webhook-Id", "msg_1", "Webhook-Timestamp", "1700000000", "Webhook-Signature", sig)
	}
	manySigs := func(n int, last string) string {
		s := strings.Repeat("v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= ", n-1)
		return s + last
	}
	manyV1 := func(n int) string {
		return strings.TrimSuffix(strings.Repeat("v1="+strings.Repeat("0", 64)+",", n), ",")
	}
	cases := []struct {
		name    string
		cfg     Config
		header  http.Header
		body    string
		want    Result
		wantErr error
	}{
		// github
		{name: "github/verifies", cfg: Config{Scheme: SchemeGitHub, Secrets: []string{s1}},
			header: signed(t, SchemeGitHub, s1, "{}", SignOptions{ID: "d-1", EventType: "push"}), body: "{}",
			want: Result{DeliveryID: "d-1", EventType: "push"}},
		{name: "github/uppercase hex verifies", cfg: Config{Scheme: SchemeGitHub, Secrets: []string{githubDocsSecret}},
			header: hdr("X-Hub-Signature-256", "sha256="+strings.ToUpper(githubDocsSig[7:])), body: githubDocsBody,
			want: Result{DeliveryID: bodyID([]byte(githubDocsBody))}},
		{name: "github/missing header", cfg: Config{Scheme: SchemeGitHub, Secrets: []string{s1}},
			header: hdr("X-GitHub-Delivery", "d-1"), body: "{}", wantErr: ErrMissingHeader},
		{name: "github/legacy sha1 header only", cfg: Config{Scheme: SchemeGitHub, Secrets: []string{s1}},
			header: hdr("X-Hub-Signature", "sha1=0000000000000000000000000000000000000000"), body: "{}", wantErr: ErrMissingHeader},
		{name: "github/no prefix", cfg: Config{Scheme: SchemeGitHub, Secrets: []string{githubDocsSecret}},
			header: hdr("X-Hub-Signature-256", githubDocsSig[7:]), body: githubDocsBody, wantErr: ErrMalformedHeader},
		{name: "github/bad hex", cfg: Config{Scheme: SchemeGitHub, Secrets: []string{s1}},
			header: hdr("X-Hub-Signature-256", "sha256="+strings.Repeat("zz", 32)), body: "{}", wantErr: ErrMalformedHeader},
		{name: "github/short hex", cfg: Config{Scheme: SchemeGitHub, Secrets: []string{githubDocsSecret}},
			header: hdr("X-Hub-Signature-256", githubDocsSig[:len(githubDocsSig)-2]), body: githubDocsBody, wantErr: ErrMalformedHeader},
		{name: "github/header over cap", cfg: Config{Scheme: SchemeGitHub, Secrets: []string{s1}},
			header: hdr("X-Hub-Signature-256", "sha256="+strings.Repeat("0", MaxHeaderLen)), body: "{}", wantErr: ErrMalformedHeader},
		{name: "github/wrong secret", cfg: Config{Scheme: SchemeGitHub, Secrets: []string{s2}},
			header: signed(t, SchemeGitHub, s1, "{}", SignOptions{}), body: "{}", wantErr: ErrNoMatch},
		{name: "github/rotation, third secret matches", cfg: Config{Scheme: SchemeGitHub, Secrets: []string{s1, s2, s3}},
			header: signed(t, SchemeGitHub, s3, "{}", SignOptions{ID: "d-1"}), body: "{}",
			want: Result{SecretIndex: 2, DeliveryID: "d-1"}},
		{name: "github/delivery id override header", cfg: Config{Scheme: SchemeGitHub, Secrets: []string{s1}, DeliveryIDHeader: "X-Request-Id", EventTypeField: "action"},
			header: signed(t, SchemeGitHub, s1, `{"action":"opened"}`, SignOptions{ID: "d-1", EventType: "issues"}, "X-Request-Id", "r-9"), body: `{"action":"opened"}`,
			want: Result{DeliveryID: "r-9", EventType: "opened"}},
		{name: "github/override header absent falls back to scheme id", cfg: Config{Scheme: SchemeGitHub, Secrets: []string{s1}, DeliveryIDHeader: "X-Request-Id", EventTypeField: "action"},
			header: signed(t, SchemeGitHub, s1, `{}`, SignOptions{ID: "d-1", EventType: "issues"}), body: `{}`,
			want: Result{DeliveryID: "d-1", EventType: "issues"}},

		// stripe
		{name: "stripe/verifies, id and type from JSON", cfg: Config{Scheme: SchemeStripe, Secrets: []string{s1}, Now: fixedClock},
			header: signed(t, SchemeStripe, s1, jsonBody, SignOptions{}), body: jsonBody,
			want: Result{DeliveryID: "evt_42", EventType: "customer.created"}},
		{name: "stripe/missing header", cfg: Config{Scheme: SchemeStripe, Secrets: []string{s1}, Now: fixedClock},
			header: hdr("Stripe-Signatur", "t=1"), body: jsonBody, wantErr: ErrMissingHeader},
		{name: "stripe/no t", cfg: Config{Scheme: SchemeStripe, Secrets: []string{s1}, Now: fixedClock},
			header: hdr("Stripe-Signature", "v1="+strings.Repeat("0", 64)), body: jsonBody, wantErr: ErrMalformedHeader},
		{name: "stripe/two t", cfg: Config{Scheme: SchemeStripe, Secrets: []string{s1}, Now: fixedClock},
			header: hdr("Stripe-Signature", "t=1700000000,t=1700000000,v1="+strings.Repeat("0", 64)), body: jsonBody, wantErr: ErrMalformedHeader},
		{name: "stripe/t not a number", cfg: Config{Scheme: SchemeStripe, Secrets: []string{s1}, Now: fixedClock},
			header: hdr("Stripe-Signature", "t=17e8,v1="+strings.Repeat("0", 64)), body: jsonBody, wantErr: ErrMalformedHeader},
		{name: "stripe/t with leading zero", cfg: Config{Scheme: SchemeStripe, Secrets: []string{s1}, Now: fixedClock},
			header: hdr("Stripe-Signature", "t=01700000000,v1="+strings.Repeat("0", 64)), body: jsonBody, wantErr: ErrMalformedHeader},
		{name: "stripe/item without =", cfg: Config{Scheme: SchemeStripe, Secrets: []string{s1}, Now: fixedClock},
			header: hdr("Stripe-Signature", "t=1700000000,v1"), body: jsonBody, wantErr: ErrMalformedHeader},
		{name: "stripe/only v0 is not usable", cfg: Config{Scheme: SchemeStripe, Secrets: []string{s1}, Now: fixedClock},
			header: hdr("Stripe-Signature", "t=1700000000,v0="+strings.Repeat("0", 64)), body: jsonBody, wantErr: ErrNoMatch},
		{name: "stripe/undecodable v1 skipped, next matches", cfg: Config{Scheme: SchemeStripe, Secrets: []string{s1}, Now: fixedClock},
			header: hdr("Stripe-Signature", "t=1700000000,v1=nothex,"+stripeHeader(t, jsonBody, "", s1).Get("Stripe-Signature")[13:]), body: jsonBody,
			want: Result{DeliveryID: "evt_42", EventType: "customer.created"}},
		{name: "stripe/two v1, second matches", cfg: Config{Scheme: SchemeStripe, Secrets: []string{s1}, Now: fixedClock},
			header: stripeHeader(t, jsonBody, "v0=abc,scheme2=x", s2, s1), body: jsonBody,
			want: Result{DeliveryID: "evt_42", EventType: "customer.created"}},
		{name: "stripe/two v1, none matches", cfg: Config{Scheme: SchemeStripe, Secrets: []string{s3}, Now: fixedClock},
			header: stripeHeader(t, jsonBody, "", s2, s1), body: jsonBody, wantErr: ErrNoMatch},
		{name: "stripe/rotation, second secret matches", cfg: Config{Scheme: SchemeStripe, Secrets: []string{s3, s1}, Now: fixedClock},
			header: stripeHeader(t, jsonBody, "", s2, s1), body: jsonBody,
			want: Result{SecretIndex: 1, DeliveryID: "evt_42", EventType: "customer.created"}},
		{name: "stripe/16 signatures, last matches", cfg: Config{Scheme: SchemeStripe, Secrets: []string{s1}, Now: fixedClock},
			header: hdr("Stripe-Signature", "t=1700000000,"+manyV1(15)+","+stripeHeader(t, jsonBody, "", s1).Get("Stripe-Signature")[13:]), body: jsonBody,
			want: Result{DeliveryID: "evt_42", EventType: "customer.created"}},
		{name: "stripe/17 signatures is over the cap", cfg: Config{Scheme: SchemeStripe, Secrets: []string{s1}, Now: fixedClock},
			header: hdr("Stripe-Signature", "t=1700000000,"+manyV1(16)+","+stripeHeader(t, jsonBody, "", s1).Get("Stripe-Signature")[13:]), body: jsonBody,
			wantErr: ErrMalformedHeader},
		{name: "stripe/too old", cfg: Config{Scheme: SchemeStripe, Secrets: []string{s1}, Now: fixedClock},
			header: signed(t, SchemeStripe, s1, jsonBody, at(-DefaultTolerance-time.Second)), body: jsonBody, wantErr: ErrTimestamp},
		{name: "stripe/too far in the future", cfg: Config{Scheme: SchemeStripe, Secrets: []string{s1}, Now: fixedClock},
			header: signed(t, SchemeStripe, s1, jsonBody, at(DefaultTolerance+time.Second)), body: jsonBody, wantErr: ErrTimestamp},
		{name: "stripe/exactly tolerance old verifies", cfg: Config{Scheme: SchemeStripe, Secrets: []string{s1}, Now: fixedClock},
			header: signed(t, SchemeStripe, s1, jsonBody, at(-DefaultTolerance)), body: jsonBody,
			want: Result{DeliveryID: "evt_42", EventType: "customer.created"}},
		{name: "stripe/exactly tolerance ahead verifies", cfg: Config{Scheme: SchemeStripe, Secrets: []string{s1}, Now: fixedClock},
			header: signed(t, SchemeStripe, s1, jsonBody, at(DefaultTolerance)), body: jsonBody,
			want: Result{DeliveryID: "evt_42", EventType: "customer.created"}},
		{name: "stripe/custom tolerance", cfg: Config{Scheme: SchemeStripe, Secrets: []string{s1}, Now: fixedClock, Tolerance: time.Minute},
			header: signed(t, SchemeStripe, s1, jsonBody, at(-2*time.Minute)), body: jsonBody, wantErr: ErrTimestamp},
		{name: "stripe/tolerance off accepts a day old", cfg: Config{Scheme: SchemeStripe, Secrets: []string{s1}, Now: fixedClock, IgnoreTimestamp: true},
			header: signed(t, SchemeStripe, s1, jsonBody, at(-24*time.Hour)), body: jsonBody,
			want: Result{DeliveryID: "evt_42", EventType: "customer.created"}},
		{name: "stripe/forged and stale is no match, not timestamp", cfg: Config{Scheme: SchemeStripe, Secrets: []string{s2}, Now: fixedClock},
			header: signed(t, SchemeStripe, s1, jsonBody, at(-time.Hour)), body: jsonBody, wantErr: ErrNoMatch},
		{name: "stripe/invalid JSON and bad signature is no match", cfg: Config{Scheme: SchemeStripe, Secrets: []string{s2}, Now: fixedClock},
			header: signed(t, SchemeStripe, s1, `{"id":`, SignOptions{}), body: `{"id":`, wantErr: ErrNoMatch},
		{name: "stripe/invalid JSON but signed falls back to body hash", cfg: Config{Scheme: SchemeStripe, Secrets: []string{s1}, Now: fixedClock},
			header: signed(t, SchemeStripe, s1, `{"id":"evt_1"`, SignOptions{}), body: `{"id":"evt_1"`,
			want: Result{DeliveryID: bodyID([]byte(`{"id":"evt_1"`))}},
		{name: "stripe/id field override and event type header", cfg: Config{Scheme: SchemeStripe, Secrets: []string{s1}, Now: fixedClock, DeliveryIDField: "request", EventTypeHeader: "X-Kind"},
			header: signed(t, SchemeStripe, s1, `{"id":"evt_1","request":"req_7","type":"a"}`, SignOptions{}, "X-Kind", "k"), body: `{"id":"evt_1","request":"req_7","type":"a"}`,
			want: Result{DeliveryID: "req_7", EventType: "k"}},

		// standard
		{name: "standard/verifies", cfg: std(stdKey),
			header: stdHeader(stdSig(stdKey, SignOptions{})), body: jsonBody,
			want: Result{DeliveryID: "msg_1", EventType: "customer.created"}},
		{name: "standard/svix headers", cfg: std(stdKey),
			header: signed(t, SchemeStandard, stdKey, jsonBody, SignOptions{ID: "msg_svix", Svix: true}), body: jsonBody,
			want: Result{DeliveryID: "msg_svix", EventType: "customer.created"}},
		{name: "standard/secret without prefix", cfg: std("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
			header: stdHeader(stdSig(stdKey, SignOptions{})), body: jsonBody,
			want: Result{DeliveryID: "msg_1", EventType: "customer.created"}},
		{name: "standard/unpadded base64 secret", cfg: std("whsec_dGVzdA"), // "test"
			header: stdHeader(stdSig("whsec_dGVzdA==", SignOptions{})), body: jsonBody,
			want: Result{DeliveryID: "msg_1", EventType: "customer.created"}},
		{name: "standard/unpadded signature", cfg: std(stdKey),
			header: stdHeader(strings.TrimRight(stdSig(stdKey, SignOptions{}), "=")), body: jsonBody,
			want: Result{DeliveryID: "msg_1", EventType: "customer.created"}},
		{name: "standard/missing id", cfg: std(stdKey),
			header: hdr("Webhook-Timestamp", "1700000000", "Webhook-Signature", stdSig(stdKey, SignOptions{})), body: jsonBody, wantErr: ErrMissingHeader},
		{name: "standard/missing timestamp", cfg: std(stdKey),
			header: hdr("Webhook-Id", "msg_1", "Webhook-Signature", stdSig(stdKey, SignOptions{})), body: jsonBody, wantErr: ErrMissingHeader},
		{name: "standard/missing signature", cfg: std(stdKey),
			header: hdr("Webhook-Id", "msg_1", "Webhook-Timestamp", "1700000000"), body: jsonBody, wantErr: ErrMissingHeader},
		{name: "standard/timestamp not a number", cfg: std(stdKey),
			header: hdr("Webhook-Id", "msg_1", "Webhook-Timestamp", "-1700000000", "Webhook-Signature", stdSig(stdKey, SignOptions{})), body: jsonBody, wantErr: ErrMalformedHeader},
		{name: "standard/blank signature list", cfg: std(stdKey),
			header: stdHeader("   "), body: jsonBody, wantErr: ErrMalformedHeader},
		{name: "standard/only v1a is not usable", cfg: std(stdKey),
			header: stdHeader("v1a,AAAA v2,BBBB"), body: jsonBody, wantErr: ErrNoMatch},
		{name: "standard/unknown and broken entries skipped", cfg: std(stdKey),
			header: stdHeader("v1a,AAAA nocomma v1,!!!! " + stdSig(stdKey, SignOptions{})), body: jsonBody,
			want: Result{DeliveryID: "msg_1", EventType: "customer.created"}},
		{name: "standard/16 signatures, last matches", cfg: std(stdKey),
			header: stdHeader(manySigs(16, stdSig(stdKey, SignOptions{}))), body: jsonBody,
			want: Result{DeliveryID: "msg_1", EventType: "customer.created"}},
		{name: "standard/17 signatures is over the cap", cfg: std(stdKey),
			header: stdHeader(manySigs(17, stdSig(stdKey, SignOptions{}))), body: jsonBody, wantErr: ErrMalformedHeader},
		{name: "standard/id over cap", cfg: std(stdKey),
			header: hdr("Webhook-Id", strings.Repeat("m", MaxHeaderLen+1), "Webhook-Timestamp", "1700000000", "Webhook-Signature", stdSig(stdKey, SignOptions{})), body: jsonBody, wantErr: ErrMalformedHeader},
		{name: "standard/too old", cfg: std(stdKey),
			header: signed(t, SchemeStandard, stdKey, jsonBody, at(-6*time.Minute)), body: jsonBody, wantErr: ErrTimestamp},
		{name: "standard/too far in the future", cfg: std(stdKey),
			header: signed(t, SchemeStandard, stdKey, jsonBody, at(6*time.Minute)), body: jsonBody, wantErr: ErrTimestamp},
		{name: "standard/forged and stale is no match, not timestamp", cfg: std(stdKey),
			header: signed(t, SchemeStandard, stdKey, jsonBody, SignOptions{SecretMode: SecretRaw, Timestamp: testNow.Add(-time.Hour)}), body: jsonBody, wantErr: ErrNoMatch},
		{name: "standard/raw-signed sender, base64 mode", cfg: std(stdKey),
			header: stdHeader(stdSig(stdKey, SignOptions{SecretMode: SecretRaw})), body: jsonBody, wantErr: ErrNoMatch},
		{name: "standard/raw-signed sender, raw mode", cfg: Config{Scheme: SchemeStandard, Secrets: []string{stdKey}, SecretMode: SecretRaw, Now: fixedClock},
			header: stdHeader(stdSig(stdKey, SignOptions{SecretMode: SecretRaw})), body: jsonBody,
			want: Result{DeliveryID: "msg_1", EventType: "customer.created"}},
		{name: "standard/base64 sender, raw mode", cfg: Config{Scheme: SchemeStandard, Secrets: []string{stdKey}, SecretMode: SecretRaw, Now: fixedClock},
			header: stdHeader(stdSig(stdKey, SignOptions{})), body: jsonBody, wantErr: ErrNoMatch},
		{name: "standard/both mode, raw sender with whsec_ secret", cfg: Config{Scheme: SchemeStandard, Secrets: []string{stdKey}, SecretMode: SecretBoth, Now: fixedClock},
			header: stdHeader(stdSig(stdKey, SignOptions{SecretMode: SecretRaw})), body: jsonBody,
			want: Result{DeliveryID: "msg_1", EventType: "customer.created"}},
		{name: "standard/both mode, base64 sender", cfg: Config{Scheme: SchemeStandard, Secrets: []string{stdKey}, SecretMode: SecretBoth, Now: fixedClock},
			header: stdHeader(stdSig(stdKey, SignOptions{})), body: jsonBody,
			want: Result{DeliveryID: "msg_1", EventType: "customer.created"}},
		{name: "standard/both mode, rotation to a non-base64 secret", cfg: Config{Scheme: SchemeStandard, Secrets: []string{stdKey, polarSecret}, SecretMode: SecretBoth, Now: fixedClock},
			header: stdHeader(stdSig(polarSecret, SignOptions{SecretMode: SecretRaw})), body: jsonBody,
			want: Result{SecretIndex: 1, DeliveryID: "msg_1", EventType: "customer.created"}},
		{name: "standard/tolerance off", cfg: Config{Scheme: SchemeStandard, Secrets: []string{stdKey}, IgnoreTimestamp: true, Now: fixedClock},
			header: signed(t, SchemeStandard, stdKey, jsonBody, SignOptions{ID: "m", Timestamp: testNow.Add(-72 * time.Hour)}), body: jsonBody,
			want: Result{DeliveryID: "m", EventType: "customer.created"}},
		{name: "standard/delivery id field override", cfg: Config{Scheme: SchemeStandard, Secrets: []string{stdKey}, Now: fixedClock, DeliveryIDField: "id"},
			header: stdHeader(stdSig(stdKey, SignOptions{})), body: jsonBody,
			want: Result{DeliveryID: "evt_42", EventType: "customer.created"}},

		// slack
		{name: "slack/missing signature", cfg: Config{Scheme: SchemeSlack, Secrets: []string{s1}, Now: fixedClock},
			header: signed(t, SchemeSlack, s1, "a=b", SignOptions{}, "X-Slack-Signature", ""), body: "a=b", wantErr: ErrMissingHeader},
		{name: "slack/missing timestamp", cfg: Config{Scheme: SchemeSlack, Secrets: []string{s1}, Now: fixedClock},
			header: signed(t, SchemeSlack, s1, "a=b", SignOptions{}, "X-Slack-Request-Timestamp", ""), body: "a=b", wantErr: ErrMissingHeader},
		{name: "slack/timestamp malformed", cfg: Config{Scheme: SchemeSlack, Secrets: []string{s1}, Now: fixedClock},
			header: signed(t, SchemeSlack, s1, "a=b", SignOptions{}, "X-Slack-Request-Timestamp", "1700000000.5"), body: "a=b", wantErr: ErrMalformedHeader},
		{name: "slack/no =", cfg: Config{Scheme: SchemeSlack, Secrets: []string{s1}, Now: fixedClock},
			header: signed(t, SchemeSlack, s1, "a=b", SignOptions{}, "X-Slack-Signature", "v0"), body: "a=b", wantErr: ErrMalformedHeader},
		{name: "slack/bad hex", cfg: Config{Scheme: SchemeSlack, Secrets: []string{s1}, Now: fixedClock},
			header: signed(t, SchemeSlack, s1, "a=b", SignOptions{}, "X-Slack-Signature", "v0=xyz"), body: "a=b", wantErr: ErrMalformedHeader},
		{name: "slack/unknown version", cfg: Config{Scheme: SchemeSlack, Secrets: []string{s1}, Now: fixedClock},
			header: signed(t, SchemeSlack, s1, "a=b", SignOptions{}, "X-Slack-Signature", "v1="+strings.Repeat("0", 64)), body: "a=b", wantErr: ErrNoMatch},
		{name: "slack/too old", cfg: Config{Scheme: SchemeSlack, Secrets: []string{s1}, Now: fixedClock},
			header: signed(t, SchemeSlack, s1, "a=b", at(-10*time.Minute)), body: "a=b", wantErr: ErrTimestamp},
		{name: "slack/too far in the future", cfg: Config{Scheme: SchemeSlack, Secrets: []string{s1}, Now: fixedClock},
			header: signed(t, SchemeSlack, s1, "a=b", at(10*time.Minute)), body: "a=b", wantErr: ErrTimestamp},
		{name: "slack/forged and stale is no match, not timestamp", cfg: Config{Scheme: SchemeSlack, Secrets: []string{s2}, Now: fixedClock},
			header: signed(t, SchemeSlack, s1, "a=b", at(-time.Hour)), body: "a=b", wantErr: ErrNoMatch},
		{name: "slack/rotation", cfg: Config{Scheme: SchemeSlack, Secrets: []string{s1, s2}, Now: fixedClock},
			header: signed(t, SchemeSlack, s2, "a=b", SignOptions{}), body: "a=b",
			want: Result{SecretIndex: 1, DeliveryID: bodyID([]byte("a=b"))}},

		// shopify
		{name: "shopify/webhook id when no event id", cfg: Config{Scheme: SchemeShopify, Secrets: []string{s1}},
			header: signed(t, SchemeShopify, s1, "{}", SignOptions{EventType: "orders/paid"}, "X-Shopify-Webhook-Id", "w-1"), body: "{}",
			want: Result{DeliveryID: "w-1", EventType: "orders/paid"}},
		{name: "shopify/event id and topic win over webhook id", cfg: Config{Scheme: SchemeShopify, Secrets: []string{s1}},
			header: signed(t, SchemeShopify, s1, "{}", SignOptions{ID: "e-1", EventType: "orders/create"}, "X-Shopify-Webhook-Id", "w-1"), body: "{}",
			want: Result{DeliveryID: "e-1:orders/create", EventType: "orders/create"}},
		// One merchant action, two topics: Shopify sends both with one
		// event id, and neither is the other's duplicate.
		{name: "shopify/the same event id under another topic", cfg: Config{Scheme: SchemeShopify, Secrets: []string{s1}},
			header: signed(t, SchemeShopify, s1, "{}", SignOptions{ID: "e-1", EventType: "orders/paid"}, "X-Shopify-Webhook-Id", "w-2"), body: "{}",
			want: Result{DeliveryID: "e-1:orders/paid", EventType: "orders/paid"}},
		{name: "shopify/event id without a topic", cfg: Config{Scheme: SchemeShopify, Secrets: []string{s1}},
			header: signed(t, SchemeShopify, s1, "{}", SignOptions{ID: "e-1"}), body: "{}",
			want: Result{DeliveryID: "e-1"}},
		{name: "shopify/no id is the body hash", cfg: Config{Scheme: SchemeShopify, Secrets: []string{s1}},
			header: signed(t, SchemeShopify, s1, "{}", SignOptions{}), body: "{}",
			want: Result{DeliveryID: bodyID([]byte("{}"))}},
		{name: "shopify/unpadded signature", cfg: Config{Scheme: SchemeShopify, Secrets: []string{shopifySecret}},
			header: hdr("X-Shopify-Hmac-Sha256", strings.TrimRight(shopifySig, "=")), body: shopifyBody,
			want: Result{DeliveryID: bodyID([]byte(shopifyBody))}},
		{name: "shopify/missing header", cfg: Config{Scheme: SchemeShopify, Secrets: []string{s1}},
			header: hdr("X-Shopify-Topic", "orders/paid"), body: "{}", wantErr: ErrMissingHeader},
		{name: "shopify/not base64", cfg: Config{Scheme: SchemeShopify, Secrets: []string{s1}},
			header: hdr("X-Shopify-Hmac-Sha256", "not base64!"), body: "{}", wantErr: ErrMalformedHeader},
		{name: "shopify/hex instead of base64", cfg: Config{Scheme: SchemeShopify, Secrets: []string{s1}},
			header: hdr("X-Shopify-Hmac-Sha256", strings.Repeat("0", 64)), body: "{}", wantErr: ErrMalformedHeader},
		{name: "shopify/wrong secret", cfg: Config{Scheme: SchemeShopify, Secrets: []string{s2}},
			header: signed(t, SchemeShopify, s1, "{}", SignOptions{}), body: "{}", wantErr: ErrNoMatch},

		// gitlab
		{name: "gitlab/token matches", cfg: Config{Scheme: SchemeGitLab, Secrets: []string{s1}},
			header: signed(t, SchemeGitLab, s1, "{}", SignOptions{ID: "u-1", EventType: "Push Hook"}), body: "{}",
			want: Result{DeliveryID: "u-1", EventType: "Push Hook"}},
		{name: "gitlab/rotation", cfg: Config{Scheme: SchemeGitLab, Secrets: []string{s1, s2}},
			header: signed(t, SchemeGitLab, s2, "{}", SignOptions{}), body: "{}",
			want: Result{SecretIndex: 1, DeliveryID: bodyID([]byte("{}"))}},
		{name: "gitlab/missing token", cfg: Config{Scheme: SchemeGitLab, Secrets: []string{s1}},
			header: hdr("X-Gitlab-Event", "Push Hook"), body: "{}", wantErr: ErrMissingHeader},
		{name: "gitlab/wrong token", cfg: Config{Scheme: SchemeGitLab, Secrets: []string{s1}},
			header: hdr("X-Gitlab-Token", s2), body: "{}", wantErr: ErrNoMatch},
		{name: "gitlab/prefix of the token", cfg: Config{Scheme: SchemeGitLab, Secrets: []string{s1}},
			header: hdr("X-Gitlab-Token", s1[:len(s1)-1]), body: "{}", wantErr: ErrNoMatch},
		{name: "gitlab/token over cap", cfg: Config{Scheme: SchemeGitLab, Secrets: []string{s1}},
			header: hdr("X-Gitlab-Token", strings.Repeat("t", MaxHeaderLen+1)), body: "{}", wantErr: ErrMalformedHeader},

		// hmac
		{name: "hmac/sha256 hex default, Linear-style overrides", cfg: Config{Scheme: SchemeHMAC, Secrets: []string{s1}, SignatureHeader: "Linear-Signature", DeliveryIDHeader: "Linear-Delivery", EventTypeField: "type"},
			header: signed(t, SchemeHMAC, s1, `{"type":"Issue","webhookId":"w"}`, SignOptions{SignatureHeader: "Linear-Signature"}, "Linear-Delivery", "ld-1"), body: `{"type":"Issue","webhookId":"w"}`,
			want: Result{DeliveryID: "ld-1", EventType: "Issue"}},
		{name: "hmac/id from JSON field", cfg: Config{Scheme: SchemeHMAC, Secrets: []string{s1}, SignatureHeader: "X-Sig", DeliveryIDField: "event_id"},
			header: signed(t, SchemeHMAC, s1, `{"event_id":12345}`, SignOptions{SignatureHeader: "X-Sig"}), body: `{"event_id":12345}`,
			want: Result{DeliveryID: "12345"}},
		{name: "hmac/missing header", cfg: Config{Scheme: SchemeHMAC, Secrets: []string{s1}, SignatureHeader: "X-Sig"},
			header: hdr("X-Other", "x"), body: "{}", wantErr: ErrMissingHeader},
		{name: "hmac/missing prefix", cfg: Config{Scheme: SchemeHMAC, Secrets: []string{s1}, SignatureHeader: "X-Sig", SignaturePrefix: "sha256="},
			header: signed(t, SchemeHMAC, s1, "{}", SignOptions{SignatureHeader: "X-Sig"}), body: "{}", wantErr: ErrMalformedHeader},
		{name: "hmac/sha256 MAC where sha512 is configured", cfg: Config{Scheme: SchemeHMAC, Secrets: []string{s1}, SignatureHeader: "X-Sig", Algorithm: "sha512"},
			header: signed(t, SchemeHMAC, s1, "{}", SignOptions{SignatureHeader: "X-Sig"}), body: "{}", wantErr: ErrMalformedHeader},
		{name: "hmac/wrong secret", cfg: Config{Scheme: SchemeHMAC, Secrets: []string{s2}, SignatureHeader: "X-Sig", Encoding: "base64"},
			header: signed(t, SchemeHMAC, s1, "{}", SignOptions{SignatureHeader: "X-Sig", Encoding: "base64"}), body: "{}", wantErr: ErrNoMatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := setup(t, tc.cfg)
			got, err := v.Verify(reqOf(tc.header, []byte(tc.body)))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Verify error = %v, want %v", err, tc.wantErr)
				}
				for _, other := range []error{ErrMissingHeader, ErrMalformedHeader, ErrNoMatch, ErrTimestamp} {
					if other != tc.wantErr && errors.Is(err, other) {
						t.Errorf("Verify error %v also matches %v", err, other)
					}
				}
				if got != (Result{}) {
					t.Errorf("Verify = %+v on error, want zero Result", got)
				}
				assertQuiet(t, err, tc.cfg.Secrets, tc.header, tc.body)
				return
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if got != tc.want {
				t.Errorf("Verify = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// assertQuiet fails if err's text repeats a secret, a header value or the
// body: error text reaches logs.
func assertQuiet(t *testing.T, err error, secrets []string, h http.Header, body string) {
	t.Helper()
	text := err.Error()
	leaks := append([]string{body}, secrets...)
	for _, values := range h {
		leaks = append(leaks, values...)
	}
	for _, leak := range leaks {
		if len(leak) >= 6 && strings.Contains(text, leak) {
			t.Errorf("error text %q contains request or secret material %q", text, leak)
		}
	}
}
