package signature

import (
	"fmt"
	"net/http"
)

// Okta event hooks are not signed: every request carries the header value
// configured on the hook (authScheme HEADER, typically Authorization:
// <shared secret>), compared here in constant time with the secrets
// (https://developer.okta.com/docs/concepts/event-hooks/). The delivery id
// is the body's eventId; the event types are inside data.events, so none
// is read unless an override says where.
//
// When the hook is verified, Okta sends a GET with the same header and
// X-Okta-Verification-Challenge, and wants {"verification":"<challenge>"}
// back. The header is checked there too: a GET without it is refused.
const (
	headerOktaAuth      = "Authorization"
	headerOktaChallenge = "X-Okta-Verification-Challenge"
)

func init() {
	register(&scheme{
		Scheme: Scheme{Name: "okta", Keys: KeySecrets, GETHandshake: true},
		build: func(cfg Config, b base) (Verifier, error) {
			return newTokenVerifier(b, cfg.Secrets, "okta", headerOktaAuth), nil
		},
		sign: func(secret string, _ []byte, _ SignOptions) (http.Header, error) {
			return http.Header{headerOktaAuth: {secret}}, nil
		},
		handshake: oktaHandshake,
		id:        []source{field("eventId")},
	})
}

var oktaBadChallenge = fmt.Errorf("okta: %s: %w", headerOktaChallenge, ErrMalformedHeader)

func oktaHandshake(v Verifier, req Request) (HandshakeResponse, bool, error) {
	challenge := req.Header.Get(headerOktaChallenge)
	if req.Method != http.MethodGet || challenge == "" {
		return HandshakeResponse{}, false, nil
	}
	if _, err := v.Verify(req); err != nil {
		return HandshakeResponse{}, false, err
	}
	if !echoable(challenge) {
		return HandshakeResponse{}, false, oktaBadChallenge
	}
	return jsonAnswer(map[string]string{"verification": challenge}), true, nil
}
