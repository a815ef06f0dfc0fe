package signature

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
)

// Discord and Telnyx sign with ed25519 over the timestamp and the body:
// one signature header, one timestamp header, a separator between them.
// They differ in names, separator and encoding, so one verifier serves
// both, configured by an edScheme.
type edScheme struct {
	name      string
	sigHeader string // canonical
	tsHeader  string // canonical
	sep       string // between timestamp and body
	hexSig    bool   // else base64
	sigErrors headerErrors
	tsErrors  headerErrors
	noMatch   error
	handshake func(v Verifier, req Request) (HandshakeResponse, bool, error)
	// acceptStatus is Scheme.AcceptStatus; 0 for the default.
	acceptStatus int
}

func newEdScheme(name, sigHeader, tsHeader, sep string, hexSig bool) *edScheme {
	return &edScheme{
		name: name, sigHeader: sigHeader, tsHeader: tsHeader, sep: sep, hexSig: hexSig,
		sigErrors: newHeaderErrors(name, sigHeader),
		tsErrors:  newHeaderErrors(name, tsHeader),
		noMatch:   fmt.Errorf("%s: %w", name, ErrNoMatch),
	}
}

// register adds the scheme with its id and event type sources.
func (s *edScheme) register(id, typ []source) {
	register(&scheme{
		Scheme: Scheme{Name: s.name, Keys: KeyPublic, AcceptStatus: s.acceptStatus},
		build: func(cfg Config, b base) (Verifier, error) {
			keys, err := parseEd25519Keys(cfg.PublicKeys)
			if err != nil {
				return nil, err
			}
			return &edVerifier{base: b, scheme: s, keys: keys}, nil
		},
		sign:      s.sign,
		handshake: s.handshake,
		id:        id,
		typ:       typ,
	})
}

// edVerifier verifies an edScheme's requests.
type edVerifier struct {
	base
	scheme *edScheme
	keys   []ed25519.PublicKey
}

// Verify implements Verifier.
func (v *edVerifier) Verify(req Request) (Result, error) {
	s := v.scheme
	ts, err := s.tsErrors.get(req.Header, s.tsHeader)
	if err != nil {
		return Result{}, err
	}
	unix, ok := parseUnix(ts)
	if !ok {
		return Result{}, s.tsErrors.malformed
	}
	value, err := s.sigErrors.get(req.Header, s.sigHeader)
	if err != nil {
		return Result{}, err
	}
	var sig [1][ed25519.SignatureSize]byte
	if s.hexSig {
		ok = decodeHex(sig[0][:], value)
	} else {
		ok = decodeBase64(sig[0][:], value)
	}
	if !ok {
		return Result{}, s.sigErrors.malformed
	}
	index, ok := verifyEd25519(v.keys, sig[:], req.Body, ts, s.sep)
	if !ok {
		return Result{}, s.noMatch
	}
	if err := v.checkTime(unix); err != nil {
		return Result{}, err
	}
	return v.meta.result(index, req.Header, req.Body, ""), nil
}

func (s *edScheme) sign(key string, body []byte, opts SignOptions) (http.Header, error) {
	priv, err := parseEd25519Private(key)
	if err != nil {
		return nil, err
	}
	unix := opts.unixString()
	sig := ed25519.Sign(priv, append([]byte(unix+s.sep), body...))
	h := http.Header{}
	h.Set(s.tsHeader, unix)
	if s.hexSig {
		h.Set(s.sigHeader, hex.EncodeToString(sig))
	} else {
		h.Set(s.sigHeader, base64.StdEncoding.EncodeToString(sig))
	}
	return h, nil
}

var _ Verifier = (*edVerifier)(nil)
