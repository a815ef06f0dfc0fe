package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
)

// Netlify signs a deploy notification with a JWS in X-Webhook-Signature:
// HS256 keyed with the notification's "JWS secret token", over claims that
// hold iss "netlify" and sha256, the hex SHA-256 of the body
// (https://docs.netlify.com/site-deploys/deploy-notifications/).
// There is no timestamp and no delivery id (several notifications of one
// deploy share its id), so the body hash deduplicates; the event type is
// the deploy's state.
const (
	headerNetlifySignature = "X-Webhook-Signature"
	schemeNetlify          = "netlify"
)

var (
	netlifySignatureErrors = newHeaderErrors(schemeNetlify, headerNetlifySignature)
	netlifyNoMatch         = fmt.Errorf("%s: %w", schemeNetlify, ErrNoMatch)
	netlifyHeaderFields    = []string{"alg"}
	netlifyClaimFields     = []string{"iss", "sha256"}
)

func init() {
	register(&scheme{
		Scheme: Scheme{Name: schemeNetlify, Keys: KeySecrets},
		build:  func(_ Config, b base) (Verifier, error) { return &netlifyVerifier{b}, nil },
		sign:   signNetlify,
		typ:    []source{field("state")},
	})
}

// netlifyVerifier verifies X-Webhook-Signature with the secrets' HMAC-SHA256
// keys.
type netlifyVerifier struct{ base }

// Verify implements Verifier.
func (v *netlifyVerifier) Verify(req Request) (Result, error) {
	value, err := netlifySignatureErrors.get(req.Header, headerNetlifySignature)
	if err != nil {
		return Result{}, err
	}
	t, ok := parseJWS(value, sha256.Size)
	if !ok {
		return Result{}, netlifySignatureErrors.malformed
	}
	alg, _, ok := jwsFields(t.header, netlifyHeaderFields...)
	switch {
	case !ok:
		return Result{}, netlifySignatureErrors.malformed
	case alg[0] != "HS256":
		// Never "none", never another key type: HS256 only.
		return Result{}, netlifyNoMatch
	}
	var sigs sigSet
	sigs.size = sha256.Size
	copy(sigs.slot(), t.sig)
	sigs.commit()
	index, ok := v.find(&sigs, nil, t.signingInput)
	if !ok {
		return Result{}, netlifyNoMatch
	}
	claims, _, _ := jwsFields(t.claims, netlifyClaimFields...)
	sum := sha256.Sum256(req.Body)
	var want [2 * sha256.Size]byte
	hex.Encode(want[:], sum[:])
	if claims[0] != "netlify" || subtle.ConstantTimeCompare(want[:], []byte(claims[1])) != 1 {
		// A genuine token for another body, or not Netlify's.
		return Result{}, netlifyNoMatch
	}
	return v.meta.result(index, req.Header, req.Body, ""), nil
}

func signNetlify(secret string, body []byte, _ SignOptions) (http.Header, error) {
	sum := sha256.Sum256(body)
	token, err := encodeJWS(`{"alg":"HS256","typ":"JWT"}`, `{"iss":"netlify","sha256":"`+hex.EncodeToString(sum[:])+`"}`,
		func(input []byte) ([]byte, error) {
			m := hmac.New(sha256.New, []byte(secret))
			m.Write(input)
			return m.Sum(nil), nil
		})
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set(headerNetlifySignature, token)
	return h, nil
}

var _ Verifier = (*netlifyVerifier)(nil)
