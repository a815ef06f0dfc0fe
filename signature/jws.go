package signature

import (
	"encoding/base64"
	"strings"
)

// Netlify and Plaid sign with a compact JWS, header.payload.signature in
// base64url, whose payload carries the SHA-256 of the body; each checks its
// own algorithm, key and claims.

// jws is a compact JWS split and decoded. Its header and claims are read
// only after the signature verified, except the header's alg and kid.
type jws struct {
	signingInput string // "<header>.<payload>" as sent: what is signed
	header       []byte // decoded JSON
	claims       []byte // decoded JSON
	sig          []byte // decoded signature
}

// jwsEncoding is base64url without padding, refusing stray trailing bits so
// that each part has one spelling.
var jwsEncoding = base64.RawURLEncoding.Strict()

// parseJWS splits value into its three parts and decodes them; it reports
// false for anything that is not three base64url parts with a signature of
// sigSize bytes.
func parseJWS(value string, sigSize int) (jws, bool) {
	h, rest, ok1 := strings.Cut(value, ".")
	p, s, ok2 := strings.Cut(rest, ".")
	// The decoder skips line breaks: refuse them so each part has one
	// spelling.
	if !ok1 || !ok2 || h == "" || p == "" || strings.ContainsAny(value, "\r\n") || strings.IndexByte(s, '.') >= 0 {
		return jws{}, false
	}
	var t jws
	var err error
	if t.header, err = jwsEncoding.DecodeString(h); err != nil {
		return jws{}, false
	}
	if t.claims, err = jwsEncoding.DecodeString(p); err != nil {
		return jws{}, false
	}
	if t.sig, err = jwsEncoding.DecodeString(s); err != nil || len(t.sig) != sigSize {
		return jws{}, false
	}
	t.signingInput = value[:len(h)+1+len(p)]
	return t, true
}

// jwsFields reads up to maxFields top-level string or number fields of a
// decoded JWS header or claims set; ok is false when it is not a JSON
// object.
func jwsFields(obj []byte, names ...string) (vals [maxFields]string, found [maxFields]bool, ok bool) {
	ok = lookupJSON(obj, names, vals[:len(names)], found[:len(names)])
	return vals, found, ok
}

// encodeJWS is the compact JWS of header and claims signed by sign, for
// Sign.
func encodeJWS(header, claims string, sign func(signingInput []byte) ([]byte, error)) (string, error) {
	input := base64.RawURLEncoding.EncodeToString([]byte(header)) + "." + base64.RawURLEncoding.EncodeToString([]byte(claims))
	sig, err := sign([]byte(input))
	if err != nil {
		return "", err
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}
