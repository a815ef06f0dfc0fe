package storekit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/seal"
)

// Encryption at rest, the same in every Store.
//
// An event's headers and payload are one sealed value, in a column of its
// own (sealed, NULL for a plain row, whose headers and payload columns
// then hold the values); its plaintext is uvarint(len(h)), h (the
// AppendHeaders encoding), then the payload. A sealed row's headers and
// payload columns are written empty. The associated data binds the value
// to its event's dedupe key, (source, delivery id): known before the
// insert, so the value is sealed in the caller's goroutine, never in a
// writer that serves every caller.
//
// Error texts (a job's last error, each attempt's) are sealed in the
// text form in place, bound to their job's id and column: queue.SafeText
// never begins a text with FormatText, a control character, so the first
// byte tells a sealed text from a plain one.
//
// An ordering key is kept as its keyed hash (seal.Hasher), under a secret
// the store generates once and keeps in its own row, sealed like any
// value (32 plain bytes without keys; a sealed one is longer).

// The columns a sealed text belongs to, in its associated data.
const (
	ColumnLastError    = "job.last_error"
	ColumnAttemptError = "attempt.error"
)

// Sealer seals and opens a store's values under its Keys, and hashes
// ordering keys. A Store keeps one for each Keys it is given
// (Store.SetKeys), swapping it atomically; a Sealer is immutable and safe
// for concurrent use.
type Sealer struct {
	keys   queue.Keys
	hasher *seal.Hasher
	secret []byte // the hash secret, for a rekey to seal again
}

// secretAD is the associated data of the ordering-key secret.
var secretAD = []byte("secret\x00ordering")

// NewSecret generates a store's ordering-key secret and returns it with
// the value to store: sealed under k's first key when k seals, else the
// plain bytes.
func NewSecret(k queue.Keys) (secret, stored []byte) {
	secret = seal.NewHashSecret()
	return secret, StoreSecret(k, secret)
}

// StoreSecret returns the value to store for secret under k.
func StoreSecret(k queue.Keys, secret []byte) []byte {
	if !k.Sealing() {
		return append([]byte(nil), secret...)
	}
	return k.Ring.Seal(nil, secret, secretAD)
}

// NewSealer returns the Sealer of k for a store whose ordering-key secret
// is stored as stored. It fails when stored is sealed under a key k does
// not hold, naming the key (a *seal.MissingKeyError in the chain).
func NewSealer(k queue.Keys, stored []byte) (*Sealer, error) {
	secret := stored
	if len(stored) != seal.HashSecretSize {
		if k.Ring == nil {
			id, _ := seal.KeyID(stored)
			return nil, fmt.Errorf("open the ordering-key secret: %w", &seal.MissingKeyError{KeyID: id})
		}
		var err error
		if secret, err = k.Ring.Open(nil, stored, secretAD); err != nil {
			return nil, fmt.Errorf("open the ordering-key secret: %w", err)
		}
	}
	h, err := seal.NewHasher(secret)
	if err != nil {
		return nil, err
	}
	return &Sealer{keys: k, hasher: h, secret: append([]byte(nil), secret...)}, nil
}

// Keys returns the keys s seals and opens with.
func (s *Sealer) Keys() queue.Keys { return s.keys }

// Sealing reports whether s seals what is written.
func (s *Sealer) Sealing() bool { return s.keys.Sealing() }

// KeyID returns the id of the key s seals under, "" when it writes plain.
func (s *Sealer) KeyID() string {
	if !s.Sealing() {
		return ""
	}
	return s.keys.Ring.Current()
}

// Listed reports whether s's ring holds the key id.
func (s *Sealer) Listed(id string) bool { return s.keys.Ring != nil && s.keys.Ring.Has(id) }

// StoredSecret returns the value of the ordering-key secret to store
// under s's keys: for a rekey.
func (s *Sealer) StoredSecret(plain bool) []byte {
	if plain {
		return StoreSecret(queue.Keys{}, s.secret)
	}
	return StoreSecret(s.keys, s.secret)
}

// OrderingKey returns what the store keeps of an event's ordering key:
// its keyed hash within the event's source.
func (s *Sealer) OrderingKey(source, key string) string {
	if key == "" {
		return ""
	}
	return s.hasher.Sum(source, key)
}

// scratch holds a plaintext and associated data being sealed, reused so
// that sealing an event allocates nothing once warm.
type scratch struct{ plain, ad []byte }

var scratches = sync.Pool{New: func() any { return new(scratch) }}

