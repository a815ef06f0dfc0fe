package signature

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestHeaderNamesCanonical keeps Get from allocating a canonical copy of a
// header name on every request.
func TestHeaderNamesCanonical(t *testing.T) {
	for _, name := range []string{
		headerGitHubSignature, headerGitHubDelivery, headerGitHubEvent, headerStripe,
		headerStandardID, headerStandardTimestamp, headerStandardSignature,
		headerSvixID, headerSvixTimestamp, headerSvixSignature,
		headerSlackSignature, headerSlackTimestamp,
		headerShopifySignature, headerShopifyEventID, headerShopifyWebhookID, headerShopifyTopic,
		headerGitLabToken, headerGitLabUUID, headerGitLabEvent,
	} {
		if c := http.CanonicalHeaderKey(name); c != name {
			t.Errorf("%q is not canonical (%q)", name, c)
		}
	}
}

// TestVerifyAllocations holds the hot path to its budget: nothing but the
// Result strings that are not already header values.
func TestVerifyAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items at random")
	}
	body := benchBody(512)
	cases := []struct {
		name string
		cfg  Config
		opts SignOptions
		want float64
	}{
		{"github, ids in headers", Config{Scheme: SchemeGitHub}, SignOptions{ID: "d", EventType: "push"}, 0},
		// shopify: the id is the event id and the topic joined, a new string.
		{"shopify, ids in headers", Config{Scheme: SchemeShopify}, SignOptions{ID: "e", EventType: "orders/create"}, 1},
		{"gitlab, ids in headers", Config{Scheme: SchemeGitLab}, SignOptions{ID: "u", EventType: "Push Hook"}, 0},
		{"standard, type from JSON", Config{Scheme: SchemeStandard, Now: fixedClock}, SignOptions{ID: "m"}, 1},
		{"stripe, id and type from JSON", Config{Scheme: SchemeStripe, Now: fixedClock}, SignOptions{}, 2},
		{"slack, body hash id", Config{Scheme: SchemeSlack, Now: fixedClock}, SignOptions{}, 1},
		{"hmac, override header", Config{Scheme: SchemeHMAC, SignatureHeader: "x-sig", DeliveryIDHeader: "x-id"}, SignOptions{SignatureHeader: "X-Sig"}, 0},
		{"paddle, pairs, id and type from JSON", Config{Scheme: "paddle", Now: fixedClock}, SignOptions{}, 2},
		{"linear, ids in headers, timestamp from JSON", Config{Scheme: "linear", Now: fixedClock}, SignOptions{ID: "l", EventType: "Issue"}, 0},
		{"zendesk, rfc3339 timestamp header, type from JSON", Config{Scheme: "zendesk", Now: fixedClock}, SignOptions{ID: "8350205582"}, 1},
		{"webflow, ms timestamp header, type from JSON", Config{Scheme: "webflow", Now: fixedClock}, SignOptions{}, 1},
		{"coinbase, nested id and type from JSON", Config{Scheme: "coinbase"}, SignOptions{}, 2},
		{"engine, url, method, header and timestamp", Config{Scheme: SchemeHMAC, Now: fixedClock, SignatureHeader: "X-Sig", TimestampHeader: "X-Ts", DeliveryIDHeader: "X-Id",
			SignedContent: "{method} {url}\n{timestamp}.{header.X-Id}.{body}"}, SignOptions{SignatureHeader: "X-Sig", TimestampHeader: "X-Ts", URL: "https://example.com/hook",
			SignedContent: "{method} {url}\n{timestamp}.{header.X-Id}.{body}", Header: http.Header{"X-Id": {"id-1"}}}, 0},
		// ed25519: one more, as crypto/ed25519 allocates its error for each
		// key that does not verify (here the first of two).
		{"discord, id and type from JSON", Config{Scheme: SchemeDiscord, Now: fixedClock}, SignOptions{}, 3},
		{"telnyx, body hash id", Config{Scheme: SchemeTelnyx, Now: fixedClock}, SignOptions{}, 2},
		{"standard v1a, type from JSON", Config{Scheme: SchemeStandard, Now: fixedClock}, SignOptions{ID: "m"}, 2},
	}
	const secret = "whsec_dGVzdA=="
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := secret
			if strings.HasPrefix(tc.name, "discord") || strings.HasPrefix(tc.name, "telnyx") || strings.HasPrefix(tc.name, "standard v1a") {
				tc.cfg.PublicKeys, key = []string{otherEdKey(), testPublicKey(tc.cfg.Scheme)}, testPrivateKey(tc.cfg.Scheme)
				if tc.cfg.Scheme == SchemeStandard {
					key = "whsk_" + edSeedB64
				}
			} else {
				tc.cfg.Secrets = []string{"whsec_b3RoZXI=", secret}
			}
			v := setup(t, tc.cfg)
			tc.opts.Timestamp = testNow
			h, err := Sign(tc.cfg.Scheme, key, body, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			h.Set("X-Id", "id-1")
			req := reqOf(h, body)
			req.URL = tc.opts.URL
			got := testing.AllocsPerRun(200, func() {
				if _, err := v.Verify(req); err != nil {
					t.Fatal(err)
				}
			})
			if got > tc.want {
				t.Errorf("Verify allocates %v times, budget %v", got, tc.want)
			}
		})
	}
}

// TestVerifyConcurrent shares one Verifier between goroutines, each with its
// own body and secret, as the handler does; run it with -race.
func TestVerifyConcurrent(t *testing.T) {
	secrets := []string{"s0", "s1", "s2", "s3"}
	v := setup(t, Config{Scheme: SchemeStandard, Secrets: secrets, SecretMode: SecretRaw, Now: fixedClock})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			secret := g % len(secrets)
			for i := range 100 {
				body := fmt.Appendf(nil, `{"type":"t%d","n":%d}`, g, i)
				h, err := Sign(SchemeStandard, secrets[secret], body, SignOptions{ID: fmt.Sprint("m", g, i), Timestamp: testNow, SecretMode: SecretRaw})
				if err != nil {
					errs <- err
					return
				}
				res, err := v.Verify(reqOf(h, body))
				if err != nil || res.SecretIndex != secret || res.EventType != fmt.Sprint("t", g) {
					errs <- fmt.Errorf("goroutine %d, request %d: %+v, %v", g, i, res, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
