package rules

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"unicode/utf8"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"

	"github.com/caddywebhook/caddywebhook/internal/jsonscan"
)

// A JSON object is read lazily: `body.data.object.amount_total` reads the
// keys of body, data and object (stepping over nested containers by the
// validity check's notes) and decodes only the value it ends on. Decoding a 2 KB body into Go
// maps cost about four times the validity check it needs anyway, and a
// filter runs on every request, so the full decode happens only for what
// needs the whole object (iteration, size, equality, a transform's output),
// once per object, cached.

// parseBody turns a JSON body into a CEL value; a body that is not JSON
// (empty, form-encoded, truncated) is null, so `body == null` tells it
// apart and `body.x` is an evaluation error rather than a panic.
func parseBody(b []byte) ref.Val {
	if len(b) == 0 {
		return types.NullValue
	}
	ends, ok := scanJSON(b)
	if !ok {
		return types.NullValue
	}
	d := &jsonDoc{b: b, ends: ends}
	i := jsonscan.SkipSpace(b, 0)
	return d.value(i, d.skip(i))
}

// jsonDoc is a valid JSON body and where each of its containers ends, which
// the validity check noted: stepping over a nested object is one lookup,
// not a read of its bytes.
type jsonDoc struct {
	b    []byte
	ends []jsonscan.Span
}

// skip returns the index just past the value starting at b[i].
func (d *jsonDoc) skip(i int) int {
	b := d.b
	if b[i] == '{' || b[i] == '[' {
		n, found := slices.BinarySearchFunc(d.ends, int32(i), func(e jsonscan.Span, at int32) int { return cmp.Compare(e.Start, at) })
		if found {
			return int(d.ends[n].End)
		}
		// Otherwise a container past the notes' bound: read it.
	}
	return jsonscan.SkipValid(b, i)
}

// value turns the valid JSON value b[i:j] into a CEL value: an object
// lazily, anything else decoded at once.
func (d *jsonDoc) value(i, j int) ref.Val {
	b := d.b[i:j]
	switch b[0] {
	case '{':
		return &lazyObject{doc: d, at: i, end: j}
	case '"':
		if s, ok := plainString(b); ok {
			return types.String(s)
		}
	case 't':
		return types.True
	case 'f':
		return types.False
	case 'n':
		return types.NullValue
	case '[':
		// Lists are walked whole (exists, all, index) more often than
		// not; decode them at once.
	default:
		if f, err := strconv.ParseFloat(string(b), 64); err == nil {
			return types.Double(f)
		}
	}
	return decodeJSON(b)
}

func decodeJSON(b []byte) ref.Val {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return types.NewErrFromString("decode json: " + err.Error())
	}
	return types.DefaultTypeAdapter.NativeToValue(v)
}

// plainString returns the content of a quoted JSON string that has no
// escapes and is valid UTF-8, the common case, without decoding.
func plainString(b []byte) (string, bool) {
	in := b[1 : len(b)-1]
	if bytes.IndexByte(in, '\\') >= 0 || !utf8.Valid(in) {
		return "", false
	}
	return string(in), true
}

// lazyObject is a JSON object known to be valid, read key by key. The
// first lookup notes where each member is, in the pass it makes anyway, so
// a rule reading several fields of one object (body.type, body.data)
// scans it once: a Stripe event's type comes after its data, and each
// lookup used to skip the whole data object again.
type lazyObject struct {
	doc     *jsonDoc
	at, end int          // the object is doc.b[at:end]
	members []memberSpan // where each member is, once indexed
	indexed bool
	inline  [12]memberSpan // members' first storage: most objects need no more
	full    traits.Mapper  // the whole object decoded, on first need
	// memo keeps the values of the last keys found, so a nested object is
	// made (and indexed) once however many rules read under it.
	memo  [4]memoEntry
	memoN int
}

// memberSpan is where one member is in the document's bytes: its key
// between the quotes, and its value.
type memberSpan struct{ key0, key1, val0, val1 int32 }

// maxIndexed bounds the members an object's index holds (16 bytes each):
// a larger object, which only a hostile body sends, is read member by
// member on each lookup instead.
const maxIndexed = 1024

type memoEntry struct {
	key string
	val ref.Val
}

var _ traits.Mapper = (*lazyObject)(nil)

