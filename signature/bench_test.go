package signature

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// benchBody is a JSON object of exactly n bytes with an id and a type at
// the top level and the padding in a nested object, like a provider event.
func benchBody(n int) []byte {
	const head, tail = `{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","data":{"pad":"`, `"},"type":"invoice.paid","webhookTimestamp":1700000000000}`
	return []byte(head + strings.Repeat("x", n-len(head)-len(tail)) + tail)
}

// BenchmarkVerify measures a successful verification per scheme: the
// request carries the scheme's own delivery id where it has one, and the
// signing secret is the second of two, so one MAC is a miss first.
//
//	go test -run '^$' -bench BenchmarkVerify -benchmem -count 1 ./signature/
func BenchmarkVerify(b *testing.B) {
	schemes := []struct {
		cfg  Config
		opts SignOptions
	}{
		{Config{Scheme: SchemeGitHub}, SignOptions{ID: "72d3162e-cc78-11e3-81ab-4c9367dc0958", EventType: "push"}},
		{Config{Scheme: SchemeStripe, Now: fixedClock}, SignOptions{}},
		{Config{Scheme: SchemeStandard, Now: fixedClock}, SignOptions{ID: "msg_p5jXN8AQM9LWM0D4loKWxJek"}},
		{Config{Scheme: SchemeSlack, Now: fixedClock}, SignOptions{}},
		{Config{Scheme: SchemeShopify}, SignOptions{ID: "98880550-7158-44d4-b7cd-2c97c8a091b5", EventType: "orders/create"}},
		{Config{Scheme: SchemeGitLab}, SignOptions{ID: "b1f2c3d4", EventType: "Push Hook"}},
		{Config{Scheme: SchemeHMAC, SignatureHeader: "X-Sig"}, SignOptions{SignatureHeader: "X-Sig"}},
		{Config{Scheme: "paddle", Now: fixedClock}, SignOptions{}},
		{Config{Scheme: "linear", Now: fixedClock}, SignOptions{ID: "9c2f3b1e-7d52-4c84-8a46-7b6f0e7d4a11", EventType: "Issue"}},
		{Config{Scheme: "zendesk", Now: fixedClock}, SignOptions{ID: "8350205582"}},
		{Config{Scheme: "box", Now: fixedClock}, SignOptions{}},
		{Config{Scheme: "hubspot", Now: fixedClock}, SignOptions{URL: "https://example.com/hubspot"}},
		{Config{Scheme: "pagerduty"}, SignOptions{ID: "w-1"}},
	}
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	for _, s := range schemes {
		for _, size := range []int{512, 64 << 10} {
			b.Run(fmt.Sprintf("%s/%s", s.cfg.Scheme, byteSize(size)), func(b *testing.B) {
				cfg := s.cfg
				cfg.Secrets = []string{"whsec_dGVzdA==", secret}
				v := setup(b, cfg)
				body := benchBody(size)
				opts := s.opts
				opts.Timestamp = testNow
				h, err := Sign(cfg.Scheme, secret, body, opts)
				if err != nil {
					b.Fatal(err)
				}
				req := reqOf(h, body)
				req.URL = opts.URL
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := v.Verify(req); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkVerifyPublicKey measures the signature schemes with the
// signing key second of two, as BenchmarkVerify does with secrets.
//
//	go test -run '^$' -bench BenchmarkVerifyPublicKey -benchmem -count 1 ./signature/
func BenchmarkVerifyPublicKey(b *testing.B) {
	for _, scheme := range []string{SchemeStandard, SchemeDiscord, SchemeTelnyx, SchemeSendGrid} {
		b.Run(scheme+"/512B", func(b *testing.B) {
			other := otherEdKey()
			if scheme == SchemeSendGrid {
				other = otherPublicKey(nil, scheme)
			}
			v := setup(b, Config{Scheme: scheme, PublicKeys: []string{other, testPublicKey(scheme)}, Now: fixedClock})
			body := benchBody(512)
			h, err := Sign(scheme, testPrivateKey(scheme), body, SignOptions{ID: "msg_p5jXN8AQM9LWM0D4loKWxJek", Timestamp: testNow})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(reqOf(h, body)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReject measures what a forged request costs: one MAC per secret
// and no allocation.
func BenchmarkReject(b *testing.B) {
	v := setup(b, Config{Scheme: SchemeStripe, Secrets: []string{"a", "b"}, Now: fixedClock})
	body := benchBody(512)
	h := http.Header{"Stripe-Signature": {"t=1700000000,v1=" + strings.Repeat("0", 64)}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(reqOf(h, body)); err == nil {
			b.Fatal("forged request verified")
		}
	}
}

func byteSize(n int) string {
	if n >= 1<<10 {
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
