package signature

import (
	"errors"
	"testing"
	"time"
)

// Linear: HMAC-SHA256 of the body, hex in Linear-Signature, and the
// body's webhookTimestamp (ms) within a minute
// (https://linear.app/developers/webhooks); computed with
//
//	printf '%s' "$body" | openssl dgst -sha256 -hmac lin_wh_secret_123 -hex
const (
	linearSecret123 = "lin_wh_secret_123"
	linearTSBody    = `{"action":"create","type":"Issue","data":{"id":"abc"},"webhookTimestamp":1700000000123,"webhookId":"wh_1"}`
	linearTSSig     = "ba220000dbee57f372895df3e31fa5ddcb0f42545880251651c23b15a72a1a3e"
)

func TestLinearPreset(t *testing.T) {
	for _, tc := range []presetVector{
		{
			name:   "linear/openssl vector, fresh webhookTimestamp",
			cfg:    Config{Scheme: "linear", Secrets: []string{linearSecret123}, Now: clockAt(t, vectorTS)},
			header: hdr("Linear-Signature", linearTSSig, "Linear-Delivery", "d-1", "Linear-Event", "Issue"),
			body:   linearTSBody,
			want:   Result{DeliveryID: "d-1", EventType: "Issue"},
			stale:  2 * time.Minute,
		},
		{
			name:   "linear/openssl vector, a minute in the future is fine",
			cfg:    Config{Scheme: "linear", Secrets: []string{linearSecret123}, Now: clockAt(t, "1699999940")},
			header: hdr("Linear-Signature", linearTSSig, "Linear-Delivery", "d-1", "Linear-Event", "Issue"),
			body:   linearTSBody,
			want:   Result{DeliveryID: "d-1", EventType: "Issue"},
			stale:  -2 * time.Minute,
		},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPreset(t, tc) })
	}
}

// TestLinearTimestamp: a verified body without webhookTimestamp is refused
// unless the check is off.
func TestLinearTimestamp(t *testing.T) {
	body := []byte(`{"action":"create","type":"Issue"}`)
	h := signed(t, "linear", linearSecret123, string(body), SignOptions{ID: "d-1"})
	strict := setup(t, Config{Scheme: "linear", Secrets: []string{linearSecret123}, Now: fixedClock})
	if _, err := strict.Verify(reqOf(h, body)); !errors.Is(err, ErrTimestamp) {
		t.Errorf("no webhookTimestamp: err = %v, want ErrTimestamp", err)
	}
	replay := setup(t, Config{Scheme: "linear", Secrets: []string{linearSecret123}, IgnoreTimestamp: true})
	if _, err := replay.Verify(reqOf(h, body)); err != nil {
		t.Errorf("no webhookTimestamp, check off: %v", err)
	}
}
