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

// TestDiscordEnvelopes sends both envelopes Discord signs alike, in the
// shapes of its docs: interactions
// (https://discord.com/developers/docs/interactions/receiving-and-responding),
// whose PING is type 1, and webhook events
// (https://discord.com/developers/docs/events/webhook-events), whose PING
// is type 0, to be answered 204 with an empty body, and whose type 1 is an
// event to be stored, answered 204, typed by event.type.
func TestDiscordEnvelopes(t *testing.T) {
	const (
		interactionPing = `{"app_permissions":"442368","application_id":"1234560123453231555","id":"1250000000000000000","token":"aW50ZXJhY3Rpb246MTIz","type":1,"user":{"id":"53908232506183680"},"version":1}`
		command         = `{"application_id":"1234560123453231555","id":"1250000000000000001","token":"aW50ZXJhY3Rpb246MTI0","type":2,"data":{"name":"blep","type":1},"version":1}`
		eventPing       = `{"version":1,"application_id":"1234560123453231555","type":0}`
		entitlement     = `{"version":1,"application_id":"1234560123453231555","type":1,"event":{"type":"ENTITLEMENT_CREATE","timestamp":"2024-10-18T18:41:21.109604","data":{"application_id":"1234560123453231555","consumed":false,"id":"1296925200000000000","sku_id":"1296920000000000000","type":8,"user_id":"111111111111111111"}}}`
		authorized      = `{"version":1,"application_id":"1234560123453231555","type":1,"event":{"type":"APPLICATION_AUTHORIZED","timestamp":"2024-10-18T14:42:53.064834","data":{"integration_type":1,"scopes":["applications.commands"],"user":{"id":"111111111111111111"}}}}`
	)
	cfg := Config{Scheme: SchemeDiscord, PublicKeys: []string{edPubHex}}
	signed := func(body string) Request {
		return signedRequest(t, SchemeDiscord, edSeedHex, body, SignOptions{})
	}
	v := setup(t, cfg)
	runHandshakes(t, v, []handshakeCase{
		{name: "interaction PING answered with PONG", req: signed(interactionPing),
			wantOK: true, wantStatus: 200, wantType: "application/json", wantBody: `{"type":1}`},
		{name: "webhook-event PING answered 204, empty", req: signed(eventPing),
			wantOK: true, wantStatus: 204, wantType: "application/json"},
		{name: "forged webhook-event PING refused", req: post("", signed(eventPing).Header, flip(eventPing)), wantErr: ErrNoMatch},
		{name: "webhook event is no handshake", req: signed(entitlement)},
		{name: "second webhook event is no handshake", req: signed(authorized)},
		{name: "application command is no handshake", req: signed(command)},
	})
	runVerifyCases(t, []verifyCase{
		{name: "entitlement typed by event.type, id from the body", cfg: cfg, req: signed(entitlement),
			want: Result{SecretIndex: 0, DeliveryID: bodyID([]byte(entitlement)), EventType: "ENTITLEMENT_CREATE"}},
		{name: "authorization typed by event.type", cfg: cfg, req: signed(authorized),
			want: Result{SecretIndex: 0, DeliveryID: bodyID([]byte(authorized)), EventType: "APPLICATION_AUTHORIZED"}},
		{name: "interaction keeps its id and type", cfg: cfg, req: signed(command),
			want: Result{SecretIndex: 0, DeliveryID: "1250000000000000001", EventType: "2"}},
	})
	if d, _ := Lookup(SchemeDiscord); d.AcceptStatus != http.StatusNoContent {
		t.Errorf("discord AcceptStatus = %d, want 204: Discord retries a webhook event answered otherwise", d.AcceptStatus)
	}
}
