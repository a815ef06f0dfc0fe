package signature

import (
	"strings"
	"testing"
	"time"
)

func TestNewRejects(t *testing.T) {
	cases := []struct {
		name      string
		cfg       Config
		wantField string // the error must name it
	}{
		{"unknown scheme", Config{Scheme: "GitHub", Secrets: []string{"s"}}, "Scheme"},
		{"empty scheme", Config{Secrets: []string{"s"}}, "Scheme"},
		{"no secrets", Config{Scheme: SchemeGitHub}, "Secrets"},
		{"empty secret", Config{Scheme: SchemeGitHub, Secrets: []string{"s", ""}}, "Secrets[1]"},
		{"secret mode on github", Config{Scheme: SchemeGitHub, Secrets: []string{"s"}, SecretMode: SecretRaw}, "SecretMode"},
		{"unknown secret mode", Config{Scheme: SchemeStandard, Secrets: []string{"whsec_dGVzdA=="}, SecretMode: "hex"}, "SecretMode"},
		{"secret not base64 in base64 mode", Config{Scheme: SchemeStandard, Secrets: []string{"whsec_dGVzdA==", polarSecret}}, "Secrets[1]"},
		{"secret empty after prefix", Config{Scheme: SchemeStandard, Secrets: []string{"whsec_"}}, "Secrets[0]"},
		{"negative tolerance", Config{Scheme: SchemeStripe, Secrets: []string{"s"}, Tolerance: -time.Second}, "Tolerance"},
		{"tolerance and ignore", Config{Scheme: SchemeStripe, Secrets: []string{"s"}, Tolerance: time.Minute, IgnoreTimestamp: true}, "IgnoreTimestamp"},
		{"two delivery id overrides", Config{Scheme: SchemeGitHub, Secrets: []string{"s"}, DeliveryIDHeader: "X-Id", DeliveryIDField: "id"}, "DeliveryIDField"},
		{"two event type overrides", Config{Scheme: SchemeGitHub, Secrets: []string{"s"}, EventTypeHeader: "X-Type", EventTypeField: "type"}, "EventTypeField"},
		{"bad delivery id header name", Config{Scheme: SchemeGitHub, Secrets: []string{"s"}, DeliveryIDHeader: "X Id"}, "DeliveryIDHeader"},
		{"bad event type header name", Config{Scheme: SchemeGitHub, Secrets: []string{"s"}, EventTypeHeader: "X-Type:"}, "EventTypeHeader"},
		{"hmac option on github", Config{Scheme: SchemeGitHub, Secrets: []string{"s"}, Algorithm: "sha1"}, "Algorithm"},
		{"hmac without header", Config{Scheme: SchemeHMAC, Secrets: []string{"s"}}, "SignatureHeader"},
		{"hmac bad header name", Config{Scheme: SchemeHMAC, Secrets: []string{"s"}, SignatureHeader: "X\nSig"}, "SignatureHeader"},
		{"hmac unknown algorithm", Config{Scheme: SchemeHMAC, Secrets: []string{"s"}, SignatureHeader: "X-Sig", Algorithm: "md5"}, "Algorithm"},
		{"hmac unknown encoding", Config{Scheme: SchemeHMAC, Secrets: []string{"s"}, SignatureHeader: "X-Sig", Encoding: "base32"}, "Encoding"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil {
				t.Fatal("New accepted the config")
			}
			if !strings.Contains(err.Error(), tc.wantField) {
				t.Errorf("error %q does not name %s", err, tc.wantField)
			}
			for _, s := range tc.cfg.Secrets {
				if len(s) > len("whsec_") && strings.Contains(err.Error(), s) {
					t.Errorf("error %q contains a secret", err)
				}
			}
		})
	}
}

func TestNewAcceptsEveryScheme(t *testing.T) {
	for _, scheme := range Schemes() {
		t.Run(scheme, func(t *testing.T) {
			cfg := Config{Scheme: scheme, Secrets: []string{"whsec_dGVzdA=="}}
			if scheme == SchemeHMAC {
				cfg.SignatureHeader = "X-Sig"
			}
			if s := registry[scheme]; s.preset != nil && s.preset.SecretBase64 {
				cfg.Secrets = []string{"dGVzdA=="}
			}
			if d, _ := Lookup(scheme); d.Keys == KeyPublic {
				cfg.Secrets, cfg.PublicKeys = nil, []string{testPublicKey(scheme)}
			}
			setup(t, cfg)
		})
	}
}

