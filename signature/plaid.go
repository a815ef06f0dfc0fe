package signature

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"strings"
)

// Plaid signs each webhook with an ES256 JWT in Plaid-Verification whose
// claims hold iat and request_body_sha256, the hex SHA-256 of the body; a
// webhook older than five minutes is refused
// (https://plaid.com/docs/api/webhooks/webhook-verification/). Plaid's
// libraries fetch the key named by the JWT's kid from
// /webhook_verification_key/get with the API credentials; here the keys
// are configured instead, as that endpoint returns them: JWK JSON (kid,
// x, y), or PEM or base64 DER. A JWK with a kid verifies only the JWTs
// that name it, so a rotated key fails closed until it is configured.
// There is no delivery id; the event type is webhook_code.
const (
	headerPlaidVerification = "Plaid-Verification"
	schemePlaid             = "plaid"
)

var (
	plaidErrors       = newHeaderErrors(schemePlaid, headerPlaidVerification)
	plaidNoMatch      = fmt.Errorf("%s: %w", schemePlaid, ErrNoMatch)
	plaidHeaderFields = []string{"alg", "kid"}
	plaidClaimFields  = []string{"iat", "request_body_sha256"}
)

func init() {
	register(&scheme{
		Scheme: Scheme{Name: schemePlaid, Keys: KeyPublic},
		build:  buildPlaid,
		sign:   signPlaid,
		typ:    []source{field("webhook_code")},
	})
}

// plaidKey is a configured key and the kid it answers to ("": any).
type plaidKey struct {
	kid string
	pub *ecdsa.PublicKey
}

type plaidVerifier struct {
	base
	keys []plaidKey
}

func buildPlaid(cfg Config, b base) (Verifier, error) {
	v := &plaidVerifier{base: b}
	for i, s := range cfg.PublicKeys {
		k, err := parsePlaidKey(s)
		if err != nil {
			return nil, fmt.Errorf("PublicKeys[%d]: %w", i, err)
		}
		v.keys = append(v.keys, k)
	}
	return v, nil
}

// parsePlaidKey reads a JWK as /webhook_verification_key/get returns it,
// or a P-256 key in PEM or base64 DER.
func parsePlaidKey(s string) (plaidKey, error) {
	if !strings.HasPrefix(strings.TrimSpace(s), "{") {
		pub, err := parseP256Public(s)
		return plaidKey{pub: pub}, err
	}
	var jwk struct {
		Kty, Crv, Alg, Kid, X, Y string
		ExpiredAt                *json.RawMessage `json:"expired_at"`
	}
	if err := json.Unmarshal([]byte(s), &jwk); err != nil {
		return plaidKey{}, errors.New("not a JWK (JSON)")
	}
	switch {
	case jwk.Kty != "EC" || jwk.Crv != "P-256" || (jwk.Alg != "" && jwk.Alg != "ES256"):
		return plaidKey{}, errors.New("not an ES256 JWK (kty EC, crv P-256)")
	case jwk.ExpiredAt != nil && string(*jwk.ExpiredAt) != "null":
		return plaidKey{}, errors.New("the JWK has expired (expired_at is set)")
	}
	x, errX := jwsEncoding.DecodeString(jwk.X)
	y, errY := jwsEncoding.DecodeString(jwk.Y)
	if errX != nil || errY != nil || len(x) != 32 || len(y) != 32 {
		return plaidKey{}, errors.New("JWK x and y are not 32 bytes of base64url")
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
	if err != nil {
		return plaidKey{}, errors.New("JWK x and y are not a P-256 point")
	}
	return plaidKey{kid: jwk.Kid, pub: pub}, nil
}

// Verify implements Verifier.
func (v *plaidVerifier) Verify(req Request) (Result, error) {
	value, err := plaidErrors.get(req.Header, headerPlaidVerification)
	if err != nil {
		return Result{}, err
	}
	t, ok := parseJWS(value, 64)
	if !ok {
		return Result{}, plaidErrors.malformed
	}
	head, _, ok := jwsFields(t.header, plaidHeaderFields...)
	switch {
	case !ok:
		return Result{}, plaidErrors.malformed
	case head[0] != "ES256":
		return Result{}, plaidNoMatch
	}
	digest := sha256.Sum256([]byte(t.signingInput))
	r, s := new(big.Int).SetBytes(t.sig[:32]), new(big.Int).SetBytes(t.sig[32:])
	index := -1
	for i, k := range v.keys {
		if (k.kid == "" || k.kid == head[1]) && ecdsa.Verify(k.pub, digest[:], r, s) {
			index = i
			break
		}
	}
	if index < 0 {
		return Result{}, plaidNoMatch
	}
	claims, _, _ := jwsFields(t.claims, plaidClaimFields...)
	sum := sha256.Sum256(req.Body)
	var want [2 * sha256.Size]byte
	hex.Encode(want[:], sum[:])
	if subtle.ConstantTimeCompare(want[:], []byte(claims[1])) != 1 {
		return Result{}, plaidNoMatch
	}
	iat, ok := parseUnix(claims[0])
	if !ok {
		return Result{}, plaidErrors.malformed
	}
	if err := v.checkTime(iat); err != nil {
		return Result{}, err
	}
	return v.meta.result(index, req.Header, req.Body, ""), nil
}

// signPlaid signs with a P-256 private key (base64 DER or PEM), without a
// kid.
func signPlaid(key string, body []byte, opts SignOptions) (http.Header, error) {
	priv, err := parseP256Private(key)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	claims := `{"iat":` + opts.unixString() + `,"request_body_sha256":"` + hex.EncodeToString(sum[:]) + `"}`
	token, err := encodeJWS(`{"alg":"ES256","typ":"JWT"}`, claims, func(input []byte) ([]byte, error) {
		digest := sha256.Sum256(input)
		r, s, err := ecdsa.Sign(rand.Reader, priv, digest[:])
		if err != nil {
			return nil, fmt.Errorf("sign with ECDSA: %w", err)
		}
		sig := make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
		return sig, nil
	})
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set(headerPlaidVerification, token)
	return h, nil
}

var _ Verifier = (*plaidVerifier)(nil)
