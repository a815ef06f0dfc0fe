package signature

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// Mailgun puts its signature inside the JSON body, in a signature object:
// timestamp (unix seconds), token (a random string) and signature, the
// HMAC-SHA256 in hex of timestamp and token concatenated, keyed with the
// HTTP webhook signing key; a subaccount's events carry parent-signature
// too, the same MAC with the primary account's key, and either verifies
// (https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks).
//
// The event data is not signed: the MAC proves that Mailgun issued the
// token at that time, not that the rest of the body is Mailgun's. So the
// delivery id is the signed token, and one signature admits one event: a
// captured request replayed with other event data is a duplicate of the
// first, and a token older than the tolerance is refused. The event type
// is event-data.event. The legacy form-encoded webhooks are not supported.
//
// Mailgun counts only 200 as delivered and retries anything else, 202
// included, for 8 hours (…/webhooks/webhook-retries), hence AcceptStatus.
func init() {
	register(&scheme{
		Scheme: Scheme{Name: "mailgun", Keys: KeySecrets, AcceptStatus: http.StatusOK},
		build: func(_ Config, b base) (Verifier, error) {
			return &mailgunVerifier{base: b}, nil
		},
		sign:     errUseSignBody,
		signBody: signMailgun,
		id:       []source{signedID()},
		typ:      []source{field("event-data.event")},
	})
}

// Static so that refusing a request allocates nothing.
var (
	mailgunNotObject    = fmt.Errorf("mailgun: body: %w", ErrMalformedHeader)
	mailgunNoSignature  = fmt.Errorf("mailgun: signature: %w", ErrMissingHeader)
	mailgunBadSignature = fmt.Errorf("mailgun: signature: %w", ErrMalformedHeader)
	mailgunNoMatch      = fmt.Errorf("mailgun: %w", ErrNoMatch)
	mailgunTopKeys      = []string{"signature"}
)

// maxMailgunToken bounds the token; Mailgun's are 50 characters.
const maxMailgunToken = 1 << 10

type mailgunVerifier struct {
	base
}

// Verify implements Verifier.
func (v *mailgunVerifier) Verify(req Request) (Result, error) {
	var raws [1][]byte
	if !lookupJSONRaw(req.Body, mailgunTopKeys, raws[:]) {
		return Result{}, mailgunNotObject
	}
	obj := raws[0]
	if obj == nil {
		return Result{}, mailgunNoSignature
	}
	if obj[0] != '{' {
		return Result{}, mailgunBadSignature
	}
	tsRaw, tokenRaw := jsonAt(obj, "timestamp"), jsonAt(obj, "token")
	macs := [2][]byte{jsonAt(obj, "signature"), jsonAt(obj, "parent-signature")}
	if tsRaw == nil || tokenRaw == nil || macs[0] == nil && macs[1] == nil {
		return Result{}, mailgunNoSignature
	}
	ts, okTS := jsonScalar(tsRaw)
	token, okToken := jsonScalar(tokenRaw)
	unix, err := strconv.ParseInt(ts, 10, 64)
	if !okTS || err != nil || unix < 0 || !okToken || tokenRaw[0] != '"' || token == "" || len(token) > maxMailgunToken {
		return Result{}, mailgunBadSignature
	}
	var sigs sigSet
	sigs.size = sha256.Size
	for _, raw := range macs {
		if raw == nil {
			continue
		}
		if len(raw) != 2+2*sha256.Size || raw[0] != '"' {
			return Result{}, mailgunBadSignature
		}
		if _, err := hex.Decode(sigs.slot(), raw[1:len(raw)-1]); err != nil {
			return Result{}, mailgunBadSignature
		}
		sigs.commit()
	}
	index, ok := v.find(&sigs, nil, ts, token)
	if !ok {
		return Result{}, mailgunNoMatch
	}
	if err := v.checkTime(unix); err != nil {
		return Result{}, err
	}
	return v.meta.result(index, req.Header, req.Body, token), nil
}

// signMailgun sets body's signature object: opts.ID is the token (a random
// one when empty), opts.Timestamp the timestamp.
func signMailgun(key string, body []byte, opts SignOptions) ([]byte, error) {
	m, err := jsonObject(body)
	if err != nil {
		return nil, err
	}
	token := opts.ID
	if token == "" {
		token = rand.Text() + rand.Text()
	}
	ts := opts.unixString()
	sig, _ := json.Marshal(map[string]string{
		"timestamp": ts, "token": token,
		"signature": hexMAC(sha256.New, []byte(key), nil, ts, token),
	})
	m["signature"] = sig
	return json.Marshal(m)
}

var _ Verifier = (*mailgunVerifier)(nil)
