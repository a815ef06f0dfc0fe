package signature

import (
	"errors"
	"testing"
)

// DocuSign Connect: HMAC-SHA256 of the body, base64, one
// X-DocuSign-Signature-<n> per active key
// (https://developers.docusign.com/platform/webhooks/connect/validate);
// computed with
//
//	printf '%s' "$body" | openssl dgst -sha256 -hmac docusign_hmac_key_1 -binary | base64
//	printf '%s' "$body" | openssl dgst -sha256 -hmac docusign_hmac_key_2 -binary | base64
const (
	docusignBody = `{"event":"envelope-completed","apiVersion":"v2.1","retryCount":0,"generatedDateTime":"2023-11-14T22:13:20.000Z","data":{"envelopeId":"a1b2"}}`
	docusignSig1 = "eNFWxqCsIlMUsmH1Ismj+XOgsrEnecz1/VQa7P5QcUM="
	docusignSig2 = "JZBS9tX9ODoM3vwBdp26bptAPMBttSVnLJDTTmYKZFg="
)

func TestDocusignPreset(t *testing.T) {
	for _, tc := range []presetVector{
		{
			name:   "docusign/openssl vector, key in the first header",
			cfg:    Config{Scheme: "docusign", Secrets: []string{"docusign_hmac_key_1"}},
			header: hdr("X-DocuSign-Signature-1", docusignSig1, "X-DocuSign-Signature-2", docusignSig2),
			body:   docusignBody,
			want:   Result{DeliveryID: bodyID([]byte(docusignBody)), EventType: "envelope-completed"},
		},
		{
			name:   "docusign/openssl vector, key in the second header",
			cfg:    Config{Scheme: "docusign", Secrets: []string{"docusign_hmac_key_2"}},
			header: hdr("X-DocuSign-Signature-1", docusignSig1, "X-DocuSign-Signature-2", docusignSig2),
			body:   docusignBody,
			want:   Result{DeliveryID: bodyID([]byte(docusignBody)), EventType: "envelope-completed"},
		},
		{
			name:   "docusign/openssl vector, key in the last header read",
			cfg:    Config{Scheme: "docusign", Secrets: []string{"docusign_hmac_key_2"}},
			header: hdr("X-DocuSign-Signature-1", docusignSig1, "X-DocuSign-Signature-16", docusignSig2),
			body:   docusignBody,
			want:   Result{DeliveryID: bodyID([]byte(docusignBody)), EventType: "envelope-completed"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPreset(t, tc) })
	}
}

// TestDocuSignHeaders: the numbered family is read up to MaxSignatures,
// and a configured SignatureHeader replaces it.
func TestDocuSignHeaders(t *testing.T) {
	body := []byte(docusignBody)
	v := setup(t, Config{Scheme: "docusign", Secrets: []string{"docusign_hmac_key_2"}})
	if _, err := v.Verify(reqOf(hdr("X-DocuSign-Signature-1", docusignSig1, "X-DocuSign-Signature-17", docusignSig2), body)); !errors.Is(err, ErrNoMatch) {
		t.Errorf("key beyond the headers read: err = %v, want ErrNoMatch", err)
	}
	own := setup(t, Config{Scheme: "docusign", Secrets: []string{"docusign_hmac_key_2"}, SignatureHeader: "X-Sig"})
	if _, err := own.Verify(reqOf(hdr("X-Sig", docusignSig1, "X-DocuSign-Signature-2", docusignSig2), body)); !errors.Is(err, ErrNoMatch) {
		t.Errorf("own header: err = %v, want ErrNoMatch", err)
	}
}
