package signature

import (
	"bytes"
	"net/http"
)

// Discord signs interactions and webhook events with ed25519 over the
// timestamp followed directly by the body, the signature in hex; the
// application's public key is shown in hex in the developer portal
// (https://discord.com/developers/docs/interactions/receiving-and-responding#security-and-authorization).
// Interactions and events carry a top-level id (events: none) and type.
const (
	headerDiscordSignature = "X-Signature-Ed25519"
	headerDiscordTimestamp = "X-Signature-Timestamp"
)

func init() {
	s := newEdScheme(SchemeDiscord, headerDiscordSignature, headerDiscordTimestamp, "", true)
	s.handshake = discordHandshake
	s.register([]source{field("id")}, []source{field("type")})
}

// Discord checks the Interactions Endpoint URL with a PING, signed like
// any interaction, {"type":1,…}, and wants {"type":1} (PONG) back; it also
// sends PINGs with bad signatures and removes the URL unless they get 401.
func discordHandshake(v Verifier, req Request) (HandshakeResponse, bool, error) {
	// A byte search first, as in slackHandshake: nothing is parsed
	// before it verified.
	if req.Method != http.MethodPost || !bytes.Contains(req.Body, []byte(`"type":1`)) {
		return HandshakeResponse{}, false, nil
	}
	if _, err := v.Verify(req); err != nil {
		return HandshakeResponse{}, false, err
	}
	var vals [1]string
	var found [1]bool
	if lookupJSON(req.Body, []string{"type"}, vals[:], found[:]); vals[0] != "1" {
		return HandshakeResponse{}, false, nil
	}
	return HandshakeResponse{Status: http.StatusOK, ContentType: "application/json", Body: []byte(`{"type":1}`)}, true, nil
}
