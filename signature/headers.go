package signature

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"
)

// The header checks of CheckHeaders: each reads only what its Verify reads
// first, so a request they refuse is one Verify would refuse with the same
// error, before any MAC or signature is computed.

func (e *engine) checkHeaders(h http.Header) error {
	value, err := e.sigErrors.get(h, e.header)
	if err != nil {
		return err
	}
	var sigs sigSet
	sigs.size = e.size
	if _, err := e.parse(value, &sigs); err != nil {
		return err
	}
	if e.tsHeader != "" {
		if _, err := e.tsErrors.get(h, e.tsHeader); err != nil {
			return err
		}
	}
	if e.idHeader != "" {
		if _, err := e.idErrors.get(h, e.idHeader); err != nil {
			return err
		}
	}
	return nil
}

func (v *slackVerifier) checkHeaders(h http.Header) error {
	ts, err := slackTimestampErrors.get(h, headerSlackTimestamp)
	if err != nil {
		return err
	}
	if _, ok := parseUnix(ts); !ok {
		return slackTimestampErrors.malformed
	}
	value, err := slackSignatureErrors.get(h, headerSlackSignature)
	if err != nil {
		return err
	}
	var sigs sigSet
	return parseSlack(value, &sigs)
}

func (v *edVerifier) checkHeaders(h http.Header) error {
	s := v.scheme
	ts, err := s.tsErrors.get(h, s.tsHeader)
	if err != nil {
		return err
	}
	if _, ok := parseUnix(ts); !ok {
		return s.tsErrors.malformed
	}
	_, err = s.sigErrors.get(h, s.sigHeader)
	return err
}

func (v *tokenVerifier) checkHeaders(h http.Header) error {
	_, err := v.errors.get(h, v.header)
	return err
}

func (v *githubVerifier) checkHeaders(h http.Header) error {
	value, err := githubErrors.get(h, headerGitHubSignature)
	if err != nil {
		return err
	}
	var sigs sigSet
	return parseGitHub(value, &sigs)
}

// Stripe's header may carry several v1 values (one per active secret
// during a roll) and v0 or unknown keys: parseStripe accepts what Verify
// accepts, and refuses a header without a t or without any usable v1.
func (v *stripeVerifier) checkHeaders(h http.Header) error {
	value, err := stripeErrors.get(h, headerStripe)
	if err != nil {
		return err
	}
	var sigs sigSet
	_, _, err = parseStripe(value, &sigs)
	return err
}

func (v *shopifyVerifier) checkHeaders(h http.Header) error {
	value, err := shopifyErrors.get(h, headerShopifySignature)
	if err != nil {
		return err
	}
	var sigs sigSet
	return parseShopify(value, &sigs)
}

// Both header families are read, webhook-* first and svix-* next, as in
// Verify: the senders over Standard Webhooks (svix, polar, resend, clerk,
// brex, gitlabsigned) share this check.
func (v *standardVerifier) checkHeaders(h http.Header) error {
	if _, err := standardIDErrors.get(h, headerStandardID, headerSvixID); err != nil {
		return err
	}
	ts, err := standardTimestampErrors.get(h, headerStandardTimestamp, headerSvixTimestamp)
	if err != nil {
		return err
	}
	if _, ok := parseUnix(ts); !ok {
		return standardTimestampErrors.malformed
	}
	value, err := standardSignatureErrors.get(h, headerStandardSignature, headerSvixSignature)
	if err != nil {
		return err
	}
	var sigs standardSigs
	return parseStandard(value, &sigs)
}

func (v *contentfulVerifier) checkHeaders(h http.Header) error {
	var (
		sigs   sigSet
		names  contentfulNames
		values [maxContentfulHeaders]string
	)
	_, err := contentfulHeaders(h, &sigs, &names, &values)
	return err
}

// Only the token's shape is checked here, which needs no decoding: three
// dot-separated parts without line breaks, the first two non-empty, as
// parseJWS requires.
func (v *netlifyVerifier) checkHeaders(h http.Header) error {
	value, err := netlifySignatureErrors.get(h, headerNetlifySignature)
	if err != nil {
		return err
	}
	if !jwsShaped(value) {
		return netlifySignatureErrors.malformed
	}
	return nil
}

func (v *plaidVerifier) checkHeaders(h http.Header) error {
	value, err := plaidErrors.get(h, headerPlaidVerification)
	if err != nil {
		return err
	}
	if !jwsShaped(value) {
		return plaidErrors.malformed
	}
	return nil
}

// jwsShaped reports whether value has the compact form parseJWS accepts
// before it decodes anything.
func jwsShaped(value string) bool {
	h, rest, ok1 := strings.Cut(value, ".")
	p, s, ok2 := strings.Cut(rest, ".")
	return ok1 && ok2 && h != "" && p != "" && !strings.ContainsAny(value, "\r\n") && strings.IndexByte(s, '.') < 0
}

func (v *twilioVerifier) checkHeaders(h http.Header) error {
	value, err := twilioSignatureErrors.get(h, headerTwilioSignature)
	if err != nil {
		return err
	}
	sigs := sigSet{size: sha1.Size}
	if strings.Contains(h.Get(headerTwilioSettings), "algorithm=HMAC_SHA256") {
		sigs.size = sha256.Size
	}
	if !decodeBase64(sigs.slot(), value) {
		return twilioSignatureErrors.malformed
	}
	return nil
}

func (v *sendgridVerifier) checkHeaders(h http.Header) error {
	ts, err := sendgridTimestampErrors.get(h, headerSendGridTimestamp)
	if err != nil {
		return err
	}
	if _, ok := parseUnix(ts); !ok {
		return sendgridTimestampErrors.malformed
	}
	value, err := sendgridSignatureErrors.get(h, headerSendGridSignature)
	if err != nil {
		return err
	}
	if len(value) > base64.StdEncoding.EncodedLen(maxDERSignature) {
		return sendgridSignatureErrors.malformed
	}
	return nil
}
