package signature

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
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
// delivery id it would give it (opts.ID when set, else the one in the
// scheme's delivery-id header of opts.Header, else a new one), the headers
// it always sends, and its Content-Type. It returns the body to send,
// which differs from body when the id or the credential travels inside
// it, and the headers: those of opts.Header, the signature's, and the
// sender's own where opts.Header lacks them, so that the headers of a
// sample (signature/samples), whose ids agree with its body, are kept
// as they are. It is for people and tests that try a receiver as the
// provider would call it.
func SignAsSender(scheme, key string, body []byte, opts SignOptions) ([]byte, http.Header, error) {
	s, ok := registry[scheme]
	if !ok {
		return nil, nil, fmt.Errorf("sign: scheme %q unknown", scheme)
	}
	if opts.ID == "" {
		if opts.ID = s.headerID(opts.Header); opts.ID == "" {
			opts.ID, body = s.sender.id(body)
		}
	}
	return s.signAs(key, body, opts, true)
}

// signAs signs body with key and opts as it is and adds what the
// scheme's sender sends besides: SignAsSender and Resign. newIDs says
// whether the sender's headers may add a delivery id the receiver reads
// (Shopify's webhook id): a new delivery's, not a stored one's, which
// keeps the ids it came with.
func (s *scheme) signAs(key string, body []byte, opts SignOptions, newIDs bool) ([]byte, http.Header, error) {
	signed, sig, err := SignBody(s.Name, key, body, opts)
	if err != nil {
		return nil, nil, err
	}
	h := opts.Header.Clone()
	if h == nil {
		h = make(http.Header, len(sig)+2)
	}
	// The signature's headers, and the id and type Sign wrote from opts,
	// go over the caller's.
	for name, values := range sig {
		h[name] = values
	}
	if s.sender.Headers != nil {
		for name, values := range s.sender.Headers(opts) {
			if h.Get(name) == "" && (newIDs || !s.readsID(name)) {
				h[http.CanonicalHeaderKey(name)] = values
			}
		}
	}
	if s.sender.FormUnlessJSON && !json.Valid(signed) && opts.Header.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/json")
	}
	return signed, h, nil
}

// readsID reports whether the receiver may read the scheme's delivery id
// from the header name.
func (s *scheme) readsID(name string) bool {
	for _, src := range s.id {
		if src.kind == fromHeader && strings.EqualFold(src.name, name) {
			return true
		}
	}
	return false
}

// headerID returns the delivery id h carries in the header Sign writes
// the scheme's id to (its first id source, when that is a header), or
// "".
func (s *scheme) headerID(h http.Header) string {
	if len(s.id) == 0 || s.id[0].kind != fromHeader {
		return ""
	}
	return h.Get(s.id[0].name)
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
