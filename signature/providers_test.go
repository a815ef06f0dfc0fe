package signature

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Test keys made with openssl for these vectors only:
//
//	openssl genpkey -algorithm ed25519 -out ed.pem
//	openssl ecparam -name prime256v1 -genkey -noout -out ec.pem
//
// Each signature below was made with openssl over the message that the
// provider's documentation describes (cited at each vector), e.g.
//
//	printf '%s' "$msg" | openssl pkeyutl -sign -inkey ed.pem -rawin -in /dev/stdin | base64
//	printf '%s' "$msg" | openssl dgst -sha256 -sign ec.pem | base64
//	printf '%s' "$msg" | openssl dgst -sha256 -hmac "$secret"
const (
	edSeedHex = "8ebaec261791ed0f5432d81ad33b130c42c3f528d3951355c361e46c6f7e0771"
	edPubHex  = "92c81eb58dba9b996d0e9f0f59e32cf77b20b97f9d5becf52d4ec00b25ce604f"
	edPubB64  = "ksgetY26m5ltDp8PWeMs93sguX+dW+z1LU7ACyXOYE8="
	edSeedB64 = "jrrsJheR7Q9UMtga0zsTDELD9SjTlRNVw2HkbG9+B3E="

	p256PubB64  = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEygqjzJfr5jNuHxhT9FY/PJkbGaoxyOqRTfde1Hv4jznnBrR9//Zj4TE82032HwYfRM/+czGE05CJiIDx7hcVLQ=="
	p256PrivB64 = "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgrBhsDjZiJyOfTK8wnEC/O0TY9v/mVUdfrbEUKpsDjBChRANCAATKCqPMl+vmM24fGFP0Vj88mRsZqjHI6pFN917Ue/iPOecGtH3/9mPhMTzbTfYfBh9Ez/5zMYTTkImIgPHuFxUt"

	vectorTS = "1700000000"

	// Discord: ed25519 over timestamp + body, hex
	// (https://discord.com/developers/docs/interactions/receiving-and-responding#security-and-authorization).
	discordBody = `{"type":1,"id":"123","application_id":"456"}`
	discordSig  = "1bb6a37b58b6149ca4c0c9199ea9446b4c5c658f4e358230aecf1cbb09529185bfabb5cc5c3ca0d2823ba55c8d56ecbc4d251644348463a7f0867f89a334ad0c"

	// Telnyx: ed25519 over "timestamp|body", base64
	// (https://developers.telnyx.com/docs/development/api-fundamentals/webhooks).
	telnyxBody = `{"data":{"event_type":"message.received","id":"b301ed3f"}}`
	telnyxSig  = "UmnJvl54fDqmKr4y1QiiO1z9FWuX7u/B4Y2B4qTkvDi1z8JCzszFSLLA5Pf5K45rE+tXu6BLOMKCbikolOsLAw=="

	// Standard Webhooks v1a: ed25519 over "id.timestamp.body", base64,
	// whpk_ public keys (https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md).
	v1aID   = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"
	v1aBody = `{"type":"invoice.paid"}`
	v1aSig  = "v1a,dL6MqwJ5Cy/y752zUDZKgf6xAv0gaf/E7kqFNLSGBFOF9ZejZ303CqS0I6Q+TqJGQArN1SxMO0s+LM6a82EBBw=="

	// SendGrid: ECDSA P-256 with SHA-256 over timestamp + body, base64
	// DER (https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features).
	sendgridBody = `[{"email":"a@example.com","event":"delivered","sg_event_id":"x"}]`
	sendgridSig  = "MEYCIQCAOj/8AcLyVu04vhgvmMg7sXFr3N1Pm2RBht/UCDZg+gIhAPPE7YKU9nlQujvND9CVHpkHcs4LG0mzpx+uo2hKqBqD"

	// Paddle: HMAC-SHA256 over "ts:body" in ts=…;h1=…
	// (https://developer.paddle.com/webhooks/signature-verification).
	paddleSecret = "pdl_ntfset_01h8bkrf3k0z7v8qgzq0a7sxx5_nQ9yC"
	paddleBody   = `{"event_id":"evt_01h8bzakzx3hm2fmen703n5q45","event_type":"transaction.completed"}`
	paddleSig    = "4a747ebcf9669b141053b5d16bd2a2e6f1bcd1d88c695e968123fafad44f1411"

	// Linear: HMAC-SHA256 of the body, hex in Linear-Signature
	// (https://linear.app/developers/webhooks).
	linearSecret = "lin_wh_secret"
	linearBody   = `{"action":"create","type":"Issue","webhookTimestamp":1700000000000}`
	linearSig    = "91e919dc0fd99df1cae12efef1ca08b082cfa523f101b572ec14ed98863fdf35"

	// Lemon Squeezy: HMAC-SHA256 of the body, hex in X-Signature
	// (https://docs.lemonsqueezy.com/help/webhooks/signing-requests).
	lemonSecret = "lemon-secret"
	lemonBody   = `{"meta":{"event_name":"order_created"},"data":{"id":"1"}}`
	lemonSig    = "32296033f462b4b2964652bd0aabdd5447c42a5ea66edf113b368d3bb81b04cc"
)

