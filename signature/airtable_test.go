package signature

import (
	"errors"
	"strings"
	"testing"
)

// Airtable: HMAC-SHA256 of the body keyed with the base64-decoded MAC
// secret, hex after hmac-sha256= in X-Airtable-Content-MAC
// (https://airtable.com/developers/web/api/webhooks-overview); computed
// with
//
//	printf '%s' "$body" | openssl dgst -sha256 -mac HMAC \
//		-macopt hexkey:$(printf '%s' "$macSecretBase64" | base64 -d | xxd -p -c256) -hex
const (
	airtableSecret = "YWlydGFibGUtbWFjLXNlY3JldC0zMi1ieXRlcyEhISE="
	airtableBody   = `{"base":{"id":"appABC"},"webhook":{"id":"achXYZ"},"timestamp":"2022-02-01T21:25:05.663Z"}`
	airtableSig    = "9253d28392fa34ce1b54cd033c43cab271d8a368b02baeee0606dd4ae3ae4637"
)

func TestAirtablePreset(t *testing.T) {
	for _, tc := range []presetVector{
		{
			name:   "airtable/openssl vector, decoded key",
			cfg:    Config{Scheme: "airtable", Secrets: []string{airtableSecret}},
			header: hdr("X-Airtable-Content-MAC", "hmac-sha256="+airtableSig),
			body:   airtableBody,
			want:   Result{DeliveryID: bodyID([]byte(airtableBody))},
		},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPreset(t, tc) })
	}
}

// TestAirtableSecret: the secret must be the base64 Airtable hands out;
// its string bytes are not the key.
func TestAirtableSecret(t *testing.T) {
	if _, err := New(Config{Scheme: "airtable", Secrets: []string{"not base64!"}}); err == nil || !strings.Contains(err.Error(), "Secrets[0]") {
		t.Errorf("New with a non-base64 secret: %v, want a Secrets[0] error", err)
	}
	if _, err := Sign("airtable", "not base64!", []byte(airtableBody), SignOptions{}); err == nil {
		t.Error("Sign with a non-base64 secret succeeded")
	}
	raw := setup(t, Config{Scheme: "hmac", SignatureHeader: "X-Airtable-Content-MAC", SignaturePrefix: "hmac-sha256=", Secrets: []string{airtableSecret}})
	if _, err := raw.Verify(reqOf(hdr("X-Airtable-Content-MAC", "hmac-sha256="+airtableSig), []byte(airtableBody))); !errors.Is(err, ErrNoMatch) {
		t.Errorf("undecoded key: err = %v, want ErrNoMatch", err)
	}
}