// eventAD appends the associated data of the event (source, deliveryID).
func eventAD(b []byte, source, deliveryID string) []byte {
	b = append(b, "event\x00"...)
	b = binary.AppendUvarint(b, uint64(len(source)))
	b = append(b, source...)
	return append(b, deliveryID...)
}

// textAD appends the associated data of an error text of job in column.
func textAD(b []byte, column string, job int64) []byte {
	b = append(b, column...)
	b = append(b, 0)
	return binary.BigEndian.AppendUint64(b, uint64(job))
}

// AppendEvent appends to dst the sealed value of an event's headers and
// payload and returns it, or returns nil when s writes plain (the
// columns then take the headers and payload as they are).
func (s *Sealer) AppendEvent(dst []byte, source, deliveryID string, headers []queue.Header, payload []byte) []byte {
	if !s.Sealing() {
		return nil
	}
	return AppendSealedEvent(s.keys.Ring, dst, source, deliveryID, headers, payload)
}

// AppendSealedEvent is AppendEvent under ring's first key, for a rekey.
func AppendSealedEvent(ring *seal.Ring, dst []byte, source, deliveryID string, headers []queue.Header, payload []byte) []byte {
	sc := scratches.Get().(*scratch)
	plain := binary.AppendUvarint(sc.plain[:0], uint64(headersLen(headers)))
	plain = AppendHeaders(plain, headers)
	plain = append(plain, payload...)
	sc.ad = eventAD(sc.ad[:0], source, deliveryID)
	dst = ring.Seal(dst, plain, sc.ad)
	clear(plain)
	sc.plain = plain[:0]
	scratches.Put(sc)
	return dst
}

// errBadEvent reports a sealed event whose plaintext does not parse.
var errBadEvent = errors.New("open sealed event: malformed plaintext")

// DecodeEvent is the one place a stored event's columns become its
// headers and payload, in every read of every Store: the claim, a job or
// event in full, a lookup by delivery id, a scan. sealed is the sealed
// column, nil for a plain row, whose headers and payload columns it then
// decodes; a sealed value is opened in place, so it must be the caller's
// own buffer (as a scanned column is), and the payload returned is a part
// of it. The payload is never nil. An error names the key a value is
// sealed under when the ring lacks it (a *seal.MissingKeyError in the
// chain).
func (s *Sealer) DecodeEvent(source, deliveryID string, headers, payload, sealed []byte) ([]queue.Header, []byte, error) {
	if sealed == nil {
		return DecodeStored(headers, payload)
	}
	plain, err := openEvent(s.keys.Ring, source, deliveryID, sealed)
	if err != nil {
		return nil, nil, err
	}
	n, k := binary.Uvarint(plain)
	if k <= 0 || n > uint64(len(plain)-k) {
		return nil, nil, errBadEvent
	}
	hs, err := DecodeHeaders(plain[k : k+int(n)])
	if err != nil {
		return nil, nil, err
	}
	return hs, plain[k+int(n):], nil
}

// openEvent opens an event's sealed value in place.
func openEvent(ring *seal.Ring, source, deliveryID string, sealed []byte) ([]byte, error) {
	if ring == nil {
		return nil, missingKey(sealed)
	}
	sc := scratches.Get().(*scratch)
	sc.ad = eventAD(sc.ad[:0], source, deliveryID)
	plain, err := ring.OpenInPlace(sealed, sc.ad)
	scratches.Put(sc)
	return plain, err
}

// missingKey is the error for a sealed value opened without a ring.
func missingKey[V ~string | ~[]byte](v V) error {
	id, ok := seal.KeyID(v)
	if !ok {
		return seal.ErrMalformed
	}
	return &seal.MissingKeyError{KeyID: id}
}

// SealText returns the value to store of text, an error text of job in
// column: sealed in the text form when s seals and text is not empty,
// else text itself. The empty text stays empty: it says only that there
// was no error, which the job's status says too.
func (s *Sealer) SealText(text, column string, job int64) string {
	if !s.Sealing() || text == "" {
		return text
	}
	return SealTextUnder(s.keys.Ring, text, column, job)
}

// CompletionTexts returns what a store keeps of c's error: the job's last
// error and its attempt's, made safe (queue.SafeText) and each sealed to
// its column when s seals. Every Store's Finish writes them.
func (s *Sealer) CompletionTexts(c *queue.Completion) (lastError, attemptError string) {
	msg := queue.SafeText(c.Error, queue.MaxErrorLen)
	return s.SealText(msg, ColumnLastError, c.JobID), s.SealText(msg, ColumnAttemptError, c.JobID)
}

