package signature

import (
	"cmp"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strings"
	"time"
)

// SecretMode says how a Standard Webhooks secret becomes the HMAC key.
type SecretMode string

// Secret modes for the standard scheme.
const (
	// SecretBase64 base64-decodes what follows an optional "whsec_" prefix,
	// padded or not: the Standard Webhooks specification, Svix.
	SecretBase64 SecretMode = "base64"
	// SecretRaw uses the bytes of the whole secret string, prefix included:
	// what Polar's SDKs do (they base64-encode the secret before handing it
	// to a Standard Webhooks verifier).
	SecretRaw SecretMode = "raw"
	// SecretBoth tries the base64 key first (when the secret decodes) and
	// then the raw bytes, for each secret. It does not look at the prefix, so
	// it serves senders whose secret format is not known in advance.
	SecretBoth SecretMode = "both"
)

// Config selects a scheme and its secrets. The zero value of every field
// but Scheme and Secrets is a sound default.
type Config struct {
	// Scheme is one of Schemes(): github, stripe, standard, slack, shopify,
	// gitlab, hmac. Required.
	Scheme string

	// Secrets are the accepted secrets, tried in order; the first that
	// verifies wins and its index is Result.SecretIndex. Several secrets let
	// an endpoint rotate without downtime; each secret tried before the one
	// that matches costs one MAC of the body, so list the current one first.
	// For stripe the secret is used as given, "whsec_" included; for
	// standard see SecretMode; for gitlab it is the token. Required: at
	// least one, none empty.
	Secrets []string

	// SecretMode applies to the standard scheme only: base64, raw or both.
	// Default: base64.
	SecretMode SecretMode

	// Tolerance is how far a signed timestamp (stripe, standard, slack) may
	// be from Now, in the past or the future; negative is an error. Schemes
	// without a timestamp ignore it. Default: 5m (DefaultTolerance).
	Tolerance time.Duration

	// IgnoreTimestamp turns the tolerance check off: an explicit choice, for
	// replaying stored deliveries. The timestamp is still part of the signed
	// content and must be present and well formed. Must not be combined with
	// a Tolerance. Default: false.
	IgnoreTimestamp bool

	// Now is the clock for the tolerance check. Default: time.Now.
	Now func() time.Time

	// DeliveryIDHeader names a request header, or DeliveryIDField a
	// top-level field of the JSON body (string or number), that overrides the
	// scheme's delivery id. Set at most one. Both are read only after the
	// signature verified. When the request lacks it, the scheme's own id is
	// used, and without that "sha256:" + the hex SHA-256 of the body.
	// Default: the scheme's id.
	DeliveryIDHeader string
	DeliveryIDField  string

	// EventTypeHeader or EventTypeField overrides the scheme's event type the
	// same way. Set at most one. Default: the scheme's event type, if any.
	EventTypeHeader string
	EventTypeField  string

	// SignatureHeader names the header that carries the MAC. hmac scheme
	// only. Required for hmac.
	SignatureHeader string

	// Algorithm is sha256, sha1 or sha512. hmac scheme only. Default: sha256.
	Algorithm string

	// Encoding of the MAC in SignatureHeader: hex (either case) or base64
	// (padded or not). hmac scheme only. Default: hex.
	Encoding string

	// SignaturePrefix, when set, must precede the encoded MAC, as in
	// "sha256=". hmac scheme only. Default: none.
	SignaturePrefix string
}

// New validates cfg and returns the Verifier for its scheme. Errors name the
// offending field and never contain a secret.
func New(cfg Config) (Verifier, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("signature: %w", err)
	}
	b := base{now: cfg.Now, tolerance: cfg.Tolerance}
	if b.now == nil {
		b.now = time.Now
	}
	if b.tolerance == 0 {
		b.tolerance = DefaultTolerance
	}
	if cfg.IgnoreTimestamp {
		b.tolerance = 0
	}
	raw := func() { b.keys = rawKeys(sha256.New, cfg.Secrets) }
	switch cfg.Scheme {
	case SchemeGitHub:
		raw()
		b.meta = newMeta(cfg, []source{header(headerGitHubDelivery)}, []source{header(headerGitHubEvent)})
		return &githubVerifier{b}, nil
	case SchemeStripe:
		raw()
		b.meta = newMeta(cfg, []source{field("id")}, []source{field("type")})
		return &stripeVerifier{b}, nil
	case SchemeStandard:
		keys, err := standardKeys(cfg.Secrets, cmp.Or(cfg.SecretMode, SecretBase64))
		if err != nil {
			return nil, fmt.Errorf("signature: %w", err)
		}
		b.keys = keys
		b.meta = newMeta(cfg, []source{signedID()}, []source{field("type")})
		return &standardVerifier{b}, nil
	case SchemeSlack:
		raw()
		b.meta = newMeta(cfg, nil, nil)
		return &slackVerifier{b}, nil
	case SchemeShopify:
		raw()
		b.meta = newMeta(cfg,
			[]source{header(headerShopifyEventID), header(headerShopifyWebhookID)},
			[]source{header(headerShopifyTopic)})
		return &shopifyVerifier{b}, nil
	case SchemeGitLab:
		b.meta = newMeta(cfg, []source{header(headerGitLabUUID)}, []source{header(headerGitLabEvent)})
		return newGitLab(b, cfg.Secrets), nil
	case SchemeHMAC:
		newHash, _ := hashFor(cfg.Algorithm)
		b.keys = rawKeys(newHash, cfg.Secrets)
		b.meta = newMeta(cfg, nil, nil)
		return newHMAC(b, cfg, newHash), nil
	}
	panic("unreachable: validate accepted scheme " + cfg.Scheme)
}

