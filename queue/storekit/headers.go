package storekit

import (
	"encoding/binary"
	"errors"

	"github.com/caddywebhook/caddywebhook/queue"
)

// The stores keep an event's headers as one compact byte string rather
// than JSON: for each header, a uvarint length and the name, then a uvarint
// length and the value. It is written on the hot path of every enqueue,
// where JSON's reflection and escaping would cost more than the rest of the
// request, and it keeps any bytes a header value may hold (Postgres' jsonb
// and text reject NUL and invalid UTF-8). Every backend uses this encoding,
// so a stored event reads the same whichever store wrote it.

// AppendHeaders appends the storage encoding of hs to b.
func AppendHeaders(b []byte, hs []queue.Header) []byte {
	for _, h := range hs {
		b = binary.AppendUvarint(b, uint64(len(h.Name)))
		b = append(b, h.Name...)
		b = binary.AppendUvarint(b, uint64(len(h.Value)))
		b = append(b, h.Value...)
	}
	return b
}

// headersLen is the length of AppendHeaders' encoding of hs.
func headersLen(hs []queue.Header) int {
	n := 0
	for _, h := range hs {
		n += uvarintLen(len(h.Name)) + len(h.Name) + uvarintLen(len(h.Value)) + len(h.Value)
	}
	return n
}

// uvarintLen is the length of n's uvarint encoding.
func uvarintLen(n int) int {
	k := 1
	for ; n >= 0x80; n >>= 7 {
		k++
	}
	return k
}

// ErrBadHeaders reports a stored header encoding that does not decode.
var ErrBadHeaders = errors.New("decode headers: malformed encoding")

// DecodeHeaders reverses AppendHeaders; an empty encoding is nil.
func DecodeHeaders(b []byte) ([]queue.Header, error) {
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
			return nil, ErrBadHeaders
		}
		value, ok := next()
		if !ok {
			return nil, ErrBadHeaders
		}
		hs = append(hs, queue.Header{Name: name, Value: value})
	}
	return hs, nil
}

// DecodeStored returns the headers and payload of a stored event as a
// JobDetail or EventDetail holds them: the headers decoded, and the
// payload never nil, so that an empty one is "" in JSON rather than null.
func DecodeStored(headers, payload []byte) ([]queue.Header, []byte, error) {
	hs, err := DecodeHeaders(headers)
	if err != nil {
		return nil, nil, err
	}
	if payload == nil {
		payload = []byte{}
	}
	return hs, payload, nil
}
