package signature

import (
	"crypto/sha256"
	"fmt"
	"net/http"
)

// Asana signs the body with HMAC-SHA256 keyed with the webhook's secret,
// in X-Hook-Signature: <hex>. Events carry no id, so the body hash is the
// delivery id.
//
// Asana issues that secret itself: while the operator's POST /webhooks is
// in flight, it posts to the target with X-Hook-Secret, unsigned, and
// wants it echoed (https://developers.asana.com/reference/createwebhook).
// The receiver echoes a secret that is already one of its Secrets (a
// repeated handshake); any other one is returned as
// HandshakeResponse.IssuedSecret, for the caller to keep for the operator
// or to refuse. The secret is never logged: it signs every later event.
const (
	headerAsanaSecret    = "X-Hook-Secret"
	headerAsanaSignature = "X-Hook-Signature"
)

func init() {
	s := presetScheme(Preset{
		Name:              "asana",
		Defaults:          Config{SignatureHeader: headerAsanaSignature},
		Handshake:         asanaHandshake,
		UnsignedHandshake: asanaMayHandshake,
	})
	s.SecretHeaders = []string{headerAsanaSecret}
	register(s)
}

var asanaBadSecret = fmt.Errorf("asana: %s: %w", headerAsanaSecret, ErrMalformedHeader)

// asanaMayHandshake: a POST with X-Hook-Secret and no signature.
func asanaMayHandshake(req Request) bool {
	return req.Method == http.MethodPost && req.Header.Get(headerAsanaSecret) != "" && req.Header.Get(headerAsanaSignature) == ""
}

func asanaHandshake(v Verifier, req Request) (HandshakeResponse, bool, error) {
	if !asanaMayHandshake(req) {
		return HandshakeResponse{}, false, nil
	}
	secret := req.Header.Get(headerAsanaSecret)
	if !plainToken(secret) {
		return HandshakeResponse{}, false, asanaBadSecret
	}
	resp := HandshakeResponse{Status: http.StatusOK, Header: http.Header{headerAsanaSecret: {secret}}}
	if !knownSecret(v, secret) {
		resp.IssuedSecret = secret
	}
	return resp, true, nil
}

// knownSecret reports whether secret is one of v's keys: the MAC of a
// fixed message with it equals that of one key, compared in constant time
// (asana keys are HMAC-SHA256 unless an Algorithm overrides it; then no
// secret is known, the safe answer).
func knownSecret(v Verifier, secret string) bool {
	b := coreOf(v)
	if b == nil {
		return false
	}
	const probe = "caddywebhook: is this one of the secrets"
	want := computeMAC(sha256.New, []byte(secret), nil, probe)
	var sigs sigSet
	sigs.size = len(want)
	copy(sigs.slot(), want)
	sigs.commit()
	_, ok := b.find(&sigs, nil, probe)
	return ok
}
