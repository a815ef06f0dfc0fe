package signature

import (
	"errors"
	"net/http"
	"time"
)

var (
	ErrMissingHeader   = errors.New("signature header missing")
	ErrMalformedHeader = errors.New("signature header malformed")
	ErrNoMatch         = errors.New("no signature matches")
	ErrTimestamp       = errors.New("timestamp outside tolerance")
)

const DefaultTolerance = 5 * time.Minute

const MaxHeaderLen = 8 << 10

const MaxSignatures = 16

const (
	SchemeGitHub   = "github"
	SchemeStripe   = "stripe"
	SchemeStandard = "standard" // Standard Webhooks: Svix, Polar, …
	SchemeSlack    = "slack"
	SchemeShopify  = "shopify"
	SchemeGitLab   = "gitlab"
	SchemeHMAC     = "hmac" // generic: configurable header, algorithm, encoding
)

func Schemes() []string {
	return []string{SchemeGitHub, SchemeStripe, SchemeStandard, SchemeSlack, SchemeShopify, SchemeGitLab, SchemeHMAC}
}

type Result struct {
	SecretIndex int    // index in Config.Secrets of the secret that verified
	DeliveryID  string // scheme's id, an override, or "sha256:<hex of body>"
	EventType   string // may be empty
}

type Verifier interface {
	Verify(header http.Header, body []byte) (Result, error)
}
