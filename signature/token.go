package signature

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
)

// tokenVerifier compares a header that carries the shared secret itself
// (GitLab's X-Gitlab-Token, Okta's Authorization) with each secret. It
// compares SHA-256 digests in constant time, so neither the secret's bytes
// nor its length show in the timing.
type tokenVerifier struct {
	base
	header  string              // canonical
	digests [][sha256.Size]byte // of each secret
	hasher  macKey              // pooled plain SHA-256 states, not keyed
	errors  headerErrors
	noMatch error
}

func newTokenVerifier(b base, secrets []string, scheme, header string) *tokenVerifier {
	v := &tokenVerifier{
		base: b, header: header, digests: make([][sha256.Size]byte, len(secrets)),
		errors:  newHeaderErrors(scheme, header),
		noMatch: fmt.Errorf("%s: %w", scheme, ErrNoMatch),
	}
	for i, s := range secrets {
		v.digests[i] = sha256.Sum256([]byte(s))
	}
	v.hasher.pool.New = func() any { return &macState{h: sha256.New()} }
	return v
}

// Verify implements Verifier.
func (v *tokenVerifier) Verify(req Request) (Result, error) {
	token, err := v.errors.get(req.Header, v.header)
	if err != nil {
		return Result{}, err
	}
	index, ok := v.match(token)
	if !ok {
		return Result{}, v.noMatch
	}
	return v.meta.result(index, req.Header, req.Body, ""), nil
}

// match returns the index of the secret equal to token.
func (v *tokenVerifier) match(token string) (int, bool) {
	// The token goes in as the head: mac copies it into the state's
	// scratch buffer, since converting it to []byte would allocate.
	st, sum := v.hasher.mac(nil, token)
	index := -1
	for i := range v.digests {
		if subtle.ConstantTimeCompare(sum, v.digests[i][:]) == 1 && index < 0 {
			index = i
		}
	}
	v.hasher.put(st)
	return index, index >= 0
}

var _ Verifier = (*tokenVerifier)(nil)
