package signature

import (
	"strings"
	"testing"
	"time"
)

// Plaid's JWT (https://plaid.com/docs/api/webhooks/webhook-verification/:
// ES256, kid in the header, iat and request_body_sha256 in the claims),
// computed with openssl and the P-256 test key of providers_test.go:
//
//	b64u() { base64 -w0 | tr '+/' '-_' | tr -d '='; }
//	hdr=$(printf '%s' '{"alg":"ES256","kid":"6c5516e1-92dc-479e-a8ff-5a51992e0001","typ":"JWT"}' | b64u)
//	pl=$(printf '{"iat":1700000000,"request_body_sha256":"%s"}' "$(printf '%s' "$body" | sha256sum | cut -d' ' -f1)" | b64u)
//	printf '%s.%s' "$hdr" "$pl" | openssl dgst -sha256 -sign ec.pem > sig.der
//	openssl asn1parse -inform DER -in sig.der   # r and s, each padded to 32 bytes, then b64u
//
// The JWK is the same key as /webhook_verification_key/get returns keys,
// its x and y the point of openssl pkey -pubout.
const (
	plaidBody = `{"webhook_type":"TRANSACTIONS","webhook_code":"SYNC_UPDATES_AVAILABLE","item_id":"wz666MBjYWTp2PDzzggYhM6oWWmBb","environment":"production"}`
	plaidJWT  = "eyJhbGciOiJFUzI1NiIsImtpZCI6IjZjNTUxNmUxLTkyZGMtNDc5ZS1hOGZmLTVhNTE5OTJlMDAwMSIsInR5cCI6IkpXVCJ9.eyJpYXQiOjE3MDAwMDAwMDAsInJlcXVlc3RfYm9keV9zaGEyNTYiOiIyYmY0ZjBiMjE3NzdkOGQ4YmExZTc4NDIxODNlZDNkMTkyNzVjMmI5ZWE4ZDg0NWE3NTBmZjgxMzE4MzY5MzAxIn0.GmfeuQxYW3qAJ9Bk6cdvWFBHJEIUO2lpTGAh3eFGdEKlDncz7BhXlIbDPw66L6Mk3TR-im2vdkZZu_FPR03YgA"
	plaidKid  = "6c5516e1-92dc-479e-a8ff-5a51992e0001"
	plaidJWK  = `{"alg":"ES256","created_at":1560466150,"crv":"P-256","expired_at":null,"kid":"` + plaidKid + `","kty":"EC","use":"sig","x":"ygqjzJfr5jNuHxhT9FY_PJkbGaoxyOqRTfde1Hv4jzk","y":"5wa0ff_2Y-ExPNtN9h8GH0TP_nMxhNOQiYiA8e4XFS0"}`
)

func TestPlaid(t *testing.T) {
	at := clockAt(t, vectorTS)
	cfg := Config{Scheme: "plaid", PublicKeys: []string{plaidJWK}, Now: at}
	req := post("", hdr("Plaid-Verification", plaidJWT), plaidBody)
	want := Result{DeliveryID: bodyID([]byte(plaidBody)), EventType: "SYNC_UPDATES_AVAILABLE"}
	otherKid := strings.Replace(plaidJWK, plaidKid, "another-kid", 1)
	parts := strings.Split(plaidJWT, ".")
	runVerifyCases(t, []verifyCase{
		{name: "openssl vector, JWK", cfg: cfg, req: req, want: want},
		{name: "openssl vector, base64 DER key", cfg: Config{Scheme: "plaid", PublicKeys: []string{p256PubB64}, Now: at}, req: req, want: want},
		{name: "second key of two", cfg: Config{Scheme: "plaid", PublicKeys: []string{otherPublicKey(t, SchemeSendGrid), plaidJWK}, Now: at}, req: req, want: Result{SecretIndex: 1, DeliveryID: want.DeliveryID, EventType: want.EventType}},
		{name: "one body byte changed", cfg: cfg, req: flipped(req, 5), err: ErrNoMatch},
		{name: "stale iat", cfg: Config{Scheme: "plaid", PublicKeys: []string{plaidJWK}, Now: func() time.Time { return at().Add(6 * time.Minute) }}, req: req, err: ErrTimestamp},
		{name: "JWK of another kid", cfg: Config{Scheme: "plaid", PublicKeys: []string{otherKid}, Now: at}, req: req, err: ErrNoMatch},
		{name: "another key", cfg: Config{Scheme: "plaid", PublicKeys: []string{otherPublicKey(t, SchemeSendGrid)}, Now: at}, req: req, err: ErrNoMatch},
		{name: "claims swapped", cfg: cfg, req: post("", hdr("Plaid-Verification", parts[0]+"."+parts[0]+"."+parts[2]), plaidBody), err: ErrNoMatch},
		{name: "not a JWT", cfg: cfg, req: post("", hdr("Plaid-Verification", "abc"), plaidBody), err: ErrMalformedHeader},
		{name: "missing", cfg: cfg, req: post("", hdr(), plaidBody), err: ErrMissingHeader},
	})
	for _, bad := range []string{`{"kty":"RSA"}`, strings.Replace(plaidJWK, `"expired_at":null`, `"expired_at":1700000000`, 1), `{"kty":"EC","crv":"P-256","x":"AA","y":"AA"}`, `{`} {
		if _, err := New(Config{Scheme: "plaid", PublicKeys: []string{bad}}); err == nil || !strings.Contains(err.Error(), "PublicKeys[0]") {
			t.Errorf("New with key %s: %v, want a PublicKeys[0] error", bad, err)
		}
	}
}

func TestPlaidSign(t *testing.T) {
	req := signedRequest(t, "plaid", p256PrivB64, plaidBody, SignOptions{Timestamp: testNow})
	v := setup(t, Config{Scheme: "plaid", PublicKeys: []string{plaidJWK}, Now: fixedClock})
	if _, err := v.Verify(req); err == nil {
		t.Error("a JWT without kid verified with a JWK that names one")
	}
	v = setup(t, Config{Scheme: "plaid", PublicKeys: []string{p256PubB64}, Now: fixedClock})
	if got, err := v.Verify(req); err != nil || got.EventType != "SYNC_UPDATES_AVAILABLE" {
		t.Errorf("Verify = %+v, %v", got, err)
	}
}
