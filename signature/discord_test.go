package signature

import (
	"net/http"
	"testing"
)

// The PING vector of providers_test.go, an ed25519 signature made with
// openssl over timestamp + body
// (https://discord.com/developers/docs/interactions/receiving-and-responding#security-and-authorization).
func TestDiscordPing(t *testing.T) {
	v := setup(t, Config{Scheme: SchemeDiscord, PublicKeys: []string{edPubHex}, Now: fixedClock})
	post := func(sig, body string) Request {
		return Request{Method: http.MethodPost, Header: hdr(headerDiscordSignature, sig, headerDiscordTimestamp, vectorTS), Body: []byte(body)}
	}
	runHandshakes(t, v, []handshakeCase{
		{name: "PING answered with PONG", req: post(discordSig, discordBody), wantOK: true, wantStatus: 200, wantType: "application/json", wantBody: `{"type":1}`},
		{name: "forged PING refused", req: post(discordSig, flip(discordBody)), wantErr: ErrNoMatch},
		{name: "other interaction is no handshake", req: post(discordSig, `{"type":2}`)},
	})
	late := setup(t, Config{Scheme: SchemeDiscord, PublicKeys: []string{edPubHex}})
	runHandshakes(t, late, []handshakeCase{{name: "stale PING refused", req: post(discordSig, discordBody), wantErr: ErrTimestamp}})
}
