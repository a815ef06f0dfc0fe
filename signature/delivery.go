package signature

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
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
	// with, for a header source, names a second header whose value
	// qualifies the first: the id is "<name's value>:<with's value>", or
	// name's value alone when with is absent
	// (Shopify's event id, shared by the deliveries of every topic one
	// merchant action causes, qualified by the topic).
	with string
}

// header canonicalizes name once here, so Get on the hot path does not.
func header(name string) source {
	return source{kind: fromHeader, name: http.CanonicalHeaderKey(name)}
}

// headerWith is header(name) qualified by the header with (source.with).
func headerWith(name, with string) source {
	return source{kind: fromHeader, name: http.CanonicalHeaderKey(name), with: http.CanonicalHeaderKey(with)}
}
func field(name string) source { return source{kind: fromField, name: name} }
func signedID() source         { return source{kind: fromSigned} }

// maxFields bounds the top-level JSON fields one verifier reads: an id and
// an event type, each from an override and from the scheme, a timestamp
// and an ordering key.
const maxFields = 6

// meta resolves the delivery id and event type of a verified request: each
// is the first present value of its chain, the configured override first.
// A field source's name may be a path, members joined with dots
// ("event.id").
type meta struct {
	id, typ []source
	key     []source // the ordering key's source; none when not configured
	fields  []string // distinct top-level JSON members the chains and the timestamp read
}

func newMeta(cfg Config, id, typ []source) meta {
	var m meta
	m.id = chain(cfg.DeliveryIDHeader, cfg.DeliveryIDField, id)
	m.typ = chain(cfg.EventTypeHeader, cfg.EventTypeField, typ)
	m.key = chain(cfg.OrderingKeyHeader, cfg.OrderingKeyField, nil)
	for _, s := range append(append(append([]source(nil), m.id...), m.typ...), m.key...) {
		if s.kind == fromField {
			m.addField(s.name)
		}
	}
	if cfg.TimestampField != "" {
		m.addField(cfg.TimestampField)
	}
	return m
}

// addField notes the top-level member of path.
func (m *meta) addField(path string) {
	top, _, _ := strings.Cut(path, ".")
	if m.fieldIndex(top) < 0 {
		m.fields = append(m.fields, top)
	}
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

// jsonValues are the body's top-level members, looked up once and only
// when something asks for one.
type jsonValues struct {
	done bool
	raws [maxFields][]byte
}

// field returns the raw JSON value at path in body, nil when absent. path's
// top-level member must be one of m.fields.
func (m *meta) field(path string, body []byte, js *jsonValues) []byte {
	if !js.done {
		js.done = true
		lookupJSONRaw(body, m.fields, js.raws[:len(m.fields)])
	}
	top, rest, nested := strings.Cut(path, ".")
	raw := js.raws[m.fieldIndex(top)]
	if nested {
		raw = jsonAt(raw, rest)
	}
	return raw
}

// result builds the Result of a request whose signature verified with the
// secret at index. signed is the id the scheme signed, if any.
func (m *meta) result(index int, h http.Header, body []byte, signed string) Result {
	var js jsonValues
	return m.resultWith(index, h, body, signed, &js)
}

// resultWith is result with the body's members already looked up in js.
func (m *meta) resultWith(index int, h http.Header, body []byte, signed string, js *jsonValues) Result {
	r := Result{
		SecretIndex: index,
		DeliveryID:  m.resolve(m.id, h, body, signed, js),
		EventType:   m.resolve(m.typ, h, body, signed, js),
	}
	if m.key != nil {
		r.OrderingKey = m.resolve(m.key, h, body, signed, js)
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
			if w := h.Get(s.with); v != "" && w != "" {
				v += ":" + w
			}
		case fromSigned:
			v = signed
		case fromField:
			v, _ = jsonScalar(m.field(s.name, body, js))
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
