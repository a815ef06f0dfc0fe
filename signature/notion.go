package signature

import (
	"bytes"
	"net/http"
)

// Notion signs each event with HMAC-SHA256 of the body, in hex after
// "sha256=" in X-Notion-Signature, keyed with the subscription's
// verification token; the event's id and type are top-level fields
// (https://developers.notion.com/reference/v2-webhooks, with the algorithm
// as notionrs_webhooks' verify_signature implements it). The token reaches
// the endpoint once, unsigned, when the subscription is created: a POST
// whose body is {"verification_token":"secret_…"}; the operator pastes it
// into Notion to activate the subscription, and configures it as the
// secret.
func init() {
	registerPreset(Preset{
		Name: "notion",
		Defaults: Config{
			SignatureHeader: "X-Notion-Signature",
			SignaturePrefix: "sha256=",
			DeliveryIDField: "id", EventTypeField: "type",
		},
		Handshake: notionHandshake,
	})
}

// notionHandshake answers Notion's verification request with 200 and
// nothing else: the token in it is the signing secret, so it is neither
// stored as an event nor echoed nor logged. Only an unsigned POST whose
// body is a JSON object with verification_token as its one string field
// is a handshake; anything else goes on to Verify.
func notionHandshake(_ Verifier, req Request) (HandshakeResponse, bool, error) {
	if req.Method != http.MethodPost || req.Header.Get("X-Notion-Signature") != "" ||
		!bytes.Contains(req.Body, []byte("verification_token")) {
		return HandshakeResponse{}, false, nil
	}
	fields, token := 0, false
	valid := scanObject(req.Body, func(key, value []byte) {
		fields++
		token = jsonKeyIs(key, "verification_token") && len(value) > 2 && value[0] == '"'
	})
	if !valid || fields != 1 || !token {
		return HandshakeResponse{}, false, nil
	}
	return HandshakeResponse{Status: http.StatusOK}, true, nil
}
