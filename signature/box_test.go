package signature

import (
	"errors"
	"net/http"
	"testing"
	"time"
)

// Box: HMAC-SHA256 of the body and BOX-DELIVERY-TIMESTAMP, base64, the
// primary key's in BOX-SIGNATURE-PRIMARY and the secondary's in
// BOX-SIGNATURE-SECONDARY
// (https://developer.box.com/guides/webhooks/v2/signatures-v2/).
// Published: the vector of Box's SDK tests and migration guide
// (box-python-sdk-gen); re-checked with
//
//	printf '%s%s' "$body" "$ts" | openssl dgst -sha256 -hmac SamplePrimaryKey -binary | base64
const (
	boxTS        = "2020-01-01T00:00:00-07:00"
	boxBody      = `{"webhook":{"id":"1234567890"},"trigger":"FILE.UPLOADED","source":{"id":"1234567890","type":"file","name":"Test.txt"}}`
	boxPrimary   = "4KvFa5/unRL8aaqOlnbInTwkOmieZkn1ZVzsAJuRipE="
	boxSecondary = "yxxwBNk7tFyQSy95/VNKAf1o+j8WMPJuo/KcFc7OS0Q="
)

func TestBoxPreset(t *testing.T) {
	for _, tc := range []presetVector{
		{
			name:   "box/published vector, primary key",
			cfg:    Config{Scheme: "box", Secrets: []string{"SamplePrimaryKey"}, Now: clockAtRFC3339(t, boxTS)},
			header: hdr("BOX-SIGNATURE-PRIMARY", boxPrimary, "BOX-SIGNATURE-SECONDARY", boxSecondary, "BOX-DELIVERY-TIMESTAMP", boxTS, "BOX-DELIVERY-ID", "d-1"),
			body:   boxBody,
			want:   Result{DeliveryID: bodyID([]byte(boxBody)), EventType: "FILE.UPLOADED"},
			stale:  11 * time.Minute,
		},
		{
			name:   "box/published vector, secondary key only",
			cfg:    Config{Scheme: "box", Secrets: []string{"SampleSecondaryKey"}, Now: clockAtRFC3339(t, boxTS)},
			header: hdr("BOX-SIGNATURE-PRIMARY", boxPrimary, "BOX-SIGNATURE-SECONDARY", boxSecondary, "BOX-DELIVERY-TIMESTAMP", boxTS),
			body:   boxBody,
			want:   Result{DeliveryID: bodyID([]byte(boxBody)), EventType: "FILE.UPLOADED"},
			stale:  -11 * time.Minute,
		},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPreset(t, tc) })
	}
}

// TestBoxHeaders: the primary header is required, a secondary that does
// not decode matches nothing, and the event id comes from the body.
func TestBoxHeaders(t *testing.T) {
	v := setup(t, Config{Scheme: "box", Secrets: []string{"SampleSecondaryKey"}, Now: clockAtRFC3339(t, boxTS)})
	body := []byte(boxBody)
	cases := []struct {
		name    string
		header  http.Header
		wantErr error
	}{
		{"no primary", hdr("BOX-SIGNATURE-SECONDARY", boxSecondary, "BOX-DELIVERY-TIMESTAMP", boxTS), ErrMissingHeader},
		{"secondary not base64", hdr("BOX-SIGNATURE-PRIMARY", boxPrimary, "BOX-SIGNATURE-SECONDARY", "%%%", "BOX-DELIVERY-TIMESTAMP", boxTS), ErrNoMatch},
		{"timestamp not rfc3339", hdr("BOX-SIGNATURE-PRIMARY", boxPrimary, "BOX-SIGNATURE-SECONDARY", boxSecondary, "BOX-DELIVERY-TIMESTAMP", "1577858400"), ErrMalformedHeader},
		{"timestamp missing", hdr("BOX-SIGNATURE-PRIMARY", boxPrimary, "BOX-SIGNATURE-SECONDARY", boxSecondary), ErrMissingHeader},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := v.Verify(reqOf(tc.header, body)); !errors.Is(err, tc.wantErr) {
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
		})
	}
	withID := []byte(`{"type":"webhook_event","id":"eac4ee92-1c2d-4a2e-8a1b-0a0b0c0d0e0f","trigger":"FILE.UPLOADED"}`)
	h, err := Sign("box", "SampleSecondaryKey", withID, SignOptions{Timestamp: clockAtRFC3339(t, boxTS)()})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := v.Verify(reqOf(h, withID)); err != nil || res.DeliveryID != "eac4ee92-1c2d-4a2e-8a1b-0a0b0c0d0e0f" {
		t.Errorf("Verify = %+v, %v; want the body's id", res, err)
	}
}
