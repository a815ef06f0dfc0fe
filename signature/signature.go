package signature

import (
	"errors"
	"net/http"
	"time"
)

// Sentinel errors: Verify's errors wrap exactly one of them, so callers
// tell the outcomes apart with errors.Is.
var (
	// ErrMissingHeader: the request lacks a header the scheme needs.
	ErrMissingHeader = errors.New("signature header missing")
	// ErrMalformedHeader: a header is present but cannot be parsed, is
	// longer than MaxHeaderLen or lists more than MaxSignatures signatures.
	ErrMalformedHeader = errors.New("signature header malformed")
	// ErrNoMatch: no signature verifies with any of the secrets.
	ErrNoMatch = errors.New("no signature matches")
	// ErrTimestamp: the signature verifies but its signed timestamp is
	// outside the tolerance (a replay, or clock skew).
	ErrTimestamp = errors.New("timestamp outside tolerance")
)

// DefaultTolerance is how far a signed timestamp may be from now, either
// way, when Config.Tolerance is zero: the value Stripe's and the Standard
// Webhooks libraries use.
const DefaultTolerance = 5 * time.Minute

// MaxHeaderLen bounds, in bytes, every signature header value Verify reads;
// a longer one is malformed. The delivery id and event type of a Result are
// returned as sent, whatever their length: the caller bounds them.
const MaxHeaderLen = 8 << 10

// MaxSignatures bounds the signatures one header may list (stripe,
// standard): enough for any rotation, few enough that a hostile header
// cannot make Verify compute many MACs.
const MaxSignatures = 16

// The schemes Config.Scheme accepts.
const (
	SchemeGitHub   = "github"
	SchemeStripe   = "stripe"
	SchemeStandard = "standard" // Standard Webhooks: Svix, Polar, …
	SchemeSlack    = "slack"
	SchemeShopify  = "shopify"
	SchemeGitLab   = "gitlab"
	SchemeHMAC     = "hmac" // generic: configurable header, algorithm, encoding
)

// Schemes returns the names of every supported scheme, in a fixed order.
func Schemes() []string {
	return []string{SchemeGitHub, SchemeStripe, SchemeStandard, SchemeSlack, SchemeShopify, SchemeGitLab, SchemeHMAC}
}

// Result is what a verified request says about itself.
type Result struct {
	SecretIndex int    // index in Config.Secrets of the secret that verified
	DeliveryID  string // scheme's id, an override, or "sha256:<hex of body>"
	EventType   string // may be empty
}

// Verifier checks one endpoint's requests. Verify is safe for concurrent
// use; body must be the raw bytes exactly as received.
type Verifier interface {
	// Verify returns the request's Result when a signature verifies with
	// one of the secrets (and its timestamp is within the tolerance), or an
	// error wrapping one of the sentinel errors.
	Verify(header http.Header, body []byte) (Result, error)
}
