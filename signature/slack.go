package signature

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
)

// Slack signs "v0:<timestamp>:<body>" with HMAC-SHA256 keyed with the
// signing secret's bytes. Requests carry no delivery id, so the body hash
// is the id unless an override is configured.
//
// The Events API wrapper still carries the app's verification token, the
// deprecated shared secret that apps once compared instead of the
// signature (https://api.slack.com/types/event): it is a SecretField, so
// the stored copy holds RedactedMarker, and no reader of events gets a
// token that older consumers would take for Slack. Slash commands post a
// form with the token as a field of its own
// (https://api.slack.com/slash-commands), and interactivity requests a
// form whose payload field is a JSON document holding it
// (https://docs.slack.dev/reference/interaction-payloads/block_actions-payload):
// both are redacted too.
const (
	headerSlackSignature = "X-Slack-Signature"
	headerSlackTimestamp = "X-Slack-Request-Timestamp"
)

func init() {
	register(&scheme{
		Scheme: Scheme{Name: SchemeSlack, Keys: KeySecrets, SecretFields: []string{"token"},
			SecretFormFields: []string{"token"}, FormJSONFields: []string{"payload"}},
		build:     func(_ Config, b base) (Verifier, error) { return &slackVerifier{b}, nil },
		sign:      signSlack,
		handshake: slackHandshake,
		// Slack posts its slash commands and interactivity requests as a
		// form (https://api.slack.com/slash-commands), its Events API as
		// JSON.
		sender: Sender{FormUnlessJSON: true},
	})
}

var (
	slackSignatureErrors = newHeaderErrors(SchemeSlack, headerSlackSignature)
	slackTimestampErrors = newHeaderErrors(SchemeSlack, headerSlackTimestamp)
	slackNoMatch         = fmt.Errorf("%s: %w", SchemeSlack, ErrNoMatch)
)

// slackVerifier verifies X-Slack-Signature: v0=<hex>.
type slackVerifier struct{ base }

// Verify implements Verifier.
func (v *slackVerifier) Verify(req Request) (Result, error) {
	h, body := req.Header, req.Body
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

func signSlack(secret string, body []byte, opts SignOptions) (http.Header, error) {
	unix := opts.unixString()
	h := http.Header{}
	h.Set(headerSlackTimestamp, unix)
	h.Set(headerSlackSignature, "v0="+hexMAC(sha256.New, []byte(secret), body, "v0:", unix, ":"))
	return h, nil
}

// Slack checks an Events API request URL with a url_verification event,
// signed like any other, and expects its challenge back
// (https://api.slack.com/events/url_verification): in plain text, as JSON
// or form-encoded; plain text is the simplest.
var slackChallengeFields = []string{"type", "challenge"}

// slackHandshake answers url_verification. The body is searched for the
// type's name before anything else: a plain byte search, not a parse, so an
// ordinary event costs next to nothing here and nothing is read as JSON
// before its signature verified.
func slackHandshake(v Verifier, req Request) (HandshakeResponse, bool, error) {
	if req.Method != http.MethodPost || !bytes.Contains(req.Body, []byte("url_verification")) {
		return HandshakeResponse{}, false, nil
	}
	if _, err := v.Verify(req); err != nil {
		return HandshakeResponse{}, false, err
	}
	var vals [2]string
	var found [2]bool
	lookupJSON(req.Body, slackChallengeFields, vals[:], found[:])
	if vals[0] != "url_verification" {
		// An event that merely mentions the word: not a handshake.
		return HandshakeResponse{}, false, nil
	}
	if !found[1] || vals[1] == "" || len(vals[1]) > MaxHeaderLen {
		return HandshakeResponse{}, false, fmt.Errorf("%s: url_verification without a challenge: %w", SchemeSlack, ErrMalformedHeader)
	}
	return textAnswer(vals[1]), true, nil
}

var _ Verifier = (*slackVerifier)(nil)
