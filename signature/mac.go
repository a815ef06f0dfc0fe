package signature

import (
	"crypto/hmac"
	"crypto/sha512"
	"encoding/base64"
	"fmt"
	"hash"
	"net/http"
	"sync"
	"time"
)

// base is what every MAC scheme shares: its keys, its clock and where the
// delivery id and event type come from.
type base struct {
	keys        []*macKey
	tolerance   time.Duration // zero: the timestamp check is off
	now         func() time.Time
	meta        meta
	verifyToken string // Config.VerifyToken, for the handshakes that check one
}

// core returns b itself: handshake functions, given a Verifier, reach the
// keys and the clock of the verifiers that embed a base through it.
func (b *base) core() *base { return b }

// coreOf returns the base of v, or nil when v has none.
func coreOf(v Verifier) *base {
	if c, ok := v.(interface{ core() *base }); ok {
		return c.core()
	}
	return nil
}

// macKey is one HMAC key. Keyed HMAC states are pooled so a verification
// costs no allocation once warm: hmac.New allocates two hash states and the
// pads, and Reset returns a state to its keyed start. A state is never
// shared between goroutines; the pool hands each caller its own.
type macKey struct {
	index int // in Config.Secrets
	pool  sync.Pool
}

// macState is a keyed HMAC with room for its sum and the signed prefix, so
// neither has to be allocated per call.
type macState struct {
	h       hash.Hash
	sum     [sha512.Size]byte
	scratch []byte
}

func newMACKey(index int, newHash func() hash.Hash, key []byte) *macKey {
	key = append([]byte(nil), key...)
	k := &macKey{index: index}
	k.pool.New = func() any { return &macState{h: hmac.New(newHash, key)} }
	return k
}

// get returns a keyed state at its start; give it back with put.
func (k *macKey) get() *macState {
	st := k.pool.Get().(*macState)
	st.h.Reset()
	st.scratch = st.scratch[:0]
	return st
}

// writeString adds s to the MAC. Strings are gathered in the scratch
// buffer and written in one call when bytes follow or the sum is taken:
// converting each to []byte would allocate.
func (st *macState) writeString(s string) { st.scratch = append(st.scratch, s...) }

// write adds b to the MAC, after any gathered strings.
func (st *macState) write(b []byte) {
	st.flush()
	st.h.Write(b)
}

func (st *macState) flush() {
	if len(st.scratch) > 0 {
		st.h.Write(st.scratch)
		st.scratch = st.scratch[:0]
	}
}

// finish returns the MAC, valid until the state is put back.
func (st *macState) finish() []byte {
	st.flush()
	return st.h.Sum(st.sum[:0])
}

// mac returns the MAC of the concatenation of head and body. The result is
// valid until put.
func (k *macKey) mac(body []byte, head ...string) (*macState, []byte) {
	st := k.get()
	for _, part := range head {
		st.writeString(part)
	}
	st.write(body)
	return st, st.finish()
}

func (k *macKey) put(st *macState) {
	// A hostile id header may have grown the scratch buffer; do not keep
	// more than a normal request needs.
	if cap(st.scratch) > 1<<10 {
		st.scratch = nil
	}
	k.pool.Put(st)
}

// find returns the index in Config.Secrets of the first key whose MAC over
// head+body equals one of sigs. Every comparison is constant-time.
func (b *base) find(sigs *sigSet, body []byte, head ...string) (int, bool) {
	for _, k := range b.keys {
		st, sum := k.mac(body, head...)
		ok := sigs.match(sum)
		k.put(st)
		if ok {
			return k.index, true
		}
	}
	return 0, false
}

// Static so that rejecting a hostile request allocates nothing.
var (
	errTooOld = fmt.Errorf("timestamp too old: %w", ErrTimestamp)
	errTooNew = fmt.Errorf("timestamp too far in the future: %w", ErrTimestamp)
)

// checkTime applies the tolerance, in both directions, to a unix timestamp.
func (b *base) checkTime(unix int64) error {
	if b.tolerance == 0 {
		return nil
	}
	now := b.now()
	t := time.Unix(unix, 0)
	switch {
	case t.Before(now.Add(-b.tolerance)):
		return errTooOld
	case t.After(now.Add(b.tolerance)):
		return errTooNew
	}
	return nil
}

// sigSet holds the decoded signatures of one header, on the caller's stack.
type sigSet struct {
	n    int
	size int // bytes per signature: the scheme's MAC size
	sig  [MaxSignatures][sha512.Size]byte
}

// slot is where the next signature is decoded; keep it with commit.
func (s *sigSet) slot() []byte { return s.sig[s.n][:s.size] }
func (s *sigSet) commit()      { s.n++ }

func (s *sigSet) match(sum []byte) bool {
	for i := range s.n {
		if hmac.Equal(sum, s.sig[i][:s.size]) {
			return true
		}
	}
	return false
}

// headerErrors are the static errors of one header.
type headerErrors struct {
	missing, malformed error
}

func newHeaderErrors(scheme, name string) headerErrors {
	return headerErrors{
		missing:   fmt.Errorf("%s: %s: %w", scheme, name, ErrMissingHeader),
		malformed: fmt.Errorf("%s: %s: %w", scheme, name, ErrMalformedHeader),
	}
}

// get reads the first of names that is present, capped at MaxHeaderLen.
func (e headerErrors) get(h http.Header, names ...string) (string, error) {
	for _, name := range names {
		if v := h.Get(name); v != "" {
			if len(v) > MaxHeaderLen {
				return "", e.malformed
			}
			return v, nil
		}
	}
	return "", e.missing
}

// decodeHex decodes s, either case, into dst; s must fill dst exactly.
func decodeHex(dst []byte, s string) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, ok1 := unhex(s[2*i])
		lo, ok2 := unhex(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// decodeBase64 decodes standard base64, padded or not, into dst; it must
// fill dst exactly.
func decodeBase64(dst []byte, s string) bool {
	return decodeBase64With(base64.RawStdEncoding, dst, s)
}

// decodeBase64With decodes s with raw (an unpadded encoding), a padded s
// too, into dst; it must fill dst exactly.
func decodeBase64With(raw *base64.Encoding, dst []byte, s string) bool {
	if len(s) > base64.StdEncoding.EncodedLen(sha512.Size) {
		return false
	}
	for range 2 {
		if len(s) > 0 && s[len(s)-1] == '=' {
			s = s[:len(s)-1]
		}
	}
	if raw.DecodedLen(len(s)) != len(dst) {
		return false
	}
	// Copied to the stack: converting s to []byte allocates once it is
	// longer than the compiler's small buffer (an ed25519 signature is).
	var src [(sha512.Size + 2) / 3 * 4]byte
	n, err := raw.Decode(dst, src[:copy(src[:], s)])
	return err == nil && n == len(dst)
}

// parseUnix parses a unix time in seconds written the canonical way: digits
// only, no sign, no leading zero. The senders' libraries sign the number
// re-formatted, so a non-canonical form could not have been signed by them.
// It takes the bytes of a JSON number too, without converting them.
func parseUnix[T string | []byte](s T) (int64, bool) {
	if len(s) == 0 || len(s) > 18 || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}