// TestSignReproducesVectors holds Sign to the published and openssl
// vectors, so tests that build requests with Sign rest on them.
func TestSignReproducesVectors(t *testing.T) {
	unix := func(ts string) time.Time {
		t.Helper()
		n, _ := parseUnix(ts)
		return time.Unix(n, 0)
	}
	cases := []struct {
		name   string
		scheme string
		secret string
		body   string
		opts   SignOptions
		want   map[string]string
	}{
		{"github", SchemeGitHub, githubDocsSecret, githubDocsBody, SignOptions{ID: "d", EventType: "push"},
			map[string]string{"X-Hub-Signature-256": githubDocsSig, "X-Github-Delivery": "d", "X-Github-Event": "push"}},
		{"standard", SchemeStandard, standardSpecSecret, standardSpecBody, SignOptions{ID: standardSpecID, Timestamp: unix(standardSpecTS)},
			map[string]string{"Webhook-Id": standardSpecID, "Webhook-Timestamp": standardSpecTS, "Webhook-Signature": standardSpecSig}},
		{"standard svix", SchemeStandard, standardSpecSecret, standardSpecBody, SignOptions{ID: standardSpecID, Timestamp: unix(standardSpecTS), Svix: true},
			map[string]string{"Svix-Id": standardSpecID, "Svix-Timestamp": standardSpecTS, "Svix-Signature": standardSpecSig}},
		{"standard raw", SchemeStandard, polarSecret, polarBody, SignOptions{ID: polarID, Timestamp: unix(polarTS), SecretMode: SecretRaw},
			map[string]string{"Webhook-Signature": polarSig}},
		{"slack", SchemeSlack, slackDocsSecret, slackDocsBody, SignOptions{Timestamp: unix(slackDocsTS)},
			map[string]string{"X-Slack-Signature": slackDocsSig, "X-Slack-Request-Timestamp": slackDocsTS}},
		{"stripe", SchemeStripe, stripeSecret, stripeBody, SignOptions{Timestamp: unix(stripeTS)},
			map[string]string{"Stripe-Signature": "t=" + stripeTS + ",v1=" + stripeSig}},
		{"shopify", SchemeShopify, shopifySecret, shopifyBody, SignOptions{ID: "e", EventType: "orders/create"},
			map[string]string{"X-Shopify-Hmac-Sha256": shopifySig, "X-Shopify-Event-Id": "e", "X-Shopify-Topic": "orders/create"}},
		{"gitlab", SchemeGitLab, "tok", "{}", SignOptions{ID: "u", EventType: "Push Hook"},
			map[string]string{"X-Gitlab-Token": "tok", "X-Gitlab-Event-Uuid": "u", "X-Gitlab-Event": "Push Hook"}},
		{"hmac sha1 hex", SchemeHMAC, genericSecret, genericBody, SignOptions{SignatureHeader: "Linear-Signature", Algorithm: "sha1"},
			map[string]string{"Linear-Signature": genericSHA1Hex}},
		{"hmac sha512 base64 prefix", SchemeHMAC, genericSecret, genericBody, SignOptions{SignatureHeader: "X-Signature", Algorithm: "sha512", Encoding: "base64", SignaturePrefix: "sha512="},
			map[string]string{"X-Signature": "sha512=" + genericSHA512B64}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, err := Sign(tc.scheme, tc.secret, []byte(tc.body), tc.opts)
			if err != nil {
				t.Fatalf("Sign: %v", err)
			}
			for k, want := range tc.want {
				if got := h.Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
		})
	}
}

func TestSignRejects(t *testing.T) {
	cases := []struct {
		name   string
		scheme string
		secret string
		opts   SignOptions
	}{
		{"unknown scheme", "nosuch", "s", SignOptions{}},
		{"empty secret", SchemeGitHub, "", SignOptions{}},
		{"standard both mode", SchemeStandard, "whsec_dGVzdA==", SignOptions{SecretMode: SecretBoth}},
		{"standard not base64", SchemeStandard, polarSecret, SignOptions{}},
		{"hmac without header", SchemeHMAC, "s", SignOptions{}},
		{"hmac unknown algorithm", SchemeHMAC, "s", SignOptions{SignatureHeader: "X-Sig", Algorithm: "md5"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Sign(tc.scheme, tc.secret, []byte("{}"), tc.opts); err == nil {
				t.Fatal("Sign accepted")
			}
		})
	}
}

// TestSignGeneratesStandardID checks that a load generator gets distinct
// delivery ids without choosing them.
func TestSignGeneratesStandardID(t *testing.T) {
	a, _ := Sign(SchemeStandard, "whsec_dGVzdA==", []byte("{}"), SignOptions{})
	b, _ := Sign(SchemeStandard, "whsec_dGVzdA==", []byte("{}"), SignOptions{})
	idA, idB := a.Get("Webhook-Id"), b.Get("Webhook-Id")
	if !strings.HasPrefix(idA, "msg_") || idA == idB {
		t.Errorf("generated ids %q, %q: want distinct msg_ ids", idA, idB)
	}
	v := setup(t, Config{Scheme: SchemeStandard, Secrets: []string{"whsec_dGVzdA=="}})
	if res, err := v.Verify(reqOf(a, []byte("{}"))); err != nil || res.DeliveryID != idA {
		t.Errorf("Verify = %+v, %v; want id %q", res, err, idA)
	}
}

func TestValidHeaderName(t *testing.T) {
	tests := []struct {
		name   string
		header string
		want   bool
	}{
		{"plain", "X-Hub-Signature-256", true},
		{"token punctuation", "X!#$%&'*+-.^_`|~9", true},
		{"empty", "", false},
		{"space", "X Signature", false},
		{"colon", "X-Sig:", false},
		{"newline", "X-Sig\r\nEvil", false},
		{"non-ASCII", "X-Sïg", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ValidHeaderName(tt.header); got != tt.want {
				t.Errorf("ValidHeaderName(%q) = %v, want %v", tt.header, got, tt.want)
			}
		})
	}
}
