package signature

import (
	"errors"
	"testing"
)

// Cal.com: HMAC-SHA256 of the body, bare hex in X-Cal-Signature-256
// (https://cal.com/docs/developing/guides/automation/webhooks; sender
// sendPayload.ts in calcom/cal.com); computed with
//
//	printf '%s' "$body" | openssl dgst -sha256 -hmac cal_secret_123 -hex
const (
	calcomSecret = "cal_secret_123"
	calcomBody   = `{"triggerEvent":"BOOKING_CREATED","createdAt":"2023-11-14T22:13:20.000Z","payload":{"uid":"bk_123"}}`
	calcomSig    = "b40a4fd175f7f171cf2d4b433985e3576b9356bc4b6c10afeab67b98fafaa166"
)

func TestCalcomPreset(t *testing.T) {
	for _, tc := range []presetVector{
		{
			name:   "calcom/openssl vector",
			cfg:    Config{Scheme: "calcom", Secrets: []string{calcomSecret}},
			header: hdr("X-Cal-Signature-256", calcomSig),
			body:   calcomBody,
			want:   Result{DeliveryID: bodyID([]byte(calcomBody)), EventType: "BOOKING_CREATED"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPreset(t, tc) })
	}
}

// TestCalcomUnsigned: a webhook without a secret sends
// "no-secret-provided", which must never pass.
func TestCalcomUnsigned(t *testing.T) {
	v := setup(t, Config{Scheme: "calcom", Secrets: []string{calcomSecret}})
	if _, err := v.Verify(reqOf(hdr("X-Cal-Signature-256", "no-secret-provided"), []byte(calcomBody))); !errors.Is(err, ErrMalformedHeader) {
		t.Errorf("no-secret-provided: err = %v, want ErrMalformedHeader", err)
	}
}
