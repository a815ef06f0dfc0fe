package signature

import (
	"cmp"
	"errors"
	"net/http"
	"testing"
	"time"
)

// presetVector is a provider's test vector and what the preset must make
// of it. Each provider's test file lists its vectors and runs them with
// checkPreset.
type presetVector struct {
	name   string
	cfg    Config // Scheme, Secrets and, for a timestamped vector, Now at its time
	method string // default POST
	url    string // Request.URL, for a preset that signs it
	header http.Header
	body   string
	want   Result

	// stale, when set, moves the clock by that much, after which the
	// vector must be ErrTimestamp: a preset with a timestamp must refuse
	// a replay outside its tolerance.
	stale time.Duration
}

// checkPreset holds a preset to its vector: accepted with the wanted
// Result; every one-byte change of the body refused with ErrNoMatch; stale
// refused with ErrTimestamp when the preset has a timestamp; and Sign
// with the matching secret makes a request that verifies to the same id
// and type.
func checkPreset(t *testing.T, tc presetVector) {
	t.Helper()
	v := setup(t, tc.cfg)
	req := Request{Method: cmp.Or(tc.method, http.MethodPost), URL: tc.url, Header: tc.header, Body: []byte(tc.body)}
	got, err := v.Verify(req)
	if err != nil {
		t.Fatalf("Verify of the vector: %v", err)
	}
	if got != tc.want {
		t.Errorf("Verify = %+v, want %+v", got, tc.want)
	}
	for i := range len(tc.body) {
		b := []byte(tc.body)
		b[i] ^= 0x01
		r := req
		r.Body = b
		if _, err := v.Verify(r); !errors.Is(err, ErrNoMatch) {
			t.Fatalf("body byte %d changed: err = %v, want ErrNoMatch", i, err)
		}
	}
	if tc.stale != 0 {
		cfg := tc.cfg
		now := tc.cfg.Now
		if now == nil {
			now = time.Now
		}
		cfg.Now = func() time.Time { return now().Add(tc.stale) }
		if _, err := setup(t, cfg).Verify(req); !errors.Is(err, ErrTimestamp) {
			t.Errorf("clock moved by %s: err = %v, want ErrTimestamp", tc.stale, err)
		}
	}

	// Sign round trip, at the vector's time, with the header-borne id and
	// type the vector has (a body-borne one comes with the body).
	opts := SignOptions{Method: req.Method, URL: cmp.Or(tc.cfg.PublicURL, tc.url), EventType: tc.want.EventType}
	if tc.want.DeliveryID != bodyID([]byte(tc.body)) {
		opts.ID = tc.want.DeliveryID
	}
	if tc.cfg.Now != nil {
		opts.Timestamp = tc.cfg.Now()
	}
	h, err := Sign(tc.cfg.Scheme, tc.cfg.Secrets[tc.want.SecretIndex], []byte(tc.body), opts)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	signed := req
	signed.Header = h
	if got, err := v.Verify(signed); err != nil || got != tc.want {
		t.Errorf("Verify of Sign's request = %+v, %v; want %+v (headers %v)", got, err, tc.want, h)
	}
}

// clockAtRFC3339 is a clock stopped at an RFC 3339 time.
func clockAtRFC3339(t *testing.T, ts string) func() time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, ts)
	if err != nil {
		t.Fatal(err)
	}
	return func() time.Time { return at }
}
