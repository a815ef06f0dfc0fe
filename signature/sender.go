package signature

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
)

// Sender describes what a scheme's sender sends besides its signature: how
// it names each delivery and the headers it always adds. Each scheme
// declares it where it registers, so SignAsSender, and with it `caddy
// webhook sign`, sends what the provider sends for every scheme, a new one
// included.
type Sender struct {
	// ID is how the sender names a delivery when SignOptions.ID is empty.
	// A scheme whose delivery id is read from a header must say: register
	// refuses SenderIDNone for it.
	ID SenderID
	// Headers, when set, returns the headers the sender always sends for
	// a delivery signed with opts (Shopify's shop domain, API version and
	// webhook id), each set unless the signature's headers hold it.
	Headers func(opts SignOptions) http.Header
	// FormUnlessJSON is true for a sender that posts its parameters as a
	// form (application/x-www-form-urlencoded) and JSON as JSON: Twilio,
	// Slack's slash commands and interactivity requests beside its
	// Events API.
	FormUnlessJSON bool
}

// SenderID says how a sender names each delivery.
type SenderID uint8

const (
	// SenderIDNone: the scheme names none, or its id is the body's own
	// (a field), or Sign makes it (Standard Webhooks' "msg_…").
	SenderIDNone SenderID = iota
	// SenderIDUUID: a random UUID in the delivery-id header (GitHub's
	// X-GitHub-Delivery, GitLab's X-Gitlab-Event-UUID).
	SenderIDUUID
	// SenderIDRandom: a random id in the delivery-id header, where the
	// provider's own format is not one the receiver relies on: it reads
	// the header as an opaque id.
	SenderIDRandom
	// SenderIDStripeEvent: the body's "id", "evt_…", set in a JSON object
	// that has none, so the event is deduplicated as Stripe's are, not on
	// a hash of its body.
	SenderIDStripeEvent
)

// SignAsSender signs body as the scheme's sender sends it: with the
// delivery id it would give it (opts.ID when set), the headers it always
// sends, and its Content-Type. It returns the body to send, which differs
// from body when the id or the credential travels inside it, and the
// headers. It is for people and tests that try a receiver as the provider
// would call it.
func SignAsSender(scheme, key string, body []byte, opts SignOptions) ([]byte, http.Header, error) {
	s, ok := registry[scheme]
	if !ok {
		return nil, nil, fmt.Errorf("sign: scheme %q unknown", scheme)
	}
	if opts.ID == "" {
		opts.ID, body = s.sender.id(body)
	}
	signed, h, err := SignBody(scheme, key, body, opts)
	if err != nil {
		return nil, nil, err
	}
	if s.sender.Headers != nil {
		for name, values := range s.sender.Headers(opts) {
			if h.Get(name) == "" {
				h[http.CanonicalHeaderKey(name)] = values
			}
		}
	}
	if s.sender.FormUnlessJSON && !json.Valid(signed) {
		h.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/json")
	}
	return signed, h, nil
}

// id returns the delivery id the sender would give body, and the body to
// send.
func (s Sender) id(body []byte) (string, []byte) {
	switch s.ID {
	case SenderIDUUID:
		return newUUID(), body
	case SenderIDRandom:
		return rand.Text(), body
	case SenderIDStripeEvent:
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &m) != nil || m == nil || m["id"] != nil {
			return "", body
		}
		id, _ := json.Marshal("evt_" + rand.Text())
		m["id"] = id
		if b, err := json.Marshal(m); err == nil {
			return "", b
		}
	}
	return "", body
}

// newUUID is a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics rather)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
