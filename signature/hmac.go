package signature

import (
	"fmt"
	"hash"
	"net/http"
	"strings"
)

// hmacVerifier is the generic scheme: a MAC of the raw body in a configured
// header, with a configured algorithm, encoding and optional prefix (Linear,
// and many in-house senders). It carries no timestamp; the delivery id and
// event type come only from the overrides, else the body hash.
type hmacVerifier struct {
	base
	header   string
	prefix   string
	encoding encoding
	size     int // MAC bytes
	errors   headerErrors
	noMatch  error
}

func newHMAC(b base, cfg Config, newHash func() hash.Hash) *hmacVerifier {
	enc, _ := encodingFor(cfg.Encoding)
	return &hmacVerifier{
		base:     b,
		header:   http.CanonicalHeaderKey(cfg.SignatureHeader),
		prefix:   cfg.SignaturePrefix,
		encoding: enc,
		size:     newHash().Size(),
		errors:   newHeaderErrors(SchemeHMAC, cfg.SignatureHeader),
		noMatch:  fmt.Errorf("%s: %w", SchemeHMAC, ErrNoMatch),
	}
}

// Verify implements Verifier.
func (v *hmacVerifier) Verify(h http.Header, body []byte) (Result, error) {
	value, err := v.errors.get(h, v.header)
	if err != nil {
		return Result{}, err
	}
	var sigs sigSet
	if err := v.parse(value, &sigs); err != nil {
		return Result{}, err
	}
	index, ok := v.find(&sigs, body)
	if !ok {
		return Result{}, v.noMatch
	}
	return v.meta.result(index, h, body, ""), nil
}

// parse strips the prefix and decodes the MAC.
func (v *hmacVerifier) parse(value string, sigs *sigSet) error {
	sigs.size = v.size
	encoded, ok := strings.CutPrefix(value, v.prefix)
	if !ok {
		return v.errors.malformed
	}
	if v.encoding == encHex {
		ok = decodeHex(sigs.slot(), encoded)
	} else {
		ok = decodeBase64(sigs.slot(), encoded)
	}
	if !ok {
		return v.errors.malformed
	}
	sigs.commit()
	return nil
}

var _ Verifier = (*hmacVerifier)(nil)
