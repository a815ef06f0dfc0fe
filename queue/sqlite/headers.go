package sqlite

import (
	"encoding/binary"
	"errors"

	"github.com/caddywebhook/caddywebhook/queue"
)

// Headers are stored as a compact blob rather than JSON: for each header,
// a uvarint length and the name, then a uvarint length and the value. It
// is written on the hot path of every enqueue, where JSON's reflection and
// escaping would cost more than the rest of the request.

// appendHeaders appends the encoding of hs to b.
func appendHeaders(b []byte, hs []queue.Header) []byte {
	for _, h := range hs {
		b = binary.AppendUvarint(b, uint64(len(h.Name)))
		b = append(b, h.Name...)
		b = binary.AppendUvarint(b, uint64(len(h.Value)))
		b = append(b, h.Value...)
	}
	return b
}

var errBadHeaders = errors.New("decode headers: malformed blob")

// decodeHeaders reverses appendHeaders; an empty blob is nil.
func decodeHeaders(b []byte) ([]queue.Header, error) {
	var hs []queue.Header
	next := func() (string, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return "", false
		}
		s := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return s, true
	}
	for len(b) > 0 {
		name, ok := next()
		if !ok {
			return nil, errBadHeaders
		}
		value, ok := next()
		if !ok {
			return nil, errBadHeaders
		}
		hs = append(hs, queue.Header{Name: name, Value: value})
	}
	return hs, nil
}
