package signature

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
)

// Standard Webhooks (https://www.standardwebhooks.com) sign
// "<id>.<timestamp>.<body>" with HMAC-SHA256. Svix sends the same scheme
// under svix-* header names unless an account is white-labelled, so each
// header is read from the webhook-* family first and the svix-* family next.
const (
	headerStandardID        = "Webhook-Id"
	headerStandardTimestamp = "Webhook-Timestamp"
	headerStandardSignature = "Webhook-Signature"
	headerSvixID            = "Svix-Id"
	headerSvixTimestamp     = "Svix-Timestamp"
	headerSvixSignature     = "Svix-Signature"
)

var (
	standardIDErrors        = newHeaderErrors(SchemeStandard, "webhook-id")
	standardTimestampErrors = newHeaderErrors(SchemeStandard, "webhook-timestamp")
	standardSignatureErrors = newHeaderErrors(SchemeStandard, "webhook-signature")
	standardNoMatch         = fmt.Errorf("%s: %w", SchemeStandard, ErrNoMatch)
)

// standardVerifier verifies webhook-signature: v1,<base64> [v1,<base64> …].
// The delivery id is the signed webhook-id; the event type is the JSON type.
type standardVerifier struct{ base }

// Verify implements Verifier.
func (v *standardVerifier) Verify(h http.Header, body []byte) (Result, error) {
	id, err := standardIDErrors.get(h, headerStandardID, headerSvixID)
	if err != nil {
		return Result{}, err
	}
	ts, err := standardTimestampErrors.get(h, headerStandardTimestamp, headerSvixTimestamp)
	if err != nil {
		return Result{}, err
	}
	unix, ok := parseUnix(ts)
	if !ok {
		return Result{}, standardTimestampErrors.malformed
	}
	value, err := standardSignatureErrors.get(h, headerStandardSignature, headerSvixSignature)
	if err != nil {
		return Result{}, err
	}
	var sigs sigSet
	if err := parseStandard(value, &sigs); err != nil {
		return Result{}, err
	}
	index, ok := v.find(&sigs, body, id, ".", ts, ".")
	if !ok {
		return Result{}, standardNoMatch
	}
	// After the MAC, as for Stripe: ErrTimestamp means a genuine request
	// outside the window.
	if err := v.checkTime(unix); err != nil {
		return Result{}, err
	}
	return v.meta.result(index, h, body, id), nil
}

// parseStandard reads the space-separated "<version>,<signature>" list. Only
// v1 (HMAC-SHA256) is used: v1a (ed25519) and unknown versions, entries
// without a comma and v1 entries that do not decode are skipped. An empty
// list or one with more than MaxSignatures entries is malformed; one with no
// usable v1 matches nothing.
func parseStandard(value string, sigs *sigSet) error {
	sigs.size = sha256.Size
	seen := 0
	for entry := range strings.FieldsSeq(value) {
		if seen++; seen > MaxSignatures {
			return standardSignatureErrors.malformed
		}
		version, sig, ok := strings.Cut(entry, ",")
		if ok && version == "v1" && decodeBase64(sigs.slot(), sig) {
			sigs.commit()
		}
	}
	switch {
	case seen == 0:
		return standardSignatureErrors.malformed
	case sigs.n == 0:
		return standardNoMatch
	}
	return nil
}

var _ Verifier = (*standardVerifier)(nil)
