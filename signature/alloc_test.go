package signature

import (
	"fmt"
	"net/http"
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
		{"shopify, ids in headers", Config{Scheme: SchemeShopify}, SignOptions{ID: "e", EventType: "orders/create"}, 0},
		{"gitlab, ids in headers", Config{Scheme: SchemeGitLab}, SignOptions{ID: "u", EventType: "Push Hook"}, 0},
		{"standard, type from JSON", Config{Scheme: SchemeStandard, Now: fixedClock}, SignOptions{ID: "m"}, 1},
		{"stripe, id and type from JSON", Config{Scheme: SchemeStripe, Now: fixedClock}, SignOptions{}, 2},
		{"slack, body hash id", Config{Scheme: SchemeSlack, Now: fixedClock}, SignOptions{}, 1},
		{"hmac, override header", Config{Scheme: SchemeHMAC, SignatureHeader: "x-sig", DeliveryIDHeader: "x-id"}, SignOptions{SignatureHeader: "X-Sig"}, 0},
	}
	const secret = "whsec_dGVzdA=="
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Secrets = []string{"whsec_b3RoZXI=", secret}
			v := setup(t, tc.cfg)
			tc.opts.Timestamp = testNow
			h, err := Sign(tc.cfg.Scheme, secret, body, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			h.Set("X-Id", "id-1")
			got := testing.AllocsPerRun(200, func() {
				if _, err := v.Verify(reqOf(h, body)); err != nil {
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
