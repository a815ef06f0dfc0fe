// Package signature verifies signed webhook requests: GitHub, Stripe,
// Standard Webhooks (Svix, Polar), Slack, Shopify, GitLab and a generic HMAC
// scheme, with several secrets for rotation, timestamp tolerance in both
// directions and the delivery id and event type of each request.
//
// It imports only the standard library. Verify before parsing: nothing reads
// the body as JSON until its signature has verified.
package signature

import (
	"errors"
	"net/http"
	"time"
)

// Sentinel errors. Their text never contains a secret, a MAC or body bytes.
var (
	ErrMissingHeader   = errors.New("signature header missing")
	ErrMalformedHeader = errors.New("signature header malformed")
	ErrNoMatch         = errors.New("no signature matches")
	ErrTimestamp       = errors.New("timestamp outside tolerance")
)

// DefaultTolerance is how far a signed timestamp may be from now, either way.
const DefaultTolerance = 5 * time.Minute

// Result is what a verified request told us.
type Result struct {
	SecretIndex int    // index in Config.Secrets of the secret that verified
	DeliveryID  string // scheme's id, an override, or "sha256:<hex of body>"
	EventType   string // may be empty
}

// Verifier checks one request against its scheme and secrets.
type Verifier interface {
	Verify(header http.Header, body []byte) (Result, error)
}
