package signature

import (
	"encoding/json"
	"strings"

	"github.com/caddywebhook/caddywebhook/internal/jsonscan"
)

// lookupJSON reads, in one pass over a JSON object, the top-level value of
// each key in keys: vals[i] is the value of keys[i] when it is a string
// (decoded) or a number (its literal), and found[i] says so. Keys match
// exactly and the last occurrence wins, as when decoding into a map. It
// reports false, with nothing found, when body is not a valid JSON object.
//
// It exists so the hot path reads a Stripe id and type without building a
// decoder or decoding the (often large) data object it skips.
func lookupJSON(body []byte, keys, vals []string, found []bool) bool {
	var raws [maxFields][]byte
	ok := lookupJSONRaw(body, keys, raws[:len(keys)])
	for i := range keys {
		vals[i], found[i] = jsonScalar(raws[i])
	}
	return ok
}

// lookupJSONRaw is lookupJSON without the decoding: raws[i] is the raw
// value of keys[i], nil when absent or when body is not a valid object.
func lookupJSONRaw(body []byte, keys []string, raws [][]byte) bool {
	clear(raws)
	ok := scanObject(body, func(key, value []byte) {
		for i, want := range keys {
			if jsonKeyIs(key, want) {
				raws[i] = value
			}
		}
	})
	if !ok {
		clear(raws)
	}
	return ok
}

// jsonScalar is the value of a raw JSON string (decoded) or number (its
// literal); anything else, nil included, is not found.
func jsonScalar(raw []byte) (string, bool) {
	if len(raw) == 0 {
		return "", false
	}
	switch raw[0] {
	case '"':
		return jsonString(raw), true
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return string(raw), true
	}
	return "", false
}

// jsonAt descends from raw, a value scanObject accepted, along path: member
// names joined with dots, as in "event.id" (an empty path is one step, to
// the member named ""). It returns nil when a step is not an object or
// lacks the member.
func jsonAt(raw []byte, path string) []byte {
	for more := true; more && raw != nil; {
		var name string
		name, path, more = strings.Cut(path, ".")
		if raw[0] != '{' {
			return nil
		}
		var next []byte
		scanObject(raw, func(key, value []byte) {
			if jsonKeyIs(key, name) {
				next = value
			}
		})
		raw = next
	}
	return raw
}

// jsonKeyIs reports whether the quoted JSON string key decodes to want.
func jsonKeyIs(key []byte, want string) bool {
	inner := key[1 : len(key)-1]
	if plainJSON(inner) {
		return string(inner) == want
	}
	return jsonString(key) == want
}

// jsonString decodes a quoted JSON string that scanObject accepted. Escapes
// and non-ASCII bytes are rare in ids and event types; they go through
// encoding/json so invalid UTF-8 is replaced exactly as it would be there.
func jsonString(raw []byte) string {
	if inner := raw[1 : len(raw)-1]; plainJSON(inner) {
		return string(inner)
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// plainJSON reports whether the inside of a JSON string has neither escapes
// nor non-ASCII bytes, so its bytes are its value.
func plainJSON(b []byte) bool {
	for _, c := range b {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}

// scanObject validates body as one JSON object and calls visit with the
// quoted key and the raw value of each top-level member, in order. It
// reports whether body is valid JSON. It allocates nothing.
func scanObject(b []byte, visit func(key, value []byte)) bool {
	if i := jsonscan.SkipSpace(b, 0); i >= len(b) || b[i] != '{' {
		return false
	}
	var w jsonscan.Walker
	return w.Walk(b, visit)
}
