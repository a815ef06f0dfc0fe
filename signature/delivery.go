package signature

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
)

// sourceKind says where a delivery id or event type is read from.
type sourceKind uint8

const (
	fromHeader sourceKind = iota + 1
	fromField             // top-level field of the JSON body
	fromSigned            // the id the scheme signed (Standard Webhooks)
)

type source struct {
	kind sourceKind
	name string // header or field name
}

// header canonicalizes name once here, so Get on the hot path does not.
func header(name string) source {
	return source{kind: fromHeader, name: http.CanonicalHeaderKey(name)}
}
func field(name string) source { return source{kind: fromField, name: name} }
func signedID() source         { return source{kind: fromSigned} }

// maxFields bounds the JSON fields one verifier reads: an id and an event
// type, each from an override and from the scheme.
const maxFields = 4

// meta resolves the delivery id and event type of a verified request: each
// is the first present value of its chain, the configured override first.
type meta struct {
	id, typ []source
	fields  []string // distinct JSON field names the chains read
}

func newMeta(cfg Config, id, typ []source) meta {
	var m meta
	m.id = chain(cfg.DeliveryIDHeader, cfg.DeliveryIDField, id)
	m.typ = chain(cfg.EventTypeHeader, cfg.EventTypeField, typ)
	for _, s := range append(append([]source(nil), m.id...), m.typ...) {
		if s.kind == fromField && m.fieldIndex(s.name) < 0 {
			m.fields = append(m.fields, s.name)
		}
	}
	return m
}

func chain(overrideHeader, overrideField string, defaults []source) []source {
	var c []source
	switch {
	case overrideHeader != "":
		c = append(c, header(overrideHeader))
	case overrideField != "":
		c = append(c, field(overrideField))
	}
	return append(c, defaults...)
}

func (m *meta) fieldIndex(name string) int {
	for i, f := range m.fields {
		if f == name {
			return i
		}
	}
	return -1
}

// jsonValues are the body's fields, looked up once and only when a chain
// gets that far.
type jsonValues struct {
	done  bool
	vals  [maxFields]string
	found [maxFields]bool
}

// result builds the Result of a request whose signature verified with the
// secret at index. signed is the id the scheme signed, if any.
func (m *meta) result(index int, h http.Header, body []byte, signed string) Result {
	var js jsonValues
	r := Result{
		SecretIndex: index,
		DeliveryID:  m.resolve(m.id, h, body, signed, &js),
		EventType:   m.resolve(m.typ, h, body, signed, &js),
	}
	if r.DeliveryID == "" {
		r.DeliveryID = bodyID(body)
	}
	return r
}

func (m *meta) resolve(c []source, h http.Header, body []byte, signed string, js *jsonValues) string {
	for _, s := range c {
		var v string
		switch s.kind {
		case fromHeader:
			v = h.Get(s.name)
		case fromSigned:
			v = signed
		case fromField:
			if !js.done {
				js.done = true
				lookupJSON(body, m.fields, js.vals[:len(m.fields)], js.found[:len(m.fields)])
			}
			v = js.vals[m.fieldIndex(s.name)]
		}
		if v != "" {
			// Returned whatever its length or bytes: the caller decides
			// what it stores, and refusing a value it cannot keep beats
			// falling back to the next source without a word.
			return v
		}
	}
	return ""
}

// bodyID is the delivery id of last resort: the body's SHA-256, so a sender
// that retries the same bytes is deduplicated.
func bodyID(body []byte) string {
	const prefix = "sha256:"
	sum := sha256.Sum256(body)
	var buf [len(prefix) + 2*sha256.Size]byte
	copy(buf[:], prefix)
	hex.Encode(buf[len(prefix):], sum[:])
	return string(buf[:])
}
