package caddywebhook

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/caddywebhook/caddywebhook/caddywebhook/rules"
	"github.com/caddywebhook/caddywebhook/queue"
)

// maxEventText bounds a delivery id and an event type, in bytes: far above
// any provider's (UUIDs, "customer.subscription.updated"), and small enough
// for PostgreSQL's unique index on (source, delivery_id), whose entries
// must stay under 2704 bytes.
const maxEventText = 1024

// validEventText reports whether s may be stored as a delivery id or an
// event type by every backend: valid UTF-8 (PostgreSQL's text refuses
// anything else), no control character (NUL is refused by PostgreSQL too;
// the others have no business in an identifier and would reach terminals
// and headers), at most maxEventText bytes. Empty is valid: no event type,
// and a delivery id is never empty.
func validEventText(s string) bool {
	if len(s) > maxEventText {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c == 0x7f || c >= utf8.RuneSelf {
			return utf8.ValidString(s[i:]) && !strings.ContainsFunc(s[i:], unicode.IsControl)
		}
	}
	return true
}

// orderingKey returns the key an event is ordered by: k itself, or, when
// k is longer than queue.MaxOrderingKeyLen or not text that every backend
// stores (see validEventText), "sha256:" and its hex SHA-256, which keeps
// equal keys equal.
func orderingKey(k string) string {
	if len(k) <= queue.MaxOrderingKeyLen && validEventText(k) {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// headers appends to out the forwarded headers present in h; nil if none.
func (rc *Receiver) headers(out []queue.Header, h http.Header) []queue.Header {
	for _, f := range rc.forward {
		if v := h[f.canon]; len(v) > 0 && v[0] != "" {
			out = append(out, queue.Header{Name: f.name, Value: v[0]})
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// targetsFor returns the names of the targets that take the event: its
// type in their events, and their filter true. The unfiltered list is
// shared between requests; the store only reads it. The rules' variables
// are made only when a target has a filter.
func (rc *Receiver) targetsFor(r *http.Request, eventType, deliveryID string, body []byte) []string {
	if rc.filters == nil {
		return rc.allTargets
	}
	return rc.takers(eventType, func() *rules.Event {
		return &rules.Event{
			Body: body, Header: r.Header, RawQuery: r.URL.RawQuery,
			EventType: eventType, Source: rc.Source, DeliveryID: deliveryID,
		}
	})
}

// targetsForEvent is targetsFor for an event already described.
func (rc *Receiver) targetsForEvent(ev *rules.Event) []string {
	if rc.filters == nil {
		return rc.allTargets
	}
	return rc.takers(ev.EventType, func() *rules.Event { return ev })
}

// takers runs the targets' filters. The rules' variables are made on the
// first filter that needs them, from event, and share one parse of the
// body.
func (rc *Receiver) takers(eventType string, event func() *rules.Event) []string {
	var in *rules.Input
	input := func() *rules.Input {
		if in == nil {
			in = rules.NewInput(event())
		}
		return in
	}
	var out []string
	for _, f := range rc.filters {
		ok, err := f.takes(eventType, input)
		if err != nil {
			rc.filterFailed(f.name, err)
			continue
		}
		if ok {
			out = append(out, f.name)
		}
	}
	return out
}

// wants reports whether the filter accepts eventType.
func (f targetFilter) wants(eventType string) bool {
	// An empty list is no list, as the JSON's omitempty and the
	// receiver's own "is any target filtered" read it: every event.
	if len(f.events) == 0 {
		return true
	}
	for _, e := range f.events {
		if p, ok := strings.CutSuffix(e, "*"); ok {
			if strings.HasPrefix(eventType, p) {
				return true
			}
		} else if e == eventType {
			return true
		}
	}
	return false
}
