package postgres

import (
	"encoding/binary"
	"errors"

	"github.com/caddywebhook/caddywebhook/queue"
)

// Headers are stored as a compact bytea rather than jsonb, in the same
// encoding as the SQLite store: for each header, a uvarint length and the
// name, then a uvarint length and the value. It keeps any bytes a header
// value may hold (jsonb and text reject NUL and invalid UTF-8), and costs
// no reflection on the hot path of every enqueue.

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

var errBadHeaders = errors.New("decode headers: malformed value")

// decodeHeaders reverses appendHeaders; an empty value is nil.
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
