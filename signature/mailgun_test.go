package signature

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Mailgun's signature (https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks:
// HMAC-SHA256 in hex of timestamp and token, keyed with the webhook
// signing key), computed with
//
//	printf '%s' "$TS$TOKEN" | openssl dgst -sha256 -hmac key-mailgun-signing-key-0123 -hex
//
// and, for parent-signature, with -hmac parent-key-456.
const (
	mailgunKey       = "key-mailgun-signing-key-0123"
	mailgunParentKey = "parent-key-456"
	mailgunTS        = "1770920772"
	mailgunToken     = "e0b5477167110d68991efc6b9f89f0a11066af27834600e123"
	mailgunSig       = "e43500b000a686e9777c6b72c66a15585b597265f31a1caea1185bb6f8320e1f"
	mailgunParentSig = "dee9120569cf39bcb0b3a2382bd41dc6d76b3753239cd7d4565072687a560c5d"
	mailgunBody      = `{"signature":{"token":"` + mailgunToken + `","timestamp":"` + mailgunTS + `","signature":"` + mailgunSig + `"},"event-data":{"id":"CPgfbmQMTCKtHW6uIWtuVe","event":"delivered"}}`
)

func TestMailgun(t *testing.T) {
	at := clockAt(t, mailgunTS)
	cfg := Config{Scheme: "mailgun", Secrets: []string{"older-key", mailgunKey}, Now: at}
	want := Result{SecretIndex: 1, DeliveryID: mailgunToken, EventType: "delivered"}
	with := func(old, new string) Request { return post("", hdr(), strings.Replace(mailgunBody, old, new, 1)) }
	req := post("", hdr(), mailgunBody)
	runVerifyCases(t, []verifyCase{
		{name: "openssl vector", cfg: cfg, req: req, want: want},
		{name: "one signature byte changed", cfg: cfg, req: with(mailgunSig, "f"+mailgunSig[1:]), err: ErrNoMatch},
		{name: "one token byte changed", cfg: cfg, req: with(mailgunToken, "f"+mailgunToken[1:]), err: ErrNoMatch},
		{name: "one timestamp byte changed", cfg: cfg, req: with(mailgunTS, "1770920773"), err: ErrNoMatch},
		// The event data is not signed: a changed event is accepted, and
		// deduplicated on the signed token with the genuine one.
		{name: "event data is not signed", cfg: cfg, req: with("delivered", "delivereD"), want: Result{SecretIndex: 1, DeliveryID: mailgunToken, EventType: "delivereD"}},
		{name: "stale", cfg: Config{Scheme: "mailgun", Secrets: []string{mailgunKey}, Now: func() time.Time { return at().Add(6 * time.Minute) }}, req: req, err: ErrTimestamp},
		{name: "stale accepted with the check off", cfg: Config{Scheme: "mailgun", Secrets: []string{mailgunKey}, IgnoreTimestamp: true}, req: req, want: Result{DeliveryID: mailgunToken, EventType: "delivered"}},
		{name: "wrong key", cfg: Config{Scheme: "mailgun", Secrets: []string{"guess"}, Now: at}, req: req, err: ErrNoMatch},
		{name: "parent-signature verifies with the primary key", cfg: Config{Scheme: "mailgun", Secrets: []string{mailgunParentKey}, Now: at},
			req: with(`"},"event-data"`, `","parent-signature":"`+mailgunParentSig+`"},"event-data"`), want: Result{DeliveryID: mailgunToken, EventType: "delivered"}},
		{name: "no signature object", cfg: cfg, req: post("", hdr(), `{"event-data":{"event":"delivered"}}`), err: ErrMissingHeader},
		{name: "no token", cfg: cfg, req: with(`"token":"`+mailgunToken+`",`, ""), err: ErrMissingHeader},
		{name: "signature not hex", cfg: cfg, req: with(mailgunSig, strings.Repeat("z", 64)), err: ErrMalformedHeader},
		{name: "timestamp not a number", cfg: cfg, req: with(mailgunTS, "soon"), err: ErrMalformedHeader},
		{name: "body not JSON", cfg: cfg, req: post("", hdr(), "timestamp="+mailgunTS), err: ErrMalformedHeader},
	})
}

func TestMailgunSignBody(t *testing.T) {
	v := setup(t, Config{Scheme: "mailgun", Secrets: []string{mailgunKey}, Now: fixedClock})
	body, h, err := SignBody("mailgun", mailgunKey, []byte(`{"event-data":{"event":"opened"}}`), SignOptions{ID: "tok-1", Timestamp: testNow})
	if err != nil {
		t.Fatal(err)
	}
	got, err := v.Verify(reqOf(h, body))
	if err != nil || got.DeliveryID != "tok-1" || got.EventType != "opened" {
		t.Fatalf("Verify of SignBody's request = %+v, %v", got, err)
	}
	if _, err := Sign("mailgun", mailgunKey, body, SignOptions{}); err == nil || !strings.Contains(err.Error(), "SignBody") {
		t.Errorf("Sign = %v, want an error pointing to SignBody", err)
	}
	if d, _ := Lookup("mailgun"); d.AcceptStatus != http.StatusOK {
		t.Errorf("mailgun AcceptStatus = %d, want 200", d.AcceptStatus)
	}
	if d, _ := Lookup("github"); d.AcceptStatus != http.StatusAccepted {
		t.Errorf("github AcceptStatus = %d, want 202", d.AcceptStatus)
	}
	if _, err := v.Verify(reqOf(h, []byte(`{"signature":"x"}`))); !errors.Is(err, ErrMalformedHeader) {
		t.Errorf("signature not an object: %v", err)
	}
}
