package signature

import (
	"cmp"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
)

// Standard Webhooks (https://www.standardwebhooks.com) sign
// "<id>.<timestamp>.<body>" with HMAC-SHA256. Svix sends the same scheme
// under svix-* header names unless an account is white-labelled, so each
// header is read from the webhook-* family first and the svix-* family next.
const (
	headerStandardID        = "Webhook-Id"
	headerStandardTimestamp = "Webhook-Timestamp"
	headerStandardSignature = "Webhook-Signature"
	headerSvixID            = "Svix-Id"
	headerSvixTimestamp     = "Svix-Timestamp"
	headerSvixSignature     = "Svix-Signature"
)

func init() {
	registerStandard(standardSender{name: SchemeStandard, keys: KeyEither, mode: SecretBase64, typ: []source{field("type")}})
}

// standardSender is a sender that signs the Standard Webhooks way under a
// name of its own (svix.go, polar.go, …): the standard scheme with that
// sender's secret form, event type and Sign headers. The id is always the
// signed webhook-id, and both header families are always accepted.
type standardSender struct {
	name    string
	keys    KeyKind    // KeyEither for senders that sign v1a too, else KeySecrets
	mode    SecretMode // how its secrets become keys; Config.SecretMode overrides it
	svix    bool       // Sign writes the svix-* headers
	typ     []source
	forward []string
}

// registerStandard registers a Standard Webhooks sender.
func registerStandard(s standardSender) {
	register(&scheme{
		Scheme: Scheme{Name: s.name, Keys: s.keys, Forward: s.forward},
		build: func(cfg Config, b base) (Verifier, error) {
			return buildStandard(cfg, b, cmp.Or(cfg.SecretMode, s.mode))
		},
		sign: func(key string, body []byte, opts SignOptions) (http.Header, error) {
			if opts.SecretMode == "" && s.mode != SecretBase64 {
				// As the sender does: with the secret's bytes.
				opts.SecretMode = SecretRaw
			}
			opts.Svix = opts.Svix || s.svix
			return signStandard(key, body, opts)
		},
		id:         []source{signedID()},
		typ:        s.typ,
		secretMode: s.mode,
	})
}

var (
	standardIDErrors        = newHeaderErrors(SchemeStandard, "webhook-id")
	standardTimestampErrors = newHeaderErrors(SchemeStandard, "webhook-timestamp")
	standardSignatureErrors = newHeaderErrors(SchemeStandard, "webhook-signature")
	standardNoMatch         = fmt.Errorf("%s: %w", SchemeStandard, ErrNoMatch)
)

// standardVerifier verifies webhook-signature: v1,<base64> [v1a,<base64> …]:
// v1 entries with the secrets' HMAC keys, v1a (ed25519) entries with the
// public keys. The delivery id is the signed webhook-id; the event type is
// the JSON type.
type standardVerifier struct {
	base
	public []ed25519.PublicKey
}

func buildStandard(cfg Config, b base, mode SecretMode) (Verifier, error) {
	keys, err := standardKeys(cfg.Secrets, mode)
	if err != nil {
		return nil, err
	}
	b.keys = keys
	public, err := parseEd25519Keys(cfg.PublicKeys)
	if err != nil {
		return nil, err
	}
	return &standardVerifier{base: b, public: public}, nil
}

// standardSigs are the decoded entries of one webhook-signature header.
type standardSigs struct {
	v1   sigSet
	nv1a int // v1a entries in v1a
	v1a  [MaxSignatures][ed25519.SignatureSize]byte
}

// Verify implements Verifier.
func (v *standardVerifier) Verify(req Request) (Result, error) {
	h, body := req.Header, req.Body
	id, err := standardIDErrors.get(h, headerStandardID, headerSvixID)
	if err != nil {
		return Result{}, err
	}
	ts, err := standardTimestampErrors.get(h, headerStandardTimestamp, headerSvixTimestamp)
	if err != nil {
		return Result{}, err
	}
	unix, ok := parseUnix(ts)
	if !ok {
		return Result{}, standardTimestampErrors.malformed
	}
	value, err := standardSignatureErrors.get(h, headerStandardSignature, headerSvixSignature)
	if err != nil {
		return Result{}, err
	}
	var sigs standardSigs
	if err := parseStandard(value, &sigs); err != nil {
		return Result{}, err
	}
	index, ok := 0, false
	if sigs.v1.n > 0 {
		index, ok = v.find(&sigs.v1, body, id, ".", ts, ".")
	}
	if !ok && sigs.nv1a > 0 {
		index, ok = verifyEd25519(v.public, sigs.v1a[:sigs.nv1a], body, id, ".", ts, ".")
	}
	if !ok {
		return Result{}, standardNoMatch
	}
	// After the signature, as for Stripe: ErrTimestamp means a genuine
	// request outside the window.
	if err := v.checkTime(unix); err != nil {
		return Result{}, err
	}
	return v.meta.result(index, h, body, id), nil
}

// parseStandard reads the space-separated "<version>,<signature>" list: v1
// (HMAC-SHA256) and v1a (ed25519). Unknown versions, entries without a
// comma and entries that do not decode are skipped. An empty list or one
// with more than MaxSignatures entries is malformed; one with no usable
// entry matches nothing.
func parseStandard(value string, sigs *standardSigs) error {
	sigs.v1.size = sha256.Size
	seen := 0
	for entry := range strings.FieldsSeq(value) {
		if seen++; seen > MaxSignatures {
			return standardSignatureErrors.malformed
		}
		version, sig, ok := strings.Cut(entry, ",")
		switch {
		case !ok:
		case version == "v1" && decodeBase64(sigs.v1.slot(), sig):
			sigs.v1.commit()
		case version == "v1a" && decodeBase64(sigs.v1a[sigs.nv1a][:], sig):
			sigs.nv1a++
		}
	}
	switch {
	case seen == 0:
		return standardSignatureErrors.malformed
	case sigs.v1.n == 0 && sigs.nv1a == 0:
		return standardNoMatch
	}
	return nil
}

// signStandard signs v1 with a secret, or v1a with a "whsk_" private key.
func signStandard(key string, body []byte, opts SignOptions) (http.Header, error) {
	unix := opts.unixString()
	id := opts.ID
	if id == "" {
		id = "msg_" + rand.Text()
	}
	var sig string
	if strings.HasPrefix(key, "whsk_") {
		priv, err := parseEd25519Private(key)
		if err != nil {
			return nil, err
		}
		sig = "v1a," + base64.StdEncoding.EncodeToString(ed25519.Sign(priv, []byte(id+"."+unix+"."+string(body))))
	} else {
		mac, err := signingKey(key, opts.SecretMode)
		if err != nil {
			return nil, err
		}
		sig = "v1," + base64.StdEncoding.EncodeToString(computeMAC(sha256.New, mac, body, id, ".", unix, "."))
	}
	names := [3]string{headerStandardID, headerStandardTimestamp, headerStandardSignature}
	if opts.Svix {
		names = [3]string{headerSvixID, headerSvixTimestamp, headerSvixSignature}
	}
	h := http.Header{}
	h.Set(names[0], id)
	h.Set(names[1], unix)
	h.Set(names[2], sig)
	return h, nil
}

var _ Verifier = (*standardVerifier)(nil)