func (cfg *Config) validate() error {
	known := false
	for _, s := range Schemes() {
		known = known || cfg.Scheme == s
	}
	if !known {
		return fmt.Errorf("Scheme %q unknown (want one of %s)", cfg.Scheme, strings.Join(Schemes(), ", "))
	}
	if len(cfg.Secrets) == 0 {
		return errors.New("Secrets: at least one secret is required")
	}
	for i, s := range cfg.Secrets {
		if s == "" {
			return fmt.Errorf("Secrets[%d]: empty", i)
		}
	}
	switch cfg.SecretMode {
	case "", SecretBase64, SecretRaw, SecretBoth:
	default:
		return fmt.Errorf("SecretMode %q unknown (want base64, raw or both)", cfg.SecretMode)
	}
	if cfg.SecretMode != "" && cfg.Scheme != SchemeStandard {
		return fmt.Errorf("SecretMode applies only to the %s scheme", SchemeStandard)
	}
	if cfg.Tolerance < 0 {
		return fmt.Errorf("Tolerance %s is negative (set IgnoreTimestamp to turn the check off)", cfg.Tolerance)
	}
	if cfg.IgnoreTimestamp && cfg.Tolerance != 0 {
		return errors.New("Tolerance and IgnoreTimestamp are mutually exclusive")
	}
	if cfg.DeliveryIDHeader != "" && cfg.DeliveryIDField != "" {
		return errors.New("DeliveryIDHeader and DeliveryIDField are mutually exclusive")
	}
	if cfg.EventTypeHeader != "" && cfg.EventTypeField != "" {
		return errors.New("EventTypeHeader and EventTypeField are mutually exclusive")
	}
	for _, h := range []struct{ name, value string }{
		{"DeliveryIDHeader", cfg.DeliveryIDHeader},
		{"EventTypeHeader", cfg.EventTypeHeader},
		{"SignatureHeader", cfg.SignatureHeader},
	} {
		if h.value != "" && !ValidHeaderName(h.value) {
			return fmt.Errorf("%s %q is not a valid header name", h.name, h.value)
		}
	}
	if cfg.Scheme != SchemeHMAC {
		for _, f := range []struct{ name, value string }{
			{"SignatureHeader", cfg.SignatureHeader},
			{"Algorithm", cfg.Algorithm},
			{"Encoding", cfg.Encoding},
			{"SignaturePrefix", cfg.SignaturePrefix},
		} {
			if f.value != "" {
				return fmt.Errorf("%s applies only to the %s scheme", f.name, SchemeHMAC)
			}
		}
		return nil
	}
	if cfg.SignatureHeader == "" {
		return fmt.Errorf("SignatureHeader is required for the %s scheme", SchemeHMAC)
	}
	if _, err := hashFor(cfg.Algorithm); err != nil {
		return err
	}
	if _, err := encodingFor(cfg.Encoding); err != nil {
		return err
	}
	if len(cfg.SignaturePrefix) > MaxHeaderLen {
		return fmt.Errorf("SignaturePrefix longer than %d bytes", MaxHeaderLen)
	}
	return nil
}

// hashFor maps an Algorithm name to its hash; empty means sha256.
func hashFor(name string) (func() hash.Hash, error) {
	switch name {
	case "", "sha256":
		return sha256.New, nil
	case "sha1":
		return sha1.New, nil
	case "sha512":
		return sha512.New, nil
	}
	return nil, fmt.Errorf("Algorithm %q unknown (want sha256, sha1 or sha512)", name)
}

// encoding is how a MAC travels in a header.
type encoding uint8

const (
	encHex encoding = iota
	encBase64
)

// encodingFor maps an Encoding name; empty means hex.
func encodingFor(name string) (encoding, error) {
	switch name {
	case "", "hex":
		return encHex, nil
	case "base64":
		return encBase64, nil
	}
	return 0, fmt.Errorf("Encoding %q unknown (want hex or base64)", name)
}

// standardKeys derives the Standard Webhooks keys of every secret in mode.
func standardKeys(secrets []string, mode SecretMode) ([]*macKey, error) {
	var keys []*macKey
	for i, s := range secrets {
		decoded, err := decodeStandardSecret(s)
		switch {
		case mode == SecretBase64 && err != nil:
			return nil, fmt.Errorf("Secrets[%d]: %w (set SecretMode to raw or both for senders that sign with the secret's bytes)", i, err)
		case mode != SecretRaw && err == nil:
			keys = append(keys, newMACKey(i, sha256.New, decoded))
		}
		if mode != SecretBase64 {
			keys = append(keys, newMACKey(i, sha256.New, []byte(s)))
		}
	}
	return keys, nil
}

// decodeStandardSecret base64-decodes what follows an optional "whsec_"
// prefix; padding is optional, as the reference libraries allow.
func decodeStandardSecret(s string) ([]byte, error) {
	s = strings.TrimPrefix(s, "whsec_")
	key, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		// err would quote the offending byte offset only, but say less anyway.
		return nil, errors.New("not base64 after the optional whsec_ prefix")
	}
	if len(key) == 0 {
		return nil, errors.New("empty key after the whsec_ prefix")
	}
	return key, nil
}

// rawKeys keys one MAC per secret with the secret's bytes.
func rawKeys(newHash func() hash.Hash, secrets []string) []*macKey {
	keys := make([]*macKey, len(secrets))
	for i, s := range secrets {
		keys[i] = newMACKey(i, newHash, []byte(s))
	}
	return keys
}

// ValidHeaderName reports whether name is a valid HTTP header name, an
// RFC 9110 token. The verifier's configured header names are checked with
// it, and so are the headers a caller forwards.
func ValidHeaderName(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return name != ""
}
