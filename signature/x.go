package signature

import (
	"encoding/base64"
	"fmt"
	"net/http"

	"github.com/caddywebhook/caddywebhook/internal/jsonscan"
)

// X (Twitter; Account Activity API, X API v2 webhooks) signs the body with
// HMAC-SHA256 keyed with the app's consumer secret, in
// x-twitter-webhooks-signature: sha256=<base64>
// (https://docs.x.com/x-api/webhooks/quickstart). Events carry no
// envelope id, so the body hash is the delivery id.
//
// X checks the URL at registration and then regularly with a CRC: an
// unsigned GET ?crc_token=<token>, answered with
// {"response_token":"sha256=<base64 HMAC-SHA256(consumer secret, token)>"}.
// Answering it signs text of the caller's choosing with the key that signs
// events, so the two are kept apart: a CRC token must be a plainToken (no
// '{'), and an event's body must be a JSON object (it starts with '{'),
// as X's always are. No answered CRC is then the signature of an event.
func init() {
	s := presetScheme(Preset{
		Name: "x",
		Defaults: Config{
			SignatureHeader: "X-Twitter-Webhooks-Signature",
			SignaturePrefix: "sha256=",
			Encoding:        "base64",
		},
		Handshake:    xHandshake,
		GETHandshake: true,
	})
	build := s.build
	s.build = func(cfg Config, b base) (Verifier, error) {
		v, err := build(cfg, b)
		if err != nil {
			return nil, err
		}
		return &xVerifier{v.(*engine)}, nil
	}
	register(s)
}

var (
	xNoMatch    = fmt.Errorf("x: %w", ErrNoMatch)
	xBadCRC     = fmt.Errorf("x: crc_token missing or not a plain token: %w", ErrMalformedHeader)
	xNotAnEvent = fmt.Errorf("x: body is not a JSON object: %w", ErrNoMatch)
)

// xVerifier refuses any body that is not a JSON object before the engine
// verifies it.
type xVerifier struct{ *engine }

// Verify implements Verifier.
func (v *xVerifier) Verify(req Request) (Result, error) {
	i := jsonscan.SkipSpace(req.Body, 0)
	if i >= len(req.Body) || req.Body[i] != '{' {
		return Result{}, xNotAnEvent
	}
	return v.engine.Verify(req)
}

func xHandshake(v Verifier, req Request) (HandshakeResponse, bool, error) {
	if req.Method != http.MethodGet {
		return HandshakeResponse{}, false, nil
	}
	token, ok := queryValue(req.URL, "crc_token")
	if !ok {
		return HandshakeResponse{}, false, nil
	}
	if !plainToken(token) {
		return HandshakeResponse{}, false, xBadCRC
	}
	mac := firstMAC(v, token)
	if mac == nil {
		return HandshakeResponse{}, false, xNoMatch
	}
	return jsonAnswer(map[string]string{"response_token": "sha256=" + base64.StdEncoding.EncodeToString(mac)}), true, nil
}

var _ Verifier = (*xVerifier)(nil)
