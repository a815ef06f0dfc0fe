package signature

import (
	"encoding/base64"
	"strings"
	"testing"
)

// Netlify's JWS (https://docs.netlify.com/site-deploys/deploy-notifications/:
// jwt.verify(token, secret, {issuer: "netlify", algorithms: ["HS256"]}) and
// the sha256 claim against the body's SHA-256), computed with openssl:
//
//	b64u() { base64 -w0 | tr '+/' '-_' | tr -d '='; }
//	hdr=$(printf '%s' '{"alg":"HS256","typ":"JWT"}' | b64u)
//	pl=$(printf '{"iss":"netlify","sha256":"%s"}' "$(printf '%s' "$body" | sha256sum | cut -d' ' -f1)" | b64u)
//	sig=$(printf '%s.%s' "$hdr" "$pl" | openssl dgst -sha256 -hmac netlify_jws_secret_123 -binary | b64u)
const (
	netlifySecret = "netlify_jws_secret_123"
	netlifyBody   = `{"id":"5ebc34bf4fea0b01f02efa3a","state":"ready","context":"production"}`
	netlifyToken  = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJpc3MiOiJuZXRsaWZ5Iiwic2hhMjU2IjoiMTAwOWNlZjIzOTQ5ZTNlM2FmNzYyODMyY2IwYjBkMDk0YWMzZjY1YzVjZjFlYWI5NWQwYmQ5YWQ5N2I0ZTU3MSJ9.XuWvk14yOsP1f6BR0s7HZNVQuVMovZSB_AQLpXFSr7w"
)

func TestNetlify(t *testing.T) {
	cfg := Config{Scheme: "netlify", Secrets: []string{netlifySecret}}
	req := post("", hdr("X-Webhook-Signature", netlifyToken), netlifyBody)
	parts := strings.Split(netlifyToken, ".")
	b64u := base64.RawURLEncoding.EncodeToString
	withHeader := func(header string) Request {
		return post("", hdr("X-Webhook-Signature", b64u([]byte(header))+"."+parts[1]+"."+parts[2]), netlifyBody)
	}
	// Another issuer, signed properly with the secret: refused all the same.
	other := signedRequest(t, "netlify", netlifySecret, netlifyBody, SignOptions{})
	otherParts := strings.Split(other.Header.Get("X-Webhook-Signature"), ".")
	if otherParts[1] != parts[1] {
		t.Fatalf("Sign made claims %s, want the vector's %s", otherParts[1], parts[1])
	}
	runVerifyCases(t, []verifyCase{
		{name: "openssl vector", cfg: cfg, req: req, want: Result{DeliveryID: bodyID([]byte(netlifyBody)), EventType: "ready"}},
		{name: "second secret of two", cfg: Config{Scheme: "netlify", Secrets: []string{"old", netlifySecret}}, req: req, want: Result{SecretIndex: 1, DeliveryID: bodyID([]byte(netlifyBody)), EventType: "ready"}},
		{name: "one body byte changed", cfg: cfg, req: flipped(req, 10), err: ErrNoMatch},
		{name: "another secret", cfg: Config{Scheme: "netlify", Secrets: []string{"nope"}}, req: req, err: ErrNoMatch},
		{name: "alg none", cfg: cfg, req: withHeader(`{"alg":"none"}`), err: ErrNoMatch},
		{name: "alg HS512", cfg: cfg, req: withHeader(`{"alg":"HS512","typ":"JWT"}`), err: ErrNoMatch},
		{name: "header not JSON", cfg: cfg, req: withHeader(`alg`), err: ErrMalformedHeader},
		{name: "two parts", cfg: cfg, req: post("", hdr("X-Webhook-Signature", parts[0]+"."+parts[1]), netlifyBody), err: ErrMalformedHeader},
		{name: "four parts", cfg: cfg, req: post("", hdr("X-Webhook-Signature", netlifyToken+".x"), netlifyBody), err: ErrMalformedHeader},
		{name: "signature padded", cfg: cfg, req: post("", hdr("X-Webhook-Signature", netlifyToken+"="), netlifyBody), err: ErrMalformedHeader},
		{name: "missing", cfg: cfg, req: post("", hdr(), netlifyBody), err: ErrMissingHeader},
	})
}

// FuzzParseJWS: whatever parseJWS accepts re-encodes to the input.
func FuzzParseJWS(f *testing.F) {
	for _, s := range []string{netlifyToken, "a.b.c", "..", "a..", "e30.e30.", "e30.e30.AAAA", netlifyToken + ".x"} {
		f.Add(s, 32)
	}
	f.Fuzz(func(t *testing.T, value string, size int) {
		tok, ok := parseJWS(value, size)
		if !ok {
			return
		}
		b64u := base64.RawURLEncoding.EncodeToString
		if got := b64u(tok.header) + "." + b64u(tok.claims); got != tok.signingInput {
			t.Fatalf("signing input %q, re-encoded %q", tok.signingInput, got)
		}
		if got := tok.signingInput + "." + b64u(tok.sig); got != value || len(tok.sig) != size {
			t.Fatalf("parseJWS(%q) re-encodes to %q", value, got)
		}
	})
}
