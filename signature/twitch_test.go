package signature

import (
	"net/http"
	"testing"
	"time"
)

// Vectors computed with openssl over the documented content, message id,
// timestamp and body concatenated
// (https://dev.twitch.tv/docs/eventsub/handling-webhook-events):
//
//	printf '%s' "$ID$TS$BODY" | openssl dgst -sha256 -hmac twitch_secret_0123456789
const (
	twitchSecret = "twitch_secret_0123456789"
	twitchTS     = "2019-11-16T10:11:12.634234626Z"
	twitchBody   = `{"subscription":{"id":"f1c2a387-161a-49f9-a165-0f21d7a4e1c4","type":"channel.follow","version":"2"},"event":{"user_id":"1234"}}`
	twitchSig    = "sha256=d7eac26fc9a6dd28e520cae674da7cb95137fb9630a08d9a8fcfa3dc0adc55b3"

	twitchChallengeBody = `{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{"id":"f1c2a387-161a-49f9-a165-0f21d7a4e1c4","status":"webhook_callback_verification_pending","type":"channel.follow","version":"2"}}`
	twitchChallengeSig  = "sha256=7831fa9a4c07f4d04ee0a8b22a4555f738df573d5b1f46f776ac89e2d55cbb8f"
)

func twitchHeader(id, sig, typ string) http.Header {
	return hdr(headerTwitchID, id, headerTwitchTimestamp, twitchTS, "Twitch-Eventsub-Message-Signature", sig,
		headerTwitchType, typ, "Twitch-Eventsub-Subscription-Type", "channel.follow")
}

func TestTwitch(t *testing.T) {
	sent, _ := time.Parse(time.RFC3339Nano, twitchTS)
	at := func(d time.Duration) func() time.Time { return func() time.Time { return sent.Add(d) } }
	v := setup(t, Config{Scheme: "twitch", Secrets: []string{twitchSecret}, Now: at(time.Minute)})
	const id = "befa7b53-d79d-478f-86b9-120f112b044e"
	runVectors(t, v, []vectorCase{
		{name: "vector accepted", header: twitchHeader(id, twitchSig, "notification"), body: twitchBody, wantID: id, wantType: "channel.follow"},
		{name: "changed body refused", header: twitchHeader(id, twitchSig, "notification"), body: flip(twitchBody), wantErr: ErrNoMatch},
	})
	stale := setup(t, Config{Scheme: "twitch", Secrets: []string{twitchSecret}, Now: at(11 * time.Minute)})
	runVectors(t, stale, []vectorCase{
		{name: "older than 10 minutes refused", header: twitchHeader(id, twitchSig, "notification"), body: twitchBody, wantErr: ErrTimestamp},
	})
	roundTrip(t, setup(t, Config{Scheme: "twitch", Secrets: []string{twitchSecret}, Now: fixedClock}), "twitch", twitchSecret, twitchBody, testNow)

	const hid = "e76c6bd4-55c9-4987-8304-da1588d8988b"
	post := func(h http.Header, body string) Request {
		return Request{Method: http.MethodPost, Header: h, Body: []byte(body)}
	}
	runHandshakes(t, v, []handshakeCase{
		{
			name: "challenge echoed as text/plain", req: post(twitchHeader(hid, twitchChallengeSig, "webhook_callback_verification"), twitchChallengeBody),
			wantOK: true, wantStatus: 200, wantType: "text/plain", wantBody: "pogchamp-kappa-360noscope-vohiyo",
		},
		{name: "forged challenge refused", req: post(twitchHeader(hid, twitchChallengeSig, "webhook_callback_verification"), flip(twitchChallengeBody)), wantErr: ErrNoMatch},
		{name: "notification is no handshake", req: post(twitchHeader(id, twitchSig, "notification"), twitchBody)},
	})
	runHandshakes(t, stale, []handshakeCase{
		{name: "stale challenge refused", req: post(twitchHeader(hid, twitchChallengeSig, "webhook_callback_verification"), twitchChallengeBody), wantErr: ErrTimestamp},
	})
}
