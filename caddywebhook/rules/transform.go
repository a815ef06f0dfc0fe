package rules

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
)

// TransformConfig is a transform's source: what each part of the request a
// target receives is computed from.
type TransformConfig struct {
	// Body is the CEL expression of the new body. A map or a list is sent
	// as JSON (Content-Type: application/json), a string as text
	// (text/plain; charset=utf-8), bytes as they are (with the event's
	// content type). Default: empty, the event's body unchanged.
	Body string `json:"body,omitempty"`
	// Headers sets request headers: name → CEL expression yielding a
	// string. Host, Content-Length, hop-by-hop headers and X-Webhook-*
	// may not be set. Default: none.
	Headers map[string]string `json:"headers,omitempty"`
	// RemoveHeaders names headers not to send (the event's content type or
	// event-type header, a target's configured header). The same names as
	// Headers are refused. Default: none.
	RemoveHeaders []string `json:"remove_headers,omitempty"`
}

// IsZero reports whether c transforms nothing.
func (c *TransformConfig) IsZero() bool {
	return c == nil || (c.Body == "" && len(c.Headers) == 0 && len(c.RemoveHeaders) == 0)
}

// Transform is a compiled TransformConfig.
type Transform struct {
	body      *program
	headers   []headerProgram // sorted by name, so errors and output are stable
	remove    []string        // canonical names
	maxOutput int
}

type headerProgram struct {
	name string // canonical
	prg  *program
}

// FieldError is a compile error in one part of a transform: Field is
// "body", "header <Name>" or "remove_header <Name>".
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// CompileTransform compiles c. It refuses, naming the header, a header a
// transform may not touch.
func CompileTransform(c *TransformConfig, opts Options) (*Transform, error) {
	if c.IsZero() {
		return nil, nil
	}
	t := &Transform{maxOutput: opts.maxOutput()}
	if c.Body != "" {
		p, err := compile(c.Body, opts, "a map, a list, a string or bytes",
			types.MapKind, types.ListKind, types.StringKind, types.BytesKind)
		if err != nil {
			return nil, &FieldError{Field: "body", Err: err}
		}
		t.body = p
	}
	names := make([]string, 0, len(c.Headers))
	for name := range c.Headers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := CheckHeaderName(name); err != nil {
			return nil, &FieldError{Field: "header " + name, Err: err}
		}
		p, err := compile(c.Headers[name], opts, "a string", types.StringKind)
		if err != nil {
			return nil, &FieldError{Field: "header " + name, Err: err}
		}
		t.headers = append(t.headers, headerProgram{name: http.CanonicalHeaderKey(name), prg: p})
	}
	for _, name := range c.RemoveHeaders {
		if err := CheckHeaderName(name); err != nil {
			return nil, &FieldError{Field: "remove_header " + name, Err: err}
		}
		t.remove = append(t.remove, http.CanonicalHeaderKey(name))
	}
	return t, nil
}

// hopByHop are the headers that describe one connection, not the message
// (RFC 9110 section 7.6.1), so a transform may not set or remove them.
var hopByHop = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true,
	"Proxy-Authorization": true, "Proxy-Connection": true, "Te": true,
	"Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
}

// CheckHeaderName refuses a header a transform may not set or remove: Host
// and Content-Length (the transport writes them), hop-by-hop headers, and
// the X-Webhook-* metadata headers a target relies on.
func CheckHeaderName(name string) error {
	if name == "" || strings.ContainsFunc(name, func(r rune) bool {
		return r <= ' ' || r >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r)
	}) {
		return fmt.Errorf("%q is not a valid header name", name)
	}
	canon := http.CanonicalHeaderKey(name)
	switch {
	case canon == "Host", canon == "Content-Length":
		return fmt.Errorf("header %s is set by the transport and may not be changed", canon)
	case hopByHop[canon]:
		return fmt.Errorf("header %s is hop-by-hop and may not be changed", canon)
	case strings.HasPrefix(canon, "X-Webhook-"):
		return fmt.Errorf("header %s is reserved for delivery metadata and may not be changed", canon)
	}
	return nil
}

// Result is a transform's output for one event.
type Result struct {
	// Body is the new body; nil with BodySet false keeps the event's.
	Body    []byte
	BodySet bool
	// ContentType is the content type Body calls for ("" keeps the
	// event's, as for a bytes result).
	ContentType string
	// Headers are set on the request in place of the stored headers of
	// the same name; the target's own headers and metadata come after.
	Headers http.Header
	// Remove are canonical header names not to send.
	Remove []string
}

