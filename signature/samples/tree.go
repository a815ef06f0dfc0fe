package samples

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A value is a JSON value that keeps its members in the order of the
// document: a sample is sent in the order the provider writes it, and
// encoding/json's maps would sort it.
type value struct {
	kind  kind
	keys  []string // an object's member names, in order
	elems []*value // an object's member values (beside keys), or an array's elements
	text  string   // a string's contents, or a literal's JSON text (number, true, false, null)
}

type kind uint8

const (
	kindObject kind = iota + 1
	kindArray
	kindString
	kindLiteral
)

// name is how an error names the kind of v.
func (v *value) name() string {
	switch v.kind {
	case kindObject:
		return "an object"
	case kindArray:
		return "an array"
	case kindString:
		return "a string"
	}
	switch v.text {
	case "null":
		return "null"
	case "true", "false":
		return "a boolean"
	}
	return "a number"
}

// member returns the value of the object member called key, or nil.
func (v *value) member(key string) *value {
	for i, k := range v.keys {
		if k == key {
			return v.elems[i]
		}
	}
	return nil
}

// parseJSON decodes one JSON document.
func parseJSON(data []byte) (*value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (*value, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			v := &value{kind: kindObject}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, _ := kt.(string)
				if v.member(key) != nil {
					return nil, fmt.Errorf("member %q twice", key)
				}
				elem, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				v.keys = append(v.keys, key)
				v.elems = append(v.elems, elem)
			}
			_, err := dec.Token() // '}'
			return v, err
		case '[':
			v := &value{kind: kindArray}
			for dec.More() {
				elem, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				v.elems = append(v.elems, elem)
			}
			_, err := dec.Token() // ']'
			return v, err
		}
	case string:
		return &value{kind: kindString, text: t}, nil
	case json.Number:
		return &value{kind: kindLiteral, text: t.String()}, nil
	case bool:
		return &value{kind: kindLiteral, text: strconv.FormatBool(t)}, nil
	case nil:
		return &value{kind: kindLiteral, text: "null"}, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

// appendJSON appends v to b as compact JSON.
func appendJSON(b []byte, v *value) []byte {
	switch v.kind {
	case kindObject:
		b = append(b, '{')
		for i, k := range v.keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = appendJSON(b, v.elems[i])
		}
		return append(b, '}')
	case kindArray:
		b = append(b, '[')
		for i, e := range v.elems {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSON(b, e)
		}
		return append(b, ']')
	case kindString:
		return appendString(b, v.text)
	}
	return append(b, v.text...)
}

// appendString appends s as a JSON string. Unlike encoding/json it leaves
// <, > and & alone, as the providers' own encoders do (a URL's query keeps
// its &).
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
			continue
		}
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '\r':
			b = append(b, `\r`...)
		case c == '\t':
			b = append(b, `\t`...)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
		i++
	}
	return append(b, '"')
}

// A step of a path: an object member, or an array index when index >= 0.
type step struct {
	name  string
	index int
}

// parsePath splits a path such as "data.object.lines.data[0].amount" into
// its steps. A segment of digits is also an index ("items.0.price"),
// taken as one when the value it applies to is an array.
func parsePath(path string) ([]step, error) {
	if path == "" {
		return nil, errors.New("the path is empty")
	}
	var steps []step
	for seg := range strings.SplitSeq(path, ".") {
		name, rest, _ := strings.Cut(seg, "[")
		if name == "" && rest == "" {
			return nil, fmt.Errorf("path %q has an empty segment", path)
		}
		if name != "" {
			steps = append(steps, step{name: name, index: -1})
		}
		if rest == "" {
			continue
		}
		// rest is what follows the first '[': "0]", "0][1]", …
		for rest != "" {
			num, after, ok := strings.Cut(rest, "]")
			n, err := strconv.Atoi(num)
			if !ok || err != nil || n < 0 {
				return nil, fmt.Errorf("path %q: an index is written [n], n a number from 0", path)
			}
			steps = append(steps, step{index: n})
			if after == "" {
				break
			}
			if after[0] != '[' {
				return nil, fmt.Errorf("path %q: %q after an index (members are joined with a dot)", path, after)
			}
			rest = after[1:]
		}
	}
	return steps, nil
}

// describe writes steps as a path, for errors: "the body" for none.
func describe(steps []step) string {
	if len(steps) == 0 {
		return "the body"
	}
	var b strings.Builder
	for i, s := range steps {
		if s.index >= 0 {
			fmt.Fprintf(&b, "[%d]", s.index)
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.name)
	}
	return b.String()
}

// lookup returns the value at path in root. An error says which step
// does not exist or crosses a value that is not an object or an array.
func lookup(root *value, path string) (*value, error) {
	steps, err := parsePath(path)
	if err != nil {
		return nil, err
	}
	cur := root
	for i, s := range steps {
		next, err := walk(cur, s, steps[:i])
		if err != nil {
			return nil, err
		}
		cur = next
	}
	return cur, nil
}

// walk takes one step from cur, which is at the path before.
func walk(cur *value, s step, before []step) (*value, error) {
	at := describe(before)
	if s.index < 0 && cur.kind == kindArray {
		// "items.0.price": a segment of digits indexes an array.
		if n, err := strconv.Atoi(s.name); err == nil && n >= 0 {
			s.index = n
		}
	}
	if s.index >= 0 {
		if cur.kind != kindArray {
			return nil, fmt.Errorf("%s is %s, not an array", at, cur.name())
		}
		if s.index >= len(cur.elems) {
			return nil, fmt.Errorf("%s has %d elements: [%d] does not exist", at, len(cur.elems), s.index)
		}
		return cur.elems[s.index], nil
	}
	if cur.kind != kindObject {
		return nil, fmt.Errorf("%s is %s, not an object", at, cur.name())
	}
	next := cur.member(s.name)
	if next == nil {
		return nil, fmt.Errorf("%s has no member %q (it has %s)", at, s.name, memberList(cur))
	}
	return next, nil
}

// memberList names an object's members for an error, the first few.
func memberList(v *value) string {
	const most = 12
	if len(v.keys) == 0 {
		return "none"
	}
	keys := v.keys
	more := ""
	if len(keys) > most {
		more = fmt.Sprintf(", … %d more", len(keys)-most)
		keys = keys[:most]
	}
	return strings.Join(keys, ", ") + more
}

// set replaces the value at path in root with nv. The path must exist:
// a misspelt member is an error, not a new member.
func set(root *value, path string, nv *value) error {
	target, err := lookup(root, path)
	if err != nil {
		return err
	}
	*target = *nv
	return nil
}

// scalarText is the text a field reader sees of v: a string's contents or
// a literal's JSON text; "" for an object, an array or null.
func scalarText(v *value) string {
	switch {
	case v == nil || v.kind == kindObject || v.kind == kindArray:
		return ""
	case v.kind == kindLiteral && v.text == "null":
		return ""
	}
	return v.text
}

// clone returns a deep copy of v.
func (v *value) clone() *value {
	c := &value{kind: v.kind, text: v.text}
	if v.keys != nil {
		c.keys = append([]string(nil), v.keys...)
	}
	if v.elems != nil {
		c.elems = make([]*value, len(v.elems))
		for i, e := range v.elems {
			c.elems[i] = e.clone()
		}
	}
	return c
}
