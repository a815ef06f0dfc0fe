package signature

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
)

// Slack signs "v0:<timestamp>:<body>" with HMAC-SHA256 keyed with the
// signing secret's bytes. Requests carry no delivery id, so the body hash
// is the id unless an override is configured.
const (
	headerSlackSignature = "X-Slack-Signature"
	headerSlackTimestamp = "X-Slack-Request-Timestamp"
)

var (
	slackSignatureErrors = newHeaderErrors(SchemeSlack, headerSlackSignature)
	slackTimestampErrors = newHeaderErrors(SchemeSlack, headerSlackTimestamp)
	slackNoMatch         = fmt.Errorf("%s: %w", SchemeSlack, ErrNoMatch)
)

// slackVerifier verifies X-Slack-Signature: v0=<hex>.
type slackVerifier struct{ base }

// Verify implements Verifier.
func (v *slackVerifier) Verify(h http.Header, body []byte) (Result, error) {
	ts, err := slackTimestampErrors.get(h, headerSlackTimestamp)
	if err != nil {
		return Result{}, err
	}
	unix, ok := parseUnix(ts)
	if !ok {
		return Result{}, slackTimestampErrors.malformed
	}
	value, err := slackSignatureErrors.get(h, headerSlackSignature)
	if err != nil {
		return Result{}, err
	}
	var sigs sigSet
	if err := parseSlack(value, &sigs); err != nil {
		return Result{}, err
	}
	index, ok := v.find(&sigs, body, "v0:", ts, ":")
	if !ok {
		return Result{}, slackNoMatch
	}
	if err := v.checkTime(unix); err != nil {
		return Result{}, err
	}
	return v.meta.result(index, h, body, ""), nil
}

// parseSlack decodes "v0=<hex>". Another version is not usable (no match);
// a value without '=' or with a v0 that does not decode is malformed.
func parseSlack(value string, sigs *sigSet) error {
	sigs.size = sha256.Size
	version, hexMAC, ok := strings.Cut(value, "=")
	switch {
	case !ok:
		return slackSignatureErrors.malformed
	case version != "v0":
		return slackNoMatch
	case !decodeHex(sigs.slot(), hexMAC):
		return slackSignatureErrors.malformed
	}
	sigs.commit()
	return nil
}

var _ Verifier = (*slackVerifier)(nil)
