package caddywebhook

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// bodyBuffers recycles request body buffers. Only buffers up to
// maxPooledBuffer go back, so a few large bodies do not pin memory.
var bodyBuffers = sync.Pool{New: func() any { b := make([]byte, 0, minBodyBuffer); return &b }}

const (
	// minBodyBuffer is the capacity a body starts with: most webhooks fit,
	// and a sender that declares more gets more only as it sends it.
	minBodyBuffer   = 4 << 10
	maxPooledBuffer = 256 << 10
)

// Errors of readBody.
var (
	// errTooLarge reports a body over the cap.
	errTooLarge = errors.New("body too large")
	// errBusy reports a body that would take the receiver past its bound
	// on the bytes of bodies being read.
	errBusy = errors.New("too many body bytes in flight")
)

// busyRetryAfter is the Retry-After of a 503 for a receiver at its bound
// on body bytes in flight, in seconds.
const busyRetryAfter = "5"

func putBuffer(bp *[]byte) {
	if cap(*bp) <= maxPooledBuffer {
		bodyBuffers.Put(bp)
	}
}

// bodyBudget bounds the bytes held by the bodies a receiver is reading or
// verifying, beyond their pooled buffers.
type bodyBudget struct {
	limit int64
	used  atomic.Int64
}

// reserve charges n bytes, or charges nothing and reports false when that
// would pass the limit.
func (b *bodyBudget) reserve(n int64) bool {
	if b.used.Add(n) > b.limit {
		b.used.Add(-n)
		return false
	}
	return true
}

// release gives back n bytes charged by reserve.
func (b *bodyBudget) release(n int64) {
	if n != 0 {
		b.used.Add(-n)
	}
}

// readBody reads body into buf (reusing its capacity) and fails with
// errTooLarge as soon as it holds more than limit bytes. hint is the
// request's Content-Length, -1 if unknown; it is at most limit, and it is
// only a promise: the buffer grows as bytes arrive (doubling, so a body
// costs at most about twice its size) and never past hint+1 while the
// promise holds. Each buffer it allocates is charged to budget; held is
// what the caller must release, also on error, once it is done with the
// bytes. errBusy reports a growth the budget refused.
func readBody(body io.Reader, buf []byte, limit, hint int64, budget *bodyBudget) (_ []byte, held int64, _ error) {
	buf = buf[:0]
	if body == nil {
		return buf, 0, nil
	}
	for {
		if len(buf) == cap(buf) {
			next := min(max(2*int64(cap(buf)), minBodyBuffer), limit+1)
			if hint >= int64(len(buf)) {
				// One byte past the hint lets the read end on EOF
				// without growing again.
				next = min(next, hint+1)
			}
			if !budget.reserve(next - held) {
				return buf, held, errBusy
			}
			held = next
			grown := make([]byte, len(buf), next)
			copy(grown, buf)
			buf = grown
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return buf, held, errTooLarge
		}
		if err == io.EOF {
			return buf, held, nil
		}
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				// request_body's own cap, ahead of ours.
				return buf, held, errTooLarge
			}
			return buf, held, err
		}
	}
}
