package signature

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
)

// Zoom signs "v0:<timestamp>:<body>" with HMAC-SHA256 keyed with the app's
// Secret Token, in x-zm-signature: v0=<hex>, the unix timestamp in
// x-zm-request-timestamp (https://developers.zoom.us/docs/api/webhooks/).
// No delivery id is documented, so the body hash is the id; the event
// type is the body's event.
//
// Zoom validates the endpoint when it is saved and every 72 hours with an
// endpoint.url_validation event, signed like the others, whose
// payload.plainToken must come back with encryptedToken, the hex
// HMAC-SHA256 of the token keyed with the Secret Token
// (https://developers.zoom.us/changelog/platform/webhook-url-validation).
// The validation is verified first; and since answering it signs text of
// the sender's choosing, the token must be a plainToken, which holds no
// ':' and so is never an event's signed content.
func init() {
	registerPreset(Preset{
		Name: "zoom",
		Defaults: Config{
			SignatureHeader: "X-Zm-Signature",
			SignaturePrefix: "v0=",
			TimestampHeader: "X-Zm-Request-Timestamp",
			SignedContent:   "v0:{timestamp}:{body}",
			EventTypeField:  "event",
		},
		Handshake: zoomHandshake,
	})
}

var zoomBadToken = fmt.Errorf("zoom: url_validation without a plain token: %w", ErrMalformedHeader)

func zoomHandshake(v Verifier, req Request) (HandshakeResponse, bool, error) {
	if req.Method != http.MethodPost || !bytes.Contains(req.Body, []byte("endpoint.url_validation")) {
		return HandshakeResponse{}, false, nil
	}
	if _, err := v.Verify(req); err != nil {
		return HandshakeResponse{}, false, err
	}
	// A rare request, and verified: encoding/json is fine here.
	var msg struct {
		Event   string `json:"event"`
		Payload struct {
			PlainToken string `json:"plainToken"`
		} `json:"payload"`
	}
	if json.Unmarshal(req.Body, &msg) != nil || msg.Event != "endpoint.url_validation" {
		// An event that merely mentions the word: not a handshake.
		return HandshakeResponse{}, false, nil
	}
	token := msg.Payload.PlainToken
	if !plainToken(token) {
		return HandshakeResponse{}, false, zoomBadToken
	}
	return jsonAnswer(map[string]string{
		"plainToken":     token,
		"encryptedToken": hex.EncodeToString(firstMAC(v, token)),
	}), true, nil
}
