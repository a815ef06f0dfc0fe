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

// The schemes with code of their own. Presets over the signed-content
// engine (paddle, linear, …) register their names in their own files.
const (
	SchemeGitHub   = "github"
	SchemeStripe   = "stripe"
	SchemeStandard = "standard" // Standard Webhooks: Svix, Polar, …; v1 (HMAC) and v1a (ed25519)
	SchemeSlack    = "slack"
	SchemeShopify  = "shopify"
	SchemeGitLab   = "gitlab"
	SchemeHMAC     = "hmac" // the signed-content engine, configured by hand
	SchemeDiscord  = "discord"
	SchemeSendGrid = "sendgrid"
	SchemeTelnyx   = "telnyx"
)

// Result is what a verified request says about itself.
type Result struct {
	// SecretIndex is the index of the key that verified: in Config.Secrets
	// for a MAC or a token, in Config.PublicKeys for a signature.
	SecretIndex int
	DeliveryID  string // scheme's id, an override, or "sha256:<hex of body>"
	EventType   string // may be empty
	// OrderingKey is the value Config.OrderingKeyHeader or
	// OrderingKeyField names; empty when not configured or absent.
	OrderingKey string
}

// Request is what a Verifier reads of an HTTP request. It is passed by
// value and holds no copies, so building one costs nothing.
type Request struct {
	// Method is the request method, as in "POST".
	Method string
	// URL is the public URL the sender signed: scheme, host, path and
	// query, as in "https://example.com/hooks/twilio?x=1". Only schemes
	// that sign the URL read it (see UsesURL); Config.PublicURL replaces it.
	URL string
	// Header is the request's header.
	Header http.Header
	// Body is the raw body, exactly as received.
	Body []byte
}

// Verifier checks one endpoint's requests. Verify is safe for concurrent
// use.
type Verifier interface {
	// Verify returns the request's Result when a signature verifies with
	// one of the keys (and its timestamp is within the tolerance), or an
	// error wrapping one of the sentinel errors.
	Verify(req Request) (Result, error)
}
