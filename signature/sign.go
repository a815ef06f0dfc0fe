package signature

import (
	"crypto/hmac"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"time"
)

// SignOptions are the parts of a signed request that are not the key or
// the body. Fields a scheme does not use are ignored.
type SignOptions struct {
	// ID is the delivery id: webhook-id (standard; a random "msg_…" id when
	// empty), X-GitHub-Delivery (github), X-Shopify-Event-Id (shopify),
	// X-Gitlab-Event-UUID (gitlab), a preset's id header. The header is
	// left out when empty.
	ID string

	// EventType fills X-GitHub-Event, X-Shopify-Topic, X-Gitlab-Event or
	// a preset's event-type header.
	EventType string

	// Timestamp is the signing time of the schemes that sign one.
	// Default: time.Now().
	Timestamp time.Time

	// SecretMode says how a standard secret becomes the key: base64 (the
	// default) or raw. Both is not a way to sign.
	SecretMode SecretMode

	// Svix names the standard headers svix-id, svix-timestamp and
	// svix-signature instead of webhook-*.
	Svix bool

	// Method and URL are the request's, for a signed {method} or {url}.
	// Default: POST and none.
	Method string
	URL    string

	// Header holds further request headers, for a signed {header.<Name>};
	// they are copied into the result.
	Header http.Header

	// The engine fields, as in Config, for hmac and the presets; a field
	// set here overrides the preset's.
	SignatureHeader string
	SignatureSyntax string
	SignatureKey    string
	SignaturePrefix string
	Algorithm       string
	Encoding        string
	SignedContent   string
	TimestampHeader string
	TimestampKey    string
	TimestampFormat string

	// DeliveryIDHeader names the header of a signed {id}, as in Config.
	DeliveryIDHeader string
}

// engineConfig is the Config of the engine fields of opts.
func (opts *SignOptions) engineConfig() Config {
	return Config{
		SignatureHeader: opts.SignatureHeader, SignatureSyntax: opts.SignatureSyntax,
		SignatureKey: opts.SignatureKey, SignaturePrefix: opts.SignaturePrefix,
		Algorithm: opts.Algorithm, Encoding: opts.Encoding, SignedContent: opts.SignedContent,
		TimestampHeader: opts.TimestampHeader, TimestampKey: opts.TimestampKey,
		TimestampFormat: opts.TimestampFormat, DeliveryIDHeader: opts.DeliveryIDHeader,
	}
}

// Sign returns the headers a sender of scheme would send with body, signed
// with key: the shared secret, or for the schemes that sign with a private
// key the private key (ed25519 as hex, base64 or "whsk_" + base64 of the
// seed or the whole key; ECDSA as base64 DER or PEM, PKCS #8 or SEC 1). It
// is for tests, documentation and load generation: a Verifier built with
// the same secret, or the matching public key, accepts the result.
func Sign(scheme, key string, body []byte, opts SignOptions) (http.Header, error) {
	if key == "" {
		return nil, errors.New("sign: key is empty")
	}
	s, ok := registry[scheme]
	if !ok {
		return nil, fmt.Errorf("sign: scheme %q unknown", scheme)
	}
	if s.signBody != nil {
		return nil, fmt.Errorf("sign: the %s scheme carries its credential inside the body: use SignBody", scheme)
	}
	h, err := s.sign(key, body, opts)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	return h, nil
}

// SignBody is Sign for every scheme, those whose credential travels inside
// the body included (mailgun's signature object, msgraph's clientState):
// it returns the body to send, which for those schemes is body with the
// credential set in it and for the others body itself, and the headers.
func SignBody(scheme, key string, body []byte, opts SignOptions) ([]byte, http.Header, error) {
	s, ok := registry[scheme]
	if !ok || s.signBody == nil {
		h, err := Sign(scheme, key, body, opts)
		return body, h, err
	}
	if key == "" {
		return nil, nil, errors.New("sign: key is empty")
	}
	out, err := s.signBody(key, body, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("sign: %w", err)
	}
	return out, http.Header{"Content-Type": {"application/json"}}, nil
}

// errUseSignBody is the sign of the schemes that set signBody; Sign
// answers for them before calling it.
func errUseSignBody(string, []byte, SignOptions) (http.Header, error) {
	return nil, errors.New("the credential travels inside the body: use SignBody")
}

// jsonObject decodes body, a JSON object, into its members, for the
// signBody functions.
func jsonObject(body []byte) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return nil, errors.New("body is not a JSON object")
	}
	return m, nil
}

// unixString is the signing time of opts in unix seconds.
func (opts *SignOptions) unixString() string {
	ts := opts.Timestamp
	if ts.IsZero() {
		ts = time.Now()
	}
	return strconv.FormatInt(ts.Unix(), 10)
}

// setNonEmpty sets name to value unless value is empty.
func setNonEmpty(h http.Header, name, value string) {
	if value != "" {
		h.Set(name, value)
	}
}

// signingKey is the standard scheme's key for opts.SecretMode.
func signingKey(secret string, mode SecretMode) ([]byte, error) {
	switch mode {
	case "", SecretBase64:
		return decodeStandardSecret(secret)
	case SecretRaw:
		return []byte(secret), nil
	}
	return nil, fmt.Errorf("SecretMode %q cannot sign (want base64 or raw)", mode)
}

func computeMAC(newHash func() hash.Hash, key, body []byte, head ...string) []byte {
	m := hmac.New(newHash, key)
	for _, part := range head {
		m.Write([]byte(part))
	}
	m.Write(body)
	return m.Sum(nil)
}

func hexMAC(newHash func() hash.Hash, key, body []byte, head ...string) string {
	return hex.EncodeToString(computeMAC(newHash, key, body, head...))
}
