package signature

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"sync"
)

// SendGrid's signed Event Webhook signs the timestamp followed by the body
// with ECDSA P-256 and SHA-256; the ASN.1 DER signature travels in base64
// and the public key is shown as base64 DER
// (https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features).
// The body is a JSON array of events, so the delivery id is the body hash
// unless an override says otherwise.
const (
	headerSendGridSignature = "X-Twilio-Email-Event-Webhook-Signature"
	headerSendGridTimestamp = "X-Twilio-Email-Event-Webhook-Timestamp"
)

// maxDERSignature bounds a DER ECDSA P-256 signature: two 33-byte integers
// with their headers.
const maxDERSignature = 72

var (
	sendgridSignatureErrors = newHeaderErrors(SchemeSendGrid, headerSendGridSignature)
	sendgridTimestampErrors = newHeaderErrors(SchemeSendGrid, headerSendGridTimestamp)
	sendgridNoMatch         = fmt.Errorf("%s: %w", SchemeSendGrid, ErrNoMatch)
)

func init() {
	register(&scheme{
		Scheme: Scheme{Name: SchemeSendGrid, Keys: KeyPublic},
		build:  buildSendGrid,
		sign:   signSendGrid,
	})
}

// sendgridVerifier verifies X-Twilio-Email-Event-Webhook-Signature. Unlike
// ed25519, ECDSA signs a digest, so the timestamp and body are hashed as
// they are, without assembling a message.
type sendgridVerifier struct {
	base
	keys    []*ecdsa.PublicKey
	hashers sync.Pool // of hash.Hash: SHA-256 states
}

func buildSendGrid(cfg Config, b base) (Verifier, error) {
	v := &sendgridVerifier{base: b}
	for i, s := range cfg.PublicKeys {
		k, err := parseP256Public(s)
		if err != nil {
			return nil, fmt.Errorf("PublicKeys[%d]: %w", i, err)
		}
		v.keys = append(v.keys, k)
	}
	v.hashers.New = func() any { return &macState{h: sha256.New()} }
	return v, nil
}

// Verify implements Verifier.
func (v *sendgridVerifier) Verify(req Request) (Result, error) {
	ts, err := sendgridTimestampErrors.get(req.Header, headerSendGridTimestamp)
	if err != nil {
		return Result{}, err
	}
	unix, ok := parseUnix(ts)
	if !ok {
		return Result{}, sendgridTimestampErrors.malformed
	}
	value, err := sendgridSignatureErrors.get(req.Header, headerSendGridSignature)
	if err != nil {
		return Result{}, err
	}
	var sig [maxDERSignature]byte
	if len(value) > base64.StdEncoding.EncodedLen(maxDERSignature) {
		return Result{}, sendgridSignatureErrors.malformed
	}
	n, err := base64.StdEncoding.Decode(sig[:], []byte(value))
	if err != nil || n == 0 {
		return Result{}, sendgridSignatureErrors.malformed
	}
	st := v.hashers.Get().(*macState)
	st.h.Reset()
	st.scratch = st.scratch[:0]
	st.writeString(ts)
	st.write(req.Body)
	digest := st.finish()
	index := -1
	for i, k := range v.keys {
		if ecdsa.VerifyASN1(k, digest, sig[:n]) {
			index = i
			break
		}
	}
	v.hashers.Put(st)
	if index < 0 {
		return Result{}, sendgridNoMatch
	}
	if err := v.checkTime(unix); err != nil {
		return Result{}, err
	}
	return v.meta.result(index, req.Header, req.Body, ""), nil
}

func signSendGrid(key string, body []byte, opts SignOptions) (http.Header, error) {
	priv, err := parseP256Private(key)
	if err != nil {
		return nil, err
	}
	unix := opts.unixString()
	digest := sha256.Sum256(append([]byte(unix), body...))
	sig, err := ecdsa.SignASN1(rand.Reader, priv, digest[:])
	if err != nil {
		return nil, fmt.Errorf("sign with ECDSA: %w", err)
	}
	h := http.Header{}
	h.Set(headerSendGridTimestamp, unix)
	h.Set(headerSendGridSignature, base64.StdEncoding.EncodeToString(sig))
	return h, nil
}

var _ Verifier = (*sendgridVerifier)(nil)