// testPublicKey is a public key the scheme accepts.
func testPublicKey(scheme string) string {
	if scheme == SchemeSendGrid || scheme == "plaid" {
		return p256PubB64
	}
	return edPubB64
}

// testPrivateKey is the private key of testPublicKey.
func testPrivateKey(scheme string) string {
	switch scheme {
	case SchemeSendGrid, "plaid":
		return p256PrivB64
	case SchemeStandard:
		return "whsk_" + edSeedB64
	}
	return edSeedHex
}

func providerVectors(t *testing.T) []vector {
	t.Helper()
	at := clockAt(t, vectorTS)
	return []vector{
		{
			name:   "discord/openssl vector, hex key",
			cfg:    Config{Scheme: SchemeDiscord, PublicKeys: []string{edPubHex}, Now: at},
			header: hdr("X-Signature-Ed25519", discordSig, "X-Signature-Timestamp", vectorTS),
			body:   discordBody,
			want:   Result{DeliveryID: "123", EventType: "1"},
		},
		{
			name:   "telnyx/openssl vector, second key",
			cfg:    Config{Scheme: SchemeTelnyx, PublicKeys: []string{"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", edPubB64}, Now: at},
			header: hdr("telnyx-signature-ed25519", telnyxSig, "telnyx-timestamp", vectorTS),
			body:   telnyxBody,
			want:   Result{SecretIndex: 1, DeliveryID: bodyID([]byte(telnyxBody))},
		},
		{
			name:   "standard/v1a openssl vector",
			cfg:    Config{Scheme: SchemeStandard, PublicKeys: []string{"whpk_" + edPubB64}, Now: at},
			header: hdr("webhook-id", v1aID, "webhook-timestamp", vectorTS, "webhook-signature", "v1,"+strings.Repeat("A", 43)+"= "+v1aSig),
			body:   v1aBody,
			want:   Result{DeliveryID: v1aID, EventType: "invoice.paid"},
		},
		{
			name:   "sendgrid/openssl vector",
			cfg:    Config{Scheme: SchemeSendGrid, PublicKeys: []string{p256PubB64}, Now: at},
			header: hdr("X-Twilio-Email-Event-Webhook-Signature", sendgridSig, "X-Twilio-Email-Event-Webhook-Timestamp", vectorTS),
			body:   sendgridBody,
			want:   Result{DeliveryID: bodyID([]byte(sendgridBody))},
		},
		{
			name:   "paddle/openssl vector",
			cfg:    Config{Scheme: "paddle", Secrets: []string{paddleSecret}, Now: at},
			header: hdr("Paddle-Signature", "ts="+vectorTS+";h1="+paddleSig),
			body:   paddleBody,
			want:   Result{DeliveryID: "evt_01h8bzakzx3hm2fmen703n5q45", EventType: "transaction.completed"},
		},
		{
			name:   "paddle/rotation, second h1 matches",
			cfg:    Config{Scheme: "paddle", Secrets: []string{paddleSecret}, Now: at},
			header: hdr("Paddle-Signature", "ts="+vectorTS+";h1="+strings.Repeat("0", 64)+";h1="+paddleSig),
			body:   paddleBody,
			want:   Result{DeliveryID: "evt_01h8bzakzx3hm2fmen703n5q45", EventType: "transaction.completed"},
		},
		{
			name:   "linear/openssl vector",
			cfg:    Config{Scheme: "linear", Secrets: []string{linearSecret}, Now: at},
			header: hdr("Linear-Signature", linearSig, "Linear-Delivery", "d-1", "Linear-Event", "Issue"),
			body:   linearBody,
			want:   Result{DeliveryID: "d-1", EventType: "Issue"},
		},
		{
			name:   "lemonsqueezy/openssl vector",
			cfg:    Config{Scheme: "lemonsqueezy", Secrets: []string{lemonSecret}},
			header: hdr("X-Signature", lemonSig, "X-Event-Name", "order_created"),
			body:   lemonBody,
			want:   Result{DeliveryID: bodyID([]byte(lemonBody)), EventType: "order_created"},
		},
	}
}

