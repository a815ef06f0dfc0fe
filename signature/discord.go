package signature

import (
	"bytes"
	"net/http"
)

// Discord signs interactions and webhook events with ed25519 over the
// timestamp followed directly by the body, the signature in hex; the
// application's public key is shown in hex in the developer portal
// (https://discord.com/developers/docs/interactions/receiving-and-responding#security-and-authorization).
//
// Two envelopes arrive signed alike, and one endpoint may serve both:
//   - interactions, {"id":…,"token":…,"type":1…5,…}, whose type 1 is a
//     PING wanting {"type":1} (PONG) back;
//   - webhook events, {"version":1,"application_id":…,"type":0|1,"event":…}
//     (https://discord.com/developers/docs/events/webhook-events), whose
//     type 0 is a PING wanting 204 with an empty body, and type 1 an event
//     whose own type is event.type (ENTITLEMENT_CREATE, …), to be answered
//     204 within 3 seconds or it is retried.
//
// Interactions carry a top-level id; webhook events none, so theirs is the
// body hash. Accepted events are answered 204, as webhook events must be.
// An interaction other than a PING wants an interaction response, which a
// store-and-forward receiver cannot give in its answer whatever the status;
// its target answers through the interaction's callback endpoint.
const (
	headerDiscordSignature = "X-Signature-Ed25519"
	headerDiscordTimestamp = "X-Signature-Timestamp"
)

func init() {
	s := newEdScheme(SchemeDiscord, headerDiscordSignature, headerDiscordTimestamp, "", true)
	s.handshake = discordHandshake
	s.acceptStatus = http.StatusNoContent
	s.register([]source{field("id")}, []source{field("event.type"), field("type")})
}

// discordEnvelopeKeys are the top-level members that tell a PING of
// either envelope from an event.
var discordEnvelopeKeys = []string{"type", "event"}

// discordHandshake answers both PINGs; Discord also sends them with bad
// signatures and removes the URL unless they get 401. A byte search first,
// as in slackHandshake: nothing is parsed before it verified, and an event
// (an interaction of another type, or a webhook event, which has an event
// member a PING lacks) does not pay for a second signature check.
func discordHandshake(v Verifier, req Request) (HandshakeResponse, bool, error) {
	if req.Method != http.MethodPost {
		return HandshakeResponse{}, false, nil
	}
	eventPing := bytes.Contains(req.Body, []byte(`"type":0`))
	interactionPing := bytes.Contains(req.Body, []byte(`"type":1`)) && !bytes.Contains(req.Body, []byte(`"event"`))
	if !eventPing && !interactionPing {
		return HandshakeResponse{}, false, nil
	}
	if _, err := v.Verify(req); err != nil {
		return HandshakeResponse{}, false, err
	}
	var raws [2][]byte
	lookupJSONRaw(req.Body, discordEnvelopeKeys, raws[:])
	typ, _ := jsonScalar(raws[0])
	switch {
	case typ == "0":
		// No interaction has type 0. Discord wants a Content-Type even
		// on this empty answer.
		return HandshakeResponse{Status: http.StatusNoContent, ContentType: "application/json"}, true, nil
	case typ == "1" && raws[1] == nil:
		return HandshakeResponse{Status: http.StatusOK, ContentType: "application/json", Body: []byte(`{"type":1}`)}, true, nil
	}
	return HandshakeResponse{}, false, nil
}
