package signature

import (
	"bytes"
	"slices"
	"strings"
)

// RedactedMarker is what a secret-bearing body field holds in the stored
// copy of a payload, as a JSON string: "[redacted]". The store, the admin
// API, the dashboard and the targets see it instead of the secret.
const RedactedMarker = "[redacted]"

// redactedJSON is RedactedMarker as a JSON string.
var redactedJSON = []byte(`"` + RedactedMarker + `"`)

// RedactSecrets returns body with the value of every field the scheme
// declares in Scheme.SecretFields replaced by the JSON string
// RedactedMarker, the rest of the bytes as they were. It returns body
// itself when the scheme declares none or the body holds none, and when
// body is not a JSON object (nothing there can be found). Call it on a
// verified body, after Verify: the secret is what verified it.
func RedactSecrets(scheme string, body []byte) []byte {
	s, ok := registry[scheme]
	if !ok || len(s.SecretFields) == 0 {
		return body
	}
	var spans [][2]int
	for _, path := range s.SecretFields {
		secretSpans(body, body, strings.Split(path, "."), &spans)
	}
	if len(spans) == 0 {
		return body
	}
	slices.SortFunc(spans, func(a, b [2]int) int { return a[0] - b[0] })
	out := make([]byte, 0, len(body)+len(spans)*len(redactedJSON))
	at := 0
	for _, sp := range spans {
		if sp[0] < at {
			continue // nested in one already replaced
		}
		out = append(append(out, body[at:sp[0]]...), redactedJSON...)
		at = sp[1]
	}
	return append(out, body[at:]...)
}

// secretSpans appends to spans the [start, end) offsets in body of the
// values at path in v, a JSON value within body: path's steps are member
// names, a step ending in "[]" descending into each element of that
// member's array. Every occurrence of a duplicated member counts, since a
// decoder keeps the last and another reader may keep the first.
func secretSpans(body, v []byte, path []string, spans *[][2]int) {
	if len(v) == 0 || v[0] != '{' {
		return
	}
	name, each := strings.CutSuffix(path[0], "[]")
	scanObject(v, func(key, value []byte) {
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
		i = skipJSONSpace(a, i)
		if i >= len(a) || a[i] == ']' {
			return
		}
		end := skipJSONValue(a, i)
		visit(a[i:end])
		i = skipJSONSpace(a, end)
		if i >= len(a) || a[i] != ',' {
			return
		}
		i++
	}
}

// skipJSONValue returns the end of the valid JSON value at b[i].
func skipJSONValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		end, _ := scanJSONString(b, i)
		return end
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i, _ = scanJSONString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b)
	}
	end := i
	for end < len(b) && bytes.IndexByte([]byte(",]} \t\r\n"), b[end]) < 0 {
		end++
	}
	return end
}
