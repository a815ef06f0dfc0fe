package signature

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"time"
)

// SignOptions are the parts of a signed request that are not the secret or
// the body. Fields a scheme does not use are ignored.
type SignOptions struct {
	// ID is the delivery id: webhook-id (standard; a random "msg_…" id when
	// empty), X-GitHub-Delivery (github), X-Shopify-Event-Id (shopify),
	// X-Gitlab-Event-UUID (gitlab). The header is left out when empty.
	ID string

	// EventType fills X-GitHub-Event, X-Shopify-Topic or X-Gitlab-Event.
	EventType string

	// Timestamp is the signing time for stripe, standard and slack.
	// Default: time.Now().
	Timestamp time.Time

	// SecretMode says how a standard secret becomes the key: base64 (the
	// default) or raw. Both is not a way to sign.
	SecretMode SecretMode

	// Svix names the standard headers svix-id, svix-timestamp and
	// svix-signature instead of webhook-*.
	Svix bool

	// SignatureHeader, Algorithm, Encoding and SignaturePrefix configure the
	// hmac scheme, as in Config.
	SignatureHeader string
	Algorithm       string
	Encoding        string
	SignaturePrefix string
}

// Sign returns the headers a sender of scheme would send with body, signed
// with secret. It is for tests, documentation and load generation: a
// Verifier built with the same secret accepts the result.
func Sign(scheme, secret string, body []byte, opts SignOptions) (http.Header, error) {
	if secret == "" {
		return nil, errors.New("sign: secret is empty")
	}
	ts := opts.Timestamp
	if ts.IsZero() {
		ts = time.Now()
	}
	unix := strconv.FormatInt(ts.Unix(), 10)
	h := http.Header{}
	set := func(name, value string) {
		if value != "" {
			h.Set(name, value)
		}
	}
	switch scheme {
	case SchemeGitHub:
		h.Set(headerGitHubSignature, githubPrefix+hexMAC(sha256.New, []byte(secret), body))
		set(headerGitHubDelivery, opts.ID)
		set(headerGitHubEvent, opts.EventType)
	case SchemeStripe:
		h.Set(headerStripe, "t="+unix+",v1="+hexMAC(sha256.New, []byte(secret), body, unix, "."))
	case SchemeStandard:
		key, err := signingKey(secret, opts.SecretMode)
		if err != nil {
			return nil, fmt.Errorf("sign: %w", err)
		}
		id := opts.ID
		if id == "" {
			id = "msg_" + rand.Text()
		}
		mac := computeMAC(sha256.New, key, body, id, ".", unix, ".")
		names := [3]string{headerStandardID, headerStandardTimestamp, headerStandardSignature}
		if opts.Svix {
			names = [3]string{headerSvixID, headerSvixTimestamp, headerSvixSignature}
		}
		h.Set(names[0], id)
		h.Set(names[1], unix)
		h.Set(names[2], "v1,"+base64.StdEncoding.EncodeToString(mac))
	case SchemeSlack:
		h.Set(headerSlackTimestamp, unix)
		h.Set(headerSlackSignature, "v0="+hexMAC(sha256.New, []byte(secret), body, "v0:", unix, ":"))
	case SchemeShopify:
		h.Set(headerShopifySignature, base64.StdEncoding.EncodeToString(computeMAC(sha256.New, []byte(secret), body)))
		set(headerShopifyEventID, opts.ID)
		set(headerShopifyTopic, opts.EventType)
	case SchemeGitLab:
		h.Set(headerGitLabToken, secret)
		set(headerGitLabUUID, opts.ID)
		set(headerGitLabEvent, opts.EventType)
	case SchemeHMAC:
		cfg := Config{
			Scheme: SchemeHMAC, Secrets: []string{secret},
			SignatureHeader: opts.SignatureHeader, Algorithm: opts.Algorithm,
			Encoding: opts.Encoding, SignaturePrefix: opts.SignaturePrefix,
		}
		if err := cfg.validate(); err != nil {
			return nil, fmt.Errorf("sign: %w", err)
		}
		newHash, _ := hashFor(opts.Algorithm)
		enc, _ := encodingFor(opts.Encoding)
		mac := computeMAC(newHash, []byte(secret), body)
		encoded := hex.EncodeToString(mac)
		if enc == encBase64 {
			encoded = base64.StdEncoding.EncodeToString(mac)
		}
		h.Set(opts.SignatureHeader, opts.SignaturePrefix+encoded)
	default:
		return nil, fmt.Errorf("sign: scheme %q unknown", scheme)
	}
	return h, nil
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
