package signature

import (
	"net/http"
	"testing"
)

// Xero: HMAC-SHA256 of the body keyed with the webhooks key as a string,
// base64 in x-xero-signature
// (https://developer.xero.com/documentation/guides/webhooks/); an
// intent-to-receive body, computed with
//
//	printf '%s' "$body" | openssl dgst -sha256 -hmac "$key" -binary | base64
const (
	xeroKey  = "OSd0eLlVIY9ZhViEqlDUh4+6n6M+Lo+eDaEJheJ6OCCgWwIz2D3JIAU6jPMipHRbgKTLz2uJ+xiACXGDBLrgdA=="
	xeroBody = `{"events":[],"firstEventSequence":0,"lastEventSequence":0,"entropy":"S0m3r4Nd0mt3xt"}`
	xeroSig  = "Gt4LXdM2h/E90EuzKib+WZrTp6c2sHhPUUGvB4K0dZM="
)

func TestXeroPreset(t *testing.T) {
	for _, tc := range []presetVector{
		{
			name:   "xero/openssl vector, intent to receive",
			cfg:    Config{Scheme: "xero", Secrets: []string{xeroKey}},
			header: hdr("x-xero-signature", xeroSig),
			body:   xeroBody,
			want:   Result{DeliveryID: bodyID([]byte(xeroBody))},
		},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPreset(t, tc) })
	}
}

// TestXeroAcceptStatus: Xero's intent-to-receive check wants exactly 200
// for a correctly signed delivery
// (https://developer.xero.com/documentation/guides/webhooks/), not 202.
func TestXeroAcceptStatus(t *testing.T) {
	if d, _ := Lookup("xero"); d.AcceptStatus != http.StatusOK {
		t.Errorf("xero AcceptStatus = %d, want 200", d.AcceptStatus)
	}
	if d, _ := Lookup("github"); d.AcceptStatus != http.StatusAccepted {
		t.Errorf("github AcceptStatus = %d, want 202", d.AcceptStatus)
	}
}
