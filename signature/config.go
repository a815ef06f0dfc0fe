package signature

import (
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

// Config selects a scheme and its keys. The zero value of every field but
// Scheme and the keys is a sound default.
type Config struct {
	// Scheme is one of Schemes(): a scheme with code of its own (github,
	// stripe, standard, slack, shopify, gitlab, discord, sendgrid, telnyx),
	// hmac (the signed-content engine configured by hand) or a preset over
	// the engine (paddle, linear, lemonsqueezy, …). Required.
	Scheme string

	// Secrets are the accepted shared secrets, tried in order; the first
	// that verifies wins and its index is Result.SecretIndex. Several
	// secrets let an endpoint rotate without downtime; each secret tried
	// before the one that matches costs one MAC of the body, so list the
	// current one first. For stripe the secret is used as given, "whsec_"
	// included; for standard see SecretMode; for gitlab it is the token.
	// Required, none empty, for the schemes that sign with a secret;
	// refused by those that sign with a private key.
	Secrets []string

	// PublicKeys are the accepted public keys of the schemes that sign
	// with a private key, tried in order like Secrets: ed25519 keys in hex
	// (discord), base64 (telnyx) or "whpk_" + base64 (standard v1a), and
	// ECDSA P-256 keys as base64 DER or PEM (sendgrid). Required for those
	// schemes; standard takes Secrets, PublicKeys or both.
	PublicKeys []string

	// SecretMode applies to the standard scheme and its senders only:
	// base64, raw or both. Default: base64 (polar: both).
	SecretMode SecretMode

	// Tolerance is how far a signed timestamp may be from Now, in the past
	// or the future; negative is an error. Schemes without a timestamp
	// ignore it. Default: 5m (DefaultTolerance).
	Tolerance time.Duration

	// IgnoreTimestamp turns the tolerance check off: an explicit choice, for
	// replaying stored deliveries. The timestamp is still part of the signed
	// content and must be present and well formed. Must not be combined with
	// a Tolerance. Default: false.
	IgnoreTimestamp bool

	// Now is the clock for the tolerance check. Default: time.Now.
	Now func() time.Time

	// DeliveryIDHeader names a request header, or DeliveryIDField a field
	// of the JSON body (a string or a number; a nested field is a path of
	// member names joined with dots, as in "event.id"), that overrides the
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

	// OrderingKeyHeader or OrderingKeyField names where Result.OrderingKey
	// is read from, the same way as the delivery id's override (a field
	// path may be nested). Set at most one. Default: none, no key.
	OrderingKeyHeader string
	OrderingKeyField  string

	// VerifyToken is the token a sender's GET handshake must carry, for
	// the schemes whose handshake checks one apart from the signing keys
	// (meta: hub.verify_token, chosen in the App Dashboard). It is a
	// secret: compared in constant time, never in an error. Without it
	// every such handshake is refused. Other schemes refuse it.
	// Default: none.
	VerifyToken string

	// The fields below configure the signed-content engine: the hmac
	// scheme and the presets over it. A preset sets its provider's values;
	// a field set here overrides the preset's. Other schemes refuse them.

	// SignatureHeader names the header that carries the MAC. Required for
	// hmac; a preset's default otherwise.
	SignatureHeader string

	// SignatureSyntax is how SignatureHeader lists its MACs: plain (one
	// MAC, after SignaturePrefix), list (several, separated by commas or
	// spaces, each after SignaturePrefix; others are skipped) or pairs
	// (key=value items separated by ',' or ';', as in
	// "t=1700000000,v1=<mac>": the MACs are the values of SignatureKey,
	// the timestamp may be the value of TimestampKey). Default: plain.
	SignatureSyntax string

	// SignatureKey is the key of the MACs in a pairs header, e.g. v1 or
	// h1; every item with it is tried. Required with pairs.
	SignatureKey string

	// SignaturePrefix, when set, must precede each encoded MAC, as in
	// "sha256=". Default: none.
	SignaturePrefix string

	// Algorithm is sha256, sha1 or sha512. Default: sha256.
	Algorithm string

	// Encoding of each MAC: hex (either case), base64 or base64url (padded
	// or not). Default: hex.
	Encoding string

	// SignedContent is what the MAC covers: a template of literal text and
	// {body}, {timestamp}, {id} (the delivery id header, which must then
	// be set), {url} (the public URL, see PublicURL), {method} and
	// {header.<Name>} (a request header's value, empty when absent);
	// Caddy's {http.request.method} and {http.request.header.<Name>} are
	// accepted too, as the Caddyfile adapter writes them. "{{" and "}}"
	// stand for literal braces, \n, \r, \t and \\ for a line feed, a
	// carriage return, a tab and a backslash. Example: "{timestamp}.{body}".
	// Default: {body}.
	SignedContent string

	// TimestampHeader names the header that carries the signed timestamp,
	// or TimestampKey its key in a pairs SignatureHeader (e.g. t or ts).
	// Set at most one; {timestamp} needs one. When set, the timestamp must
	// be present and within Tolerance. Default: no timestamp.
	TimestampHeader string
	TimestampKey    string

	// TimestampField names a field of the JSON body (a path as in
	// DeliveryIDField) that holds the sender's timestamp, as Linear's
	// webhookTimestamp: a number, or a string in TimestampFormat. It is
	// covered by the body's MAC and read only after it verified, and
	// only while the tolerance check is on; a verified request without it
	// is ErrTimestamp. Exclusive with TimestampHeader and TimestampKey, and
	// not available to {timestamp}. Default: none.
	TimestampField string

	// TimestampFormat is unix (seconds) or unix_ms (milliseconds), written
	// in canonical decimal, or rfc3339 (as in 2021-03-25T05:09:27Z, with
	// any offset and fractional seconds), signed as sent. Default: unix.
	TimestampFormat string

	// PublicURL is the URL the sender signed, for {url}, when a proxy in
	// front changes what the request shows (scheme, host or path).
	// Default: Request.URL, the URL rebuilt from the request.
	PublicURL string
}

// New validates cfg and returns the Verifier for its scheme. Errors name the
// offending field and never contain a secret. The Verifier of a scheme with
// a handshake implements Handshaker too.
func New(cfg Config) (Verifier, error) {
	s, err := lookup(cfg.Scheme)
	if err != nil {
		return nil, fmt.Errorf("signature: %w", err)
	}
	if s.preset != nil {
		cfg = s.preset.apply(cfg)
	}
	if err := cfg.validate(s); err != nil {
		return nil, fmt.Errorf("signature: %w", err)
	}
	b := base{now: cfg.Now, tolerance: cfg.Tolerance, verifyToken: cfg.VerifyToken}
	if b.now == nil {
		b.now = time.Now
	}
	if b.tolerance == 0 {
		b.tolerance = DefaultTolerance
	}
	if cfg.IgnoreTimestamp {
		b.tolerance = 0
	}
	if s.Keys == KeySecrets {
		b.keys = rawKeys(sha256.New, cfg.Secrets)
	}
	b.meta = newMeta(cfg, s.id, s.typ)
	v, err := s.build(cfg, b)
	if err != nil {
		return nil, fmt.Errorf("signature: %w", err)
	}
	if s.handshake != nil {
		v = &withHandshake{Verifier: v, handshake: s.handshake, unsigned: s.unsignedHandshake}
	}
	return v, nil
}

// engineFields are the Config fields only the signed-content engine reads.
func (cfg *Config) engineFields() []struct{ name, value string } {
	return []struct{ name, value string }{
		{"SignatureHeader", cfg.SignatureHeader},
		{"SignatureSyntax", cfg.SignatureSyntax},
		{"SignatureKey", cfg.SignatureKey},
		{"SignaturePrefix", cfg.SignaturePrefix},
		{"Algorithm", cfg.Algorithm},
		{"Encoding", cfg.Encoding},
		{"SignedContent", cfg.SignedContent},
		{"TimestampHeader", cfg.TimestampHeader},
		{"TimestampKey", cfg.TimestampKey},
		{"TimestampFormat", cfg.TimestampFormat},
		{"TimestampField", cfg.TimestampField},
	}
}

// validate checks what every scheme shares; the scheme's build checks the
// rest.
func (cfg *Config) validate(s *scheme) error {
	if err := checkKeys("Secrets", cfg.Secrets); err != nil {
		return err
	}
	if err := checkKeys("PublicKeys", cfg.PublicKeys); err != nil {
		return err
	}
	switch s.Keys {
	case KeySecrets:
		if len(cfg.Secrets) == 0 {
			return errors.New("Secrets: at least one secret is required")
		}
		if len(cfg.PublicKeys) > 0 {
			return fmt.Errorf("PublicKeys: the %s scheme signs with a shared secret (set Secrets)", s.Name)
		}
	case KeyPublic:
		if len(cfg.PublicKeys) == 0 {
			return errors.New("PublicKeys: at least one public key is required")
		}
		if len(cfg.Secrets) > 0 {
			return fmt.Errorf("Secrets: the %s scheme signs with a private key (set PublicKeys)", s.Name)
		}
	case KeyEither:
		if len(cfg.Secrets) == 0 && len(cfg.PublicKeys) == 0 {
			return errors.New("Secrets: at least one secret or public key (PublicKeys) is required")
		}
	}
	switch cfg.SecretMode {
	case "", SecretBase64, SecretRaw, SecretBoth:
	default:
		return fmt.Errorf("SecretMode %q unknown (want base64, raw or both)", cfg.SecretMode)
	}
	if cfg.SecretMode != "" && s.secretMode == "" {
		return fmt.Errorf("SecretMode applies only to the %s scheme and its senders (svix, polar, …)", SchemeStandard)
	}
	if cfg.VerifyToken != "" && !s.verifyToken {
		return fmt.Errorf("VerifyToken: the %s scheme has no handshake that checks one", s.Name)
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
	if cfg.OrderingKeyHeader != "" && cfg.OrderingKeyField != "" {
		return errors.New("OrderingKeyHeader and OrderingKeyField are mutually exclusive")
	}
	for _, h := range []struct{ name, value string }{
		{"DeliveryIDHeader", cfg.DeliveryIDHeader},
		{"EventTypeHeader", cfg.EventTypeHeader},
		{"OrderingKeyHeader", cfg.OrderingKeyHeader},
		{"SignatureHeader", cfg.SignatureHeader},
		{"TimestampHeader", cfg.TimestampHeader},
	} {
		if h.value != "" && !ValidHeaderName(h.value) {
			return fmt.Errorf("%s %q is not a valid header name", h.name, h.value)
		}
	}
	if cfg.PublicURL != "" && s.preset == nil && !s.signsURL {
		return fmt.Errorf("PublicURL: the %s scheme does not sign the URL", s.Name)
	}
	if s.preset == nil {
		for _, f := range cfg.engineFields() {
			if f.value != "" {
				return fmt.Errorf("%s applies only to the %s scheme and its presets", f.name, SchemeHMAC)
			}
		}
	}
	return nil
}

// checkKeys refuses empty entries.
func checkKeys(field string, keys []string) error {
	for i, k := range keys {
		if k == "" {
			return fmt.Errorf("%s[%d]: empty", field, i)
		}
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
	encBase64URL
)

// encodingFor maps an Encoding name; empty means hex.
func encodingFor(name string) (encoding, error) {
	switch name {
	case "", "hex":
		return encHex, nil
	case "base64":
		return encBase64, nil
	case "base64url":
		return encBase64URL, nil
	}
	return 0, fmt.Errorf("Encoding %q unknown (want hex, base64 or base64url)", name)
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
