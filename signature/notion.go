package signature

import (
	"bytes"
	"fmt"
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
			SignatureHeader: headerNotionSignature,
			SignaturePrefix: "sha256=",
			DeliveryIDField: "id", EventTypeField: "type",
		},
		Handshake:         notionHandshake,
		UnsignedHandshake: notionMayHandshake,
	})
}

const headerNotionSignature = "X-Notion-Signature"

var notionBadToken = fmt.Errorf("notion: verification_token: %w", ErrMalformedHeader)

// notionMayHandshake: a POST without a signature.
func notionMayHandshake(req Request) bool {
	return req.Method == http.MethodPost && req.Header.Get(headerNotionSignature) == ""
}

// notionHandshake answers Notion's verification request with 200 and
// nothing else: the token in it is the signing secret, so it is neither
// stored as an event nor echoed nor logged. A token that is not one of the
// secrets is returned as IssuedSecret, for the caller to keep where the
// operator can read it (or to refuse). Only an unsigned POST whose body
// is a JSON object with verification_token as its one string field is a
// handshake; anything else goes on to Verify.
func notionHandshake(v Verifier, req Request) (HandshakeResponse, bool, error) {
	if !notionMayHandshake(req) || !bytes.Contains(req.Body, []byte("verification_token")) {
		return HandshakeResponse{}, false, nil
	}
	fields := 0
	var raw []byte
	valid := scanObject(req.Body, func(key, value []byte) {
		fields++
		if jsonKeyIs(key, "verification_token") && len(value) > 2 && value[0] == '"' {
			raw = value
		}
	})
	if !valid || fields != 1 || raw == nil {
		return HandshakeResponse{}, false, nil
	}
	token := jsonString(raw)
	if !plainToken(token) {
		return HandshakeResponse{}, false, notionBadToken
	}
	resp := HandshakeResponse{Status: http.StatusOK}
	if !knownSecret(v, token) {
		resp.IssuedSecret = token
	}
	return resp, true, nil
}
