// Package signature verifies signed webhook requests: GitHub, Stripe,
// Standard Webhooks (Svix, Polar), Slack, Shopify, GitLab and a generic HMAC
// scheme, with several secrets for rotation, timestamp tolerance in both
// directions and the delivery id and event type of each request.
//
// It imports only the standard library. Verify before parsing: nothing reads
// the body as JSON until its signature has verified.
//
// # Use
//
// Build one Verifier per endpoint with New and call Verify for each request
// with the raw body bytes, exactly as received:
//
//	v, err := signature.New(signature.Config{
//		Scheme:  signature.SchemeStripe,
//		Secrets: []string{newSecret, oldSecret}, // rotation: first that verifies wins
//	})
//	...
//	res, err := v.Verify(r.Header, body)
//	switch {
//	case errors.Is(err, signature.ErrTimestamp):
//		// a genuine signature outside the tolerance: replay or clock skew
//	case err != nil:
//		// missing or malformed header, or no signature matches
//	}
//
// Result.DeliveryID is the id to deduplicate on: the scheme's id (a header,
// the signed webhook-id, or Stripe's JSON id), a configured override, or
// "sha256:" and the hex SHA-256 of the body when the request carries none.
//
// # Schemes
//
//	github    X-Hub-Signature-256: sha256=<hex>     HMAC-SHA256(body)
//	stripe    Stripe-Signature: t=<unix>,v1=<hex>   HMAC-SHA256("<t>.<body>"), key = secret as given
//	standard  webhook-id, webhook-timestamp,        HMAC-SHA256("<id>.<ts>.<body>"), key = base64
//	          webhook-signature: v1,<b64> …         after "whsec_" (SecretMode: base64, raw, both);
//	                                                svix-* headers accepted too
//	slack     X-Slack-Signature: v0=<hex>,          HMAC-SHA256("v0:<ts>:<body>")
//	          X-Slack-Request-Timestamp
//	shopify   X-Shopify-Hmac-Sha256: <b64>          HMAC-SHA256(body)
//	gitlab    X-Gitlab-Token: <secret>              constant-time comparison
//	hmac      Config.SignatureHeader                HMAC-SHA256/SHA1/SHA512(body), hex or base64,
//	                                                optional prefix
//
// # Errors
//
// Verify returns errors wrapping ErrMissingHeader, ErrMalformedHeader,
// ErrNoMatch or ErrTimestamp. Timestamps are checked after the MAC, so
// ErrTimestamp is only returned for a request whose signature verified: a
// forged request is ErrNoMatch whatever its timestamp. No error text
// contains a secret, a MAC, a header value or body bytes.
//
// # Cost
//
// Header values longer than MaxHeaderLen and headers with more than
// MaxSignatures signatures are rejected before any MAC is computed. Keyed
// HMAC states are pooled per secret, signatures are decoded on the stack and
// the signed prefix is written into the MAC, never concatenated with the
// body; a warm Verify allocates nothing but the strings of its Result that
// do not already exist as header values.
package signature