// Apply runs t on in. A nil Transform returns a nil Result: send the event
// as it is. An error is the rule's fault, so retrying cannot help.
func (t *Transform) Apply(in *Input) (*Result, error) {
	if t == nil {
		return nil, nil
	}
	r := &Result{Remove: t.remove}
	size := 0
	if t.body != nil {
		out, err := t.body.eval(in)
		if err != nil {
			return nil, fmt.Errorf("transform body: %w", err)
		}
		b, ctype, err := encodeBody(out)
		if err != nil {
			return nil, fmt.Errorf("transform body: %w", err)
		}
		r.Body, r.BodySet, r.ContentType = b, true, ctype
		size += len(b)
	}
	if len(t.headers) > 0 {
		r.Headers = make(http.Header, len(t.headers))
	}
	for _, h := range t.headers {
		out, err := h.prg.eval(in)
		if err != nil {
			return nil, fmt.Errorf("transform header %s: %w", h.name, err)
		}
		s, ok := out.(types.String)
		if !ok {
			return nil, fmt.Errorf("transform header %s: yields %s, not a string", h.name, typeName(out))
		}
		if strings.ContainsAny(string(s), "\r\n\x00") {
			return nil, fmt.Errorf("transform header %s: the value holds a line break or NUL", h.name)
		}
		r.Headers[h.name] = []string{string(s)}
		size += len(h.name) + len(s)
	}
	if size > t.maxOutput {
		return nil, fmt.Errorf("transform output is %d bytes, over the cap of %d", size, t.maxOutput)
	}
	return r, nil
}

// encodeBody turns a transform's body result into bytes and the content
// type it calls for.
func encodeBody(v ref.Val) ([]byte, string, error) {
	switch v := v.(type) {
	case types.String:
		return []byte(v), "text/plain; charset=utf-8", nil
	case types.Bytes:
		return []byte(v), "", nil
	case traits.Mapper, traits.Lister:
		n, err := native(v, 0)
		if err != nil {
			return nil, "", err
		}
		b, err := json.Marshal(n)
		if err != nil {
			return nil, "", fmt.Errorf("encode json: %w", err)
		}
		return b, "application/json", nil
	}
	return nil, "", fmt.Errorf("yields %s; want a map, a list, a string or bytes", typeName(v))
}

// maxDepth bounds the nesting native walks; JSON nested deeper than this is
// not a message anyone means to send.
const maxDepth = 100

// native converts a CEL value to what encoding/json writes as the JSON a
// reader expects: maps with string keys, lists, numbers, strings, bools,
// null; bytes as base64, timestamps as RFC 3339, durations as "1.5s".
func native(v ref.Val, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errors.New("value nested too deep for json")
	}
	switch v := v.(type) {
	case types.Null:
		return nil, nil
	case types.Bool:
		return bool(v), nil
	case types.Int:
		return int64(v), nil
	case types.Uint:
		return uint64(v), nil
	case types.Double:
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%v has no json form", f)
		}
		return f, nil
	case types.String:
		return string(v), nil
	case types.Bytes:
		return base64.StdEncoding.EncodeToString(v), nil
	case types.Timestamp:
		return v.Time.UTC().Format(time.RFC3339Nano), nil
	case types.Duration:
		return v.Duration.String(), nil
	case traits.Mapper:
		m := make(map[string]any, int(v.Size().(types.Int)))
		it := v.Iterator()
		for it.HasNext() == types.True {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return nil, fmt.Errorf("a map key is %s; json keys are strings", typeName(k))
			}
			e, err := native(v.Get(k), depth+1)
			if err != nil {
				return nil, err
			}
			m[string(ks)] = e
		}
		return m, nil
	case traits.Lister:
		n := int(v.Size().(types.Int))
		l := make([]any, 0, n)
		for i := range n {
			e, err := native(v.Get(types.Int(i)), depth+1)
			if err != nil {
				return nil, err
			}
			l = append(l, e)
		}
		return l, nil
	}
	return nil, fmt.Errorf("%s has no json form", typeName(v))
}

func typeName(v ref.Val) string {
	if t, ok := v.Type().(ref.Type); ok {
		return t.TypeName()
	}
	return fmt.Sprintf("%T", v)
}
