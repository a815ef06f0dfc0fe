package signature

import (
	"bytes"
	"net/url"
	"slices"
	"strings"

	"github.com/caddywebhook/caddywebhook/internal/jsonscan"
)

// RedactedMarker is what a secret-bearing body field holds in the stored
// copy of a payload, as a JSON string: "[redacted]". The store, the admin
// API, the dashboard and the targets see it instead of the secret.
const RedactedMarker = "[redacted]"

// redactedJSON is RedactedMarker as a JSON string.
var redactedJSON = []byte(`"` + RedactedMarker + `"`)

// RedactSecrets returns body with the value of every field the scheme
// declares in Scheme.SecretFields replaced by the JSON string
// RedactedMarker, the rest of the bytes as they were. A body that is not a
// JSON object is read as a form (application/x-www-form-urlencoded): its
// SecretFormFields are replaced by the marker, URL-encoded, and the JSON
// documents of its FormJSONFields have their SecretFields replaced. It
// returns body itself when the scheme declares none or the body holds
// none. Call it on a verified body, after Verify: the secret is what
// verified it.
func RedactSecrets(scheme string, body []byte) []byte {
	s, ok := registry[scheme]
	if !ok || !s.RedactsBody() {
		return body
	}
	if i := jsonscan.SkipSpace(body, 0); i < len(body) && body[i] == '{' {
		// A form may begin with '{' too ("{=x&token=…"): it is read as
		// one when it is not a JSON document.
		if out, ok := redactJSON(s, body); ok {
			return out
		}
	}
	if len(s.SecretFormFields)+len(s.FormJSONFields) == 0 {
		return body
	}
	return redactForm(s, body)
}

// redactJSON is RedactSecrets for a body that begins as a JSON object.
// ok is false when body is not one valid JSON object: then nothing in it
// is taken for a member, and body is returned as it is.
func redactJSON(s *scheme, body []byte) (out []byte, ok bool) {
	var spans [][2]int
	v := body[jsonscan.SkipSpace(body, 0):]
	if len(s.secretPaths) == 0 {
		return body, scanObject(v, func(_, _ []byte) {})
	}
	for _, path := range s.secretPaths {
		if !secretSpans(body, v, path, &spans) {
			return body, false
		}
	}
	if len(spans) == 0 {
		return body, true
	}
	slices.SortFunc(spans, func(a, b [2]int) int { return a[0] - b[0] })
	out = make([]byte, 0, len(body)+len(spans)*len(redactedJSON))
	at := 0
	for _, sp := range spans {
		if sp[0] < at {
			continue // nested in one already replaced
		}
		out = append(append(out, body[at:sp[0]]...), redactedJSON...)
		at = sp[1]
	}
	return append(out, body[at:]...), true
}

// redactedForm is RedactedMarker as a form value.
var redactedForm = []byte(url.QueryEscape(RedactedMarker))

// redactForm is RedactSecrets for a form-encoded body: name=value pairs
// joined by '&', as Slack sends them and Go's url.ParseQuery reads them
// (';' is no separator: it stays inside the value). Only the values it
// replaces change: a secret field's whole value, or a JSON field's value,
// decoded, redacted and encoded again with url.QueryEscape (so its
// decoded JSON differs only in the secrets, though its escaping may
// change). Every other pair keeps its bytes and its place. A name or value
// that does not decode is left alone: nothing reads it as that field.
func redactForm(s *scheme, body []byte) []byte {
	var out []byte // nil until a value is replaced
	at := 0        // body[:at] is in out
	for start := 0; start < len(body); {
		end := bytes.IndexByte(body[start:], '&')
		if end < 0 {
			end = len(body)
		} else {
			end += start
		}
		rawName, rawValue, hasValue := bytes.Cut(body[start:end], []byte("="))
		name, err := url.QueryUnescape(string(rawName))
		var repl []byte
		switch {
		case err != nil || !hasValue:
		case slices.Contains(s.SecretFormFields, name):
			repl = redactedForm
		case slices.Contains(s.FormJSONFields, name):
			if doc, err := url.QueryUnescape(string(rawValue)); err == nil {
				if red, ok := redactJSON(s, []byte(doc)); ok && string(red) != doc {
					repl = []byte(url.QueryEscape(string(red)))
				}
			}
		}
		if repl != nil {
			valueAt := start + len(rawName) + 1
			out = append(append(out, body[at:valueAt]...), repl...)
			at = end
		}
		start = end + 1
	}
	if out == nil {
		return body
	}
	return append(out, body[at:]...)
}

// secretSpans appends to spans the [start, end) offsets in body of the
// values at path in v, a JSON value within body: path's steps are member
// names, a step ending in "[]" descending into each element of that
// member's array. Every occurrence of a duplicated member counts, since a
// decoder keeps the last and another reader may keep the first. It
// reports whether v is a valid JSON object (scanObject); the spans of one
// that is not are not to be used.
func secretSpans(body, v []byte, path []string, spans *[][2]int) bool {
	if len(v) == 0 || v[0] != '{' {
		return false
	}
	name, each := strings.CutSuffix(path[0], "[]")
	return scanObject(v, func(key, value []byte) {
		if !jsonKeyIs(key, name) {
			return
		}
		switch {
		case each:
			scanArray(value, func(elem []byte) {
				if len(path) == 1 {
					*spans = append(*spans, spanOf(body, elem))
				} else {
					secretSpans(body, elem, path[1:], spans)
				}
			})
		case len(path) == 1:
			*spans = append(*spans, spanOf(body, value))
		default:
			secretSpans(body, value, path[1:], spans)
		}
	})
}

// spanOf is the offsets of sub, a subslice of body that scanObject
// returned, within body.
func spanOf(body, sub []byte) [2]int {
	start := cap(body) - cap(sub)
	return [2]int{start, start + len(sub)}
}

// scanArray calls visit with each element of a, a JSON array that
// scanObject already accepted as part of a valid object; anything but an
// array is passed over.
func scanArray(a []byte, visit func(elem []byte)) {
	if len(a) == 0 || a[0] != '[' {
		return
	}
	for i := 1; ; {
		i = jsonscan.SkipSpace(a, i)
		if i >= len(a) || a[i] == ']' {
			return
		}
		end := jsonscan.SkipValid(a, i)
		visit(a[i:end])
		i = jsonscan.SkipSpace(a, end)
		if i >= len(a) || a[i] != ',' {
			return
		}
		i++
	}
}