// SealTextUnder is SealText under ring's first key, for a rekey.
func SealTextUnder(ring *seal.Ring, text, column string, job int64) string {
	sc := scratches.Get().(*scratch)
	sc.ad = textAD(sc.ad[:0], column, job)
	v := ring.SealString(text, sc.ad)
	scratches.Put(sc)
	return v
}

// SealedText reports whether a stored text is sealed: its first byte.
func SealedText(stored string) bool {
	return len(stored) > 0 && stored[0] == seal.FormatText
}

// OpenText returns the plain text of stored, an error text of job in
// column: stored itself when it is plain. An error names the key it is
// sealed under when the ring lacks it.
func (s *Sealer) OpenText(stored, column string, job int64) (string, error) {
	if !SealedText(stored) {
		return stored, nil
	}
	if s.keys.Ring == nil {
		return "", missingKey(stored)
	}
	sc := scratches.Get().(*scratch)
	sc.ad = textAD(sc.ad[:0], column, job)
	text, err := s.keys.Ring.OpenString(stored, sc.ad)
	scratches.Put(sc)
	return text, err
}

// DecodeText is OpenText for a text shown to an operator (a job's last
// error in a listing, an attempt's in its history): one that does not
// open is shown as a note of why, naming its key, never as its bytes.
func (s *Sealer) DecodeText(stored, column string, job int64) string {
	text, err := s.OpenText(stored, column, job)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return text
}

// KeyOf returns the key id a stored value names, "" for a plain one:
// events.sealed or a sealed text.
func KeyOf[V ~string | ~[]byte](v V) string {
	id, _ := seal.KeyID(v)
	return id
}

// ReadStored is DecodeEvent for an operator's read of one event or job:
// an event that does not open comes back with no headers, an empty
// payload and why (its key named), rather than as an error, so the rest
// of what is read still shows.
func ReadStored(s *Sealer, source, deliveryID string, headers, payload, sealed []byte) ([]queue.Header, []byte, string) {
	hs, p, err := s.DecodeEvent(source, deliveryID, headers, payload, sealed)
	if err != nil {
		return nil, []byte{}, err.Error()
	}
	return hs, p, ""
}

// SetSealStats fills st.Keys from c's values per key id, listed in the
// order of s's ring and then by id, and st.PlainEvents from st.Events
// less c's sealed events. Every Store's Stats ends with it.
func SetSealStats(st *queue.Stats, s *Sealer, c SealCounts) {
	st.Keys = st.Keys[:0]
	var ring []string
	if s.keys.Ring != nil {
		ring = s.keys.Ring.IDs()
	}
	for id, n := range c.Values {
		if n != 0 {
			st.Keys = append(st.Keys, queue.KeyCount{KeyID: id, Values: n, Listed: s.Listed(id)})
		}
	}
	rank := func(id string) int {
		if i := slices.Index(ring, id); i >= 0 {
			return i
		}
		return len(ring)
	}
	slices.SortFunc(st.Keys, func(a, b queue.KeyCount) int {
		if c := rank(a.KeyID) - rank(b.KeyID); c != 0 {
			return c
		}
		return strings.Compare(a.KeyID, b.KeyID)
	})
	if len(st.Keys) == 0 {
		st.Keys = nil
	}
	st.PlainEvents = c.PlainEvents(st.Events)
}

// SealCounts is what a store counts of its sealed values: Values per key
// id, the ordering-key secret included, and the sealed Events among them.
// A Store fills it from its rows of folded counts (Add) and its stored
// secret (AddSecret), for SetSealStats and Remaining.
type SealCounts struct {
	Values map[string]int64
	Events int64
}

// Add counts n sealed values of kind ("event" or "text") under key id.
func (c *SealCounts) Add(id, kind string, n int64) {
	if c.Values == nil {
		c.Values = make(map[string]int64)
	}
	c.Values[id] += n
	if kind == "event" {
		c.Events += n
	}
}

// AddSecret counts the stored ordering-key secret under its key, when it
// is sealed.
func (c *SealCounts) AddSecret(stored []byte) {
	if id := SecretKey(stored); id != "" {
		c.Add(id, "secret", 1)
	}
}

// PlainEvents returns how many of a store's events are plain.
func (c SealCounts) PlainEvents(events int64) int64 { return max(events-c.Events, 0) }

// SecretKey returns the key id the stored ordering-key secret is sealed
// under, "" when it is plain.
func SecretKey(stored []byte) string {
	if len(stored) == seal.HashSecretSize {
		return ""
	}
	return KeyOf(stored)
}
