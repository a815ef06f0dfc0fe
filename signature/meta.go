package signature

import (
	"fmt"
	"net/http"
)

// Meta (Graph API webhooks: WhatsApp Cloud API, Instagram, Messenger,
// Pages) signs the body with HMAC-SHA256 keyed with the App Secret, in
// X-Hub-Signature-256: sha256=<hex>
// (https://developers.facebook.com/docs/graph-api/webhooks/getting-started/).
// Deliveries carry no id, so the body hash is the delivery id; the event
// type is the body's object (whatsapp_business_account, page, …).
//
// Meta checks the callback URL with an unsigned GET:
// ?hub.mode=subscribe&hub.verify_token=<token>&hub.challenge=<n>. The
// verify token is a second secret, chosen in the App Dashboard next to the
// callback URL (Config.VerifyToken); the challenge is echoed when it
// matches, and the handshake is refused as a forgery when it does not.
func init() {
	s := presetScheme(Preset{
		Name: "meta",
		Defaults: Config{
			SignatureHeader: "X-Hub-Signature-256",
			SignaturePrefix: "sha256=",
			EventTypeField:  "object",
		},
		Handshake:    metaHandshake,
		GETHandshake: true,
	})
	s.verifyToken = true
	s.SecretQuery = []string{"hub.verify_token"}
	register(s)
}

var metaNoMatch = fmt.Errorf("meta: hub.verify_token: %w", ErrNoMatch)

func metaHandshake(v Verifier, req Request) (HandshakeResponse, bool, error) {
	if req.Method != http.MethodGet {
		return HandshakeResponse{}, false, nil
	}
	mode, _ := queryValue(req.URL, "hub.mode")
	if mode != "subscribe" {
		return HandshakeResponse{}, false, nil
	}
	token, _ := queryValue(req.URL, "hub.verify_token")
	b := coreOf(v)
	if b == nil || !equalSecret(token, b.verifyToken) {
		return HandshakeResponse{}, false, metaNoMatch
	}
	challenge, _ := queryValue(req.URL, "hub.challenge")
	if !echoable(challenge) {
		return HandshakeResponse{}, false, fmt.Errorf("meta: hub.challenge missing or too long: %w", ErrMalformedHeader)
	}
	return textAnswer(challenge), true, nil
}
