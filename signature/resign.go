package signature

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
)

// Signing again: a receiver verified a delivery with the provider's secret
// and stored it; a target forwards it to a handler that verifies it with
// the provider's own SDK. Resign signs it as the provider did, with a
// secret the operator chose and the handler is configured with, at the
// time of the attempt, so a retry hours later is as fresh as the first.

// ErrCannotResign is returned for a scheme whose signature no one but the
// provider can make: an asymmetric one, signed with the provider's private
// key and verified with its public key (Discord's and Telnyx's ed25519,
// SendGrid's ECDSA, Plaid's JWS).
var ErrCannotResign = errors.New("only the provider can sign as this scheme")

// CanResign reports whether deliveries of scheme can be signed again with
// a secret of the operator's: nil for every scheme keyed with a shared
// secret, ErrCannotResign (wrapped, naming the scheme) for the asymmetric
// ones, and an error for an unknown scheme.
func CanResign(scheme string) error {
	s, err := lookup(scheme)
	if err != nil {
		return err
	}
	if s.Keys == KeyPublic {
		return fmt.Errorf("%w: %s signs with the provider's private key and a handler verifies it with the provider's public key, "+
			"so no secret of yours can make a signature the handler accepts; sign the forwarded requests with a secret of your own (Standard Webhooks) instead",
			ErrCannotResign, scheme)
	}
	return nil
}

// Resign signs a stored delivery again as the scheme's sender signed it,
// with key, a secret of the operator's. opts.Header holds the headers
// stored with the delivery (its Content-Type and the scheme's Forward
// headers: the event type and delivery id headers as the sender sent
// them); opts.ID and opts.EventType are the delivery id and event type the
// receiver read, used where the stored headers do not carry them (the
// signed id of Standard Webhooks); opts.Timestamp is the time of the
// attempt and opts.URL the URL the request goes to (Twilio signs it).
//
// It returns the body to send, which differs from body only for the
// schemes whose credential travels inside it (Mailgun, Microsoft Graph),
// and every header to send: the stored ones, the signature's, and those
// the sender always adds that the stored ones lack. No id is made up: a
// delivery keeps the one it came with, so the handler's own deduplication
// holds across attempts.
func Resign(scheme, key string, body []byte, opts SignOptions) ([]byte, http.Header, error) {
	if err := CanResign(scheme); err != nil {
		return nil, nil, fmt.Errorf("sign: %w", err)
	}
	s := registry[scheme]
	if len(s.id) == 0 || s.id[0].kind == fromField {
		// The body holds the id, or there is none (the body's hash).
		opts.ID = ""
	} else if s.id[0].kind == fromHeader {
		if id := s.headerID(opts.Header); id != "" {
			opts.ID = id
		} else if s.carriesID(opts.Header) {
			// A later header of the chain names the delivery (Shopify's
			// webhook id without an event id): Sign must not write the
			// receiver's id into the first.
			opts.ID = ""
		}
	}
	if len(s.typ) > 0 && s.typ[0].kind == fromHeader {
		if typ := opts.Header.Get(s.typ[0].name); typ != "" {
			opts.EventType = typ
		}
	}
	return s.signAs(key, body, opts, false)
}

// carriesID reports whether h holds any header the scheme reads its
// delivery id from.
func (s *scheme) carriesID(h http.Header) bool {
	for _, src := range s.id {
		if src.kind == fromHeader && h.Get(src.name) != "" {
			return true
		}
	}
	return false
}

// NewSecret returns a fresh random secret for scheme in the form its
// providers issue and their SDKs expect, for a handler's configuration:
// "whsec_" and base64 for the Standard Webhooks senders, "whsec_" and hex
// for Stripe (its CLI's form; Stripe keys with the whole string), base64
// for a preset whose secrets are (Airtable), 64 hex
// digits for the others (GitHub's advice for a webhook secret; Slack's,
// Shopify's and Twilio's secrets are hex too, and their SDKs key with the
// string's bytes). The asymmetric schemes have no secret to make.
func NewSecret(scheme string) (string, error) {
	if err := CanResign(scheme); err != nil {
		return "", err
	}
	s := registry[scheme]
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand panics rather)
	switch {
	case s.preset != nil && s.preset.SecretBase64:
		// Airtable hands out its MAC secret in base64.
		return base64.StdEncoding.EncodeToString(b), nil
	case s.secretMode != "":
		// 24 bytes, as Svix's own secrets.
		return "whsec_" + base64.StdEncoding.EncodeToString(b[:24]), nil
	case scheme == SchemeStripe:
		return "whsec_" + hex.EncodeToString(b), nil
	}
	return hex.EncodeToString(b), nil
}