// each calls f with each member of the object, in order, until f says
// stop.
func (o *lazyObject) each(f func(m memberSpan) (more bool)) {
	b := o.doc.b
	i := jsonscan.SkipSpace(b, o.at+1)
	for i < o.end && b[i] != '}' {
		ks := i
		i = jsonscan.SkipValid(b, i)
		ke := i
		i = jsonscan.SkipSpace(b, i)
		i = jsonscan.SkipSpace(b, i+1) // the colon
		vs := i
		i = o.doc.skip(i)
		if !f(memberSpan{int32(ks + 1), int32(ke - 1), int32(vs), int32(i)}) {
			return
		}
		i = jsonscan.SkipSpace(b, i)
		if i < o.end && b[i] == ',' {
			i = jsonscan.SkipSpace(b, i+1)
		}
	}
}

// index notes where each member of the object is, in one pass over its
// keys, unless it has more than maxIndexed.
func (o *lazyObject) index() {
	o.indexed = true
	o.members = o.inline[:0]
	o.each(func(m memberSpan) bool {
		if len(o.members) == maxIndexed {
			o.members = nil
			return false
		}
		o.members = append(o.members, m)
		return true
	})
}

// is reports whether member m's key is key. A key without an escape and
// valid as UTF-8 is what its bytes say; any other is decoded.
func (o *lazyObject) is(m memberSpan, key string) bool {
	k := o.doc.b[m.key0:m.key1]
	if bytes.IndexByte(k, '\\') < 0 && utf8.Valid(k) {
		return string(k) == key
	}
	return keyIs(k, key)
}

// find returns the value of key, the last one when the object repeats it,
// as encoding/json does.
func (o *lazyObject) find(key string) (ref.Val, bool) {
	for _, m := range o.memo[:min(o.memoN, len(o.memo))] {
		if m.key == key {
			return m.val, true
		}
	}
	if !o.indexed {
		o.index()
	}
	var found memberSpan
	ok := false
	if o.members != nil {
		for i := len(o.members) - 1; i >= 0 && !ok; i-- {
			found, ok = o.members[i], o.is(o.members[i], key)
		}
	} else {
		o.each(func(m memberSpan) bool {
			if o.is(m, key) {
				found, ok = m, true
			}
			return true
		})
	}
	if !ok {
		return nil, false
	}
	v := o.doc.value(int(found.val0), int(found.val1))
	o.memo[o.memoN%len(o.memo)] = memoEntry{key: key, val: v}
	o.memoN++
	return v, true
}

// keyIs reports whether k, the bytes between the quotes of a JSON key
// with an escape or bytes that are not UTF-8, decodes to key (bytes that
// are not UTF-8 decode to U+FFFD, as encoding/json does).
func keyIs(k []byte, key string) bool {
	q := make([]byte, 0, len(k)+2)
	q = append(append(append(q, '"'), k...), '"')
	var d string
	return json.Unmarshal(q, &d) == nil && d == key
}

func (o *lazyObject) whole() traits.Mapper {
	if o.full == nil {
		m, ok := decodeJSON(o.doc.b[o.at:o.end]).(traits.Mapper)
		if !ok {
			m = types.NewStringInterfaceMap(types.DefaultTypeAdapter, nil)
		}
		o.full = m
	}
	return o.full
}

// Find implements traits.Mapper.
func (o *lazyObject) Find(key ref.Val) (ref.Val, bool) {
	if k, ok := key.(types.String); ok {
		return o.find(string(k))
	}
	return o.whole().Find(key)
}

// Get implements traits.Indexer.
func (o *lazyObject) Get(key ref.Val) ref.Val {
	v, found := o.Find(key)
	if !found {
		return types.NewErrFromString(fmt.Sprintf("no such key: %v", key.Value()))
	}
	return v
}

// Contains implements traits.Container.
func (o *lazyObject) Contains(key ref.Val) ref.Val {
	_, found := o.Find(key)
	return types.Bool(found)
}

// Iterator implements traits.Iterable.
func (o *lazyObject) Iterator() traits.Iterator { return o.whole().Iterator() }

// Size implements traits.Sizer.
func (o *lazyObject) Size() ref.Val { return o.whole().Size() }

// ConvertToNative implements ref.Val.
func (o *lazyObject) ConvertToNative(t reflect.Type) (any, error) {
	return o.whole().ConvertToNative(t)
}

// ConvertToType implements ref.Val.
func (o *lazyObject) ConvertToType(t ref.Type) ref.Val {
	if t == types.MapType {
		return o
	}
	return o.whole().ConvertToType(t)
}

// Equal implements ref.Val.
func (o *lazyObject) Equal(other ref.Val) ref.Val {
	if _, isMap := other.(traits.Mapper); !isMap {
		return types.False
	}
	return o.whole().Equal(other)
}

// Type implements ref.Val.
func (o *lazyObject) Type() ref.Type { return types.MapType }

// Value implements ref.Val.
func (o *lazyObject) Value() any { return o.whole().Value() }