func TestProviderVectors(t *testing.T) {
	for _, tc := range providerVectors(t) {
		t.Run(tc.name, func(t *testing.T) {
			v := setup(t, tc.cfg)
			got, err := v.Verify(reqOf(tc.header, []byte(tc.body)))
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if got != tc.want {
				t.Errorf("Verify = %+v, want %+v", got, tc.want)
			}
			// One byte of the body changed: no match.
			for i := range len(tc.body) {
				b := []byte(tc.body)
				b[i] ^= 0x01
				if _, err := v.Verify(reqOf(tc.header, b)); !errors.Is(err, ErrNoMatch) {
					t.Fatalf("body byte %d flipped: err = %v, want ErrNoMatch", i, err)
				}
			}
		})
	}
}

// TestPublicKeySchemes covers the asymmetric schemes through Sign: the
// signed request verifies, a stale one is ErrTimestamp, another key's is
// ErrNoMatch, and bad keys are refused by New naming the field.
func TestPublicKeySchemes(t *testing.T) {
	body := []byte(`{"id":"i-1","type":"t"}`)
	for _, scheme := range []string{SchemeDiscord, SchemeTelnyx, SchemeSendGrid, SchemeStandard} {
		t.Run(scheme, func(t *testing.T) {
			v := setup(t, Config{Scheme: scheme, PublicKeys: []string{testPublicKey(scheme)}, Now: fixedClock})
			h, err := Sign(scheme, testPrivateKey(scheme), body, SignOptions{ID: "m-1", Timestamp: testNow})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := v.Verify(reqOf(h, body)); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			stale, _ := Sign(scheme, testPrivateKey(scheme), body, SignOptions{ID: "m-1", Timestamp: testNow.Add(-time.Hour)})
			if _, err := v.Verify(reqOf(stale, body)); !errors.Is(err, ErrTimestamp) {
				t.Errorf("stale: err = %v, want ErrTimestamp", err)
			}
			other := setup(t, Config{Scheme: scheme, PublicKeys: []string{otherPublicKey(t, scheme)}, Now: fixedClock})
			if _, err := other.Verify(reqOf(h, body)); !errors.Is(err, ErrNoMatch) {
				t.Errorf("other key: err = %v, want ErrNoMatch", err)
			}
			for _, bad := range []string{"not a key", "whpk_AAAA", p256PubB64[:40]} {
				if scheme == SchemeSendGrid && bad == "whpk_AAAA" {
					continue
				}
				_, err := New(Config{Scheme: scheme, PublicKeys: []string{bad}})
				if err == nil || !strings.Contains(err.Error(), "PublicKeys[0]") {
					t.Errorf("New with key %q: %v, want a PublicKeys[0] error", bad, err)
				}
			}
		})
	}
}

// otherPublicKey is a valid key that did not sign the test requests.
func otherPublicKey(t testing.TB, scheme string) string {
	if scheme == SchemeSendGrid {
		// A P-256 key from openssl ecparam -genkey, not the test key.
		return "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAECRUwsz0utldTQWF4Cok/34GqlqZf2b+AG33mPK9+XyxoEOu7v40Kvnx4WWG8tsrODlzHLgPreiitrF2QMrKvXQ=="
	}
	return otherEdKey()
}

// otherEdKey is a valid ed25519 public key that did not sign the vectors:
// that of the all-zero seed.
func otherEdKey() string {
	return hex.EncodeToString(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public().(ed25519.PublicKey))
}

func TestStandardV1AndV1a(t *testing.T) {
	body := []byte(`{"type":"x"}`)
	const secret = "whsec_dGVzdA=="
	v := setup(t, Config{Scheme: SchemeStandard, Secrets: []string{secret}, PublicKeys: []string{edPubB64}, Now: fixedClock})
	hmacSigned, _ := Sign(SchemeStandard, secret, body, SignOptions{ID: "m", Timestamp: testNow})
	edSigned, _ := Sign(SchemeStandard, "whsk_"+edSeedB64, body, SignOptions{ID: "m", Timestamp: testNow})
	for name, h := range map[string]http.Header{"v1": hmacSigned, "v1a": edSigned} {
		if _, err := v.Verify(reqOf(h, body)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	onlyMAC := setup(t, Config{Scheme: SchemeStandard, Secrets: []string{secret}, Now: fixedClock})
	if _, err := onlyMAC.Verify(reqOf(edSigned, body)); !errors.Is(err, ErrNoMatch) {
		t.Errorf("v1a without public keys: err = %v, want ErrNoMatch", err)
	}
}
