package signature

import (
	"fmt"
	"net/http"
)

// Dropbox signs the body with HMAC-SHA256 keyed with the app secret, in
// X-Dropbox-Signature: <hex> (https://www.dropbox.com/developers/reference/webhooks).
// A notification only says that something changed and carries no id, so
// the body hash is the delivery id; there is no event type.
//
// Dropbox checks the URI once with an unsigned GET ?challenge=<random>,
// which must be echoed as text/plain with X-Content-Type-Options: nosniff.
// No secret is involved: any endpoint that echoes passes, and echoing
// grants nothing, since every event must still be signed.
func init() {
	registerPreset(Preset{
		Name:         "dropbox",
		Defaults:     Config{SignatureHeader: "X-Dropbox-Signature"},
		Handshake:    dropboxHandshake,
		GETHandshake: true,
	})
}

func dropboxHandshake(_ Verifier, req Request) (HandshakeResponse, bool, error) {
	if req.Method != http.MethodGet {
		return HandshakeResponse{}, false, nil
	}
	challenge, ok := queryValue(req.URL, "challenge")
	if !ok {
		return HandshakeResponse{}, false, nil
	}
	if !echoable(challenge) {
		return HandshakeResponse{}, false, fmt.Errorf("dropbox: challenge too long or not text: %w", ErrMalformedHeader)
	}
	return textAnswer(challenge), true, nil
}
