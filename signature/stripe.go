package signature

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
)

// Stripe signs "<t>.<body>" with HMAC-SHA256 keyed with the secret string's
// bytes as given ("whsec_" included, not decoded). During a secret roll a
// header carries one v1 per active secret.
const headerStripe = "Stripe-Signature"

func init() {
	register(&scheme{
		Scheme: Scheme{Name: SchemeStripe, Keys: KeySecrets},
		build:  func(_ Config, b base) (Verifier, error) { return &stripeVerifier{b}, nil },
		sign:   signStripe,
		id:     []source{field("id")},
		typ:    []source{field("type")},
		sender: Sender{ID: SenderIDStripeEvent},
	})
}

var (
	stripeErrors  = newHeaderErrors(SchemeStripe, headerStripe)
	stripeNoMatch = fmt.Errorf("%s: %w", SchemeStripe, ErrNoMatch)
)

// stripeVerifier verifies Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>…].
// The delivery id and event type are the JSON id and type, read only after
// the signature verified.
type stripeVerifier struct{ base }

// Verify implements Verifier.
func (v *stripeVerifier) Verify(req Request) (Result, error) {
	h, body := req.Header, req.Body
	value, err := stripeErrors.get(h, headerStripe)
	if err != nil {
		return Result{}, err
	}
	var sigs sigSet
	ts, unix, err := parseStripe(value, &sigs)
	if err != nil {
		return Result{}, err
	}
	index, ok := v.find(&sigs, body, ts, ".")
	if !ok {
		return Result{}, stripeNoMatch
	}
	// Checked after the MAC, so ErrTimestamp means a genuine but stale or
	// early request: a replay or a skewed clock, not a forgery.
	if err := v.checkTime(unix); err != nil {
		return Result{}, err
	}
	return v.meta.result(index, h, body, ""), nil
}

// parseStripe reads the comma-separated key=value list. v0 and unknown keys
// are ignored and a v1 that does not decode is skipped, as Stripe's own
// libraries do; a list with no t, two t, an item without '=' or more than
// MaxSignatures signatures is malformed; one with no usable v1 matches
// nothing.
func parseStripe(value string, sigs *sigSet) (ts string, unix int64, err error) {
	sigs.size = sha256.Size
	seen := 0
	haveT := false
	for item := range strings.SplitSeq(value, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return "", 0, stripeErrors.malformed
		}
		if k == "t" {
			if haveT {
				return "", 0, stripeErrors.malformed
			}
			haveT = true
			if unix, ok = parseUnix(v); !ok {
				return "", 0, stripeErrors.malformed
			}
			ts = v
			continue
		}
		if seen++; seen > MaxSignatures {
			return "", 0, stripeErrors.malformed
		}
		if k == "v1" && decodeHex(sigs.slot(), v) {
			sigs.commit()
		}
	}
	if !haveT {
		return "", 0, stripeErrors.malformed
	}
	if sigs.n == 0 {
		return "", 0, stripeNoMatch
	}
	return ts, unix, nil
}

func signStripe(secret string, body []byte, opts SignOptions) (http.Header, error) {
	unix := opts.unixString()
	h := http.Header{}
	h.Set(headerStripe, "t="+unix+",v1="+hexMAC(sha256.New, []byte(secret), body, unix, "."))
	return h, nil
}

var _ Verifier = (*stripeVerifier)(nil)
