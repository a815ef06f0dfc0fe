// Package signature verifies signed webhook requests: GitHub, Stripe,
// Standard Webhooks (Svix, Polar; HMAC v1 and ed25519 v1a), Slack, Shopify,
// GitLab, Discord, SendGrid, Telnyx, Twilio, Contentful, Netlify, Plaid,
// Mailgun, Microsoft Graph,
// the Standard Webhooks senders by name (svix, clerk, resend, polar, brex, gitlabsigned),
// the providers whose presets run on the signed-content engine (Paddle,
// Linear, Lemon Squeezy, Notion, …) and a generic hmac scheme, with several keys for rotation, timestamp tolerance in both
// directions and the delivery id and event type of each request.
//
// It imports only the standard library. Verify before parsing: nothing reads
// the body as JSON until its signature has verified, except for the two
// schemes whose credential is inside the body (mailgun, msgraph), which
// read that credential, and nothing else, to verify.
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
//	res, err := v.Verify(signature.Request{Method: r.Method, Header: r.Header, Body: body})
//	switch {
//	case errors.Is(err, signature.ErrTimestamp):
//		// a genuine signature outside the tolerance: replay or clock skew
//	case err != nil:
//		// missing or malformed header, or no signature matches
//	}
//
// Request.URL, the public URL the sender signed, is needed only when
// UsesURL(v) says so. Result.DeliveryID is the id to deduplicate on: the
// scheme's id (a header, the signed webhook-id, or a JSON field such as
// Stripe's id), a configured override, or "sha256:" and the hex SHA-256 of
// the body when the request carries none.
//
// # Schemes
//
//	github    X-Hub-Signature-256: sha256=<hex>     HMAC-SHA256(body)
//	stripe    Stripe-Signature: t=<unix>,v1=<hex>   HMAC-SHA256("<t>.<body>"), key = secret as given
//	standard  webhook-id, webhook-timestamp,        v1: HMAC-SHA256("<id>.<ts>.<body>"), key = base64
//	          webhook-signature: v1,<b64> …         after "whsec_" (SecretMode: base64, raw, both);
//	                                                v1a: ed25519, PublicKeys "whpk_<b64>";
//	                                                svix-* headers accepted too
//	slack     X-Slack-Signature: v0=<hex>,          HMAC-SHA256("v0:<ts>:<body>"); answers
//	          X-Slack-Request-Timestamp             url_verification (Handshaker)
//	shopify   X-Shopify-Hmac-Sha256: <b64>          HMAC-SHA256(body)
//	gitlab    X-Gitlab-Token: <secret>              constant-time comparison
//	discord   X-Signature-Ed25519: <hex>,           ed25519("<ts><body>"), PublicKeys in hex
//	          X-Signature-Timestamp
//	telnyx    telnyx-signature-ed25519: <b64>,      ed25519("<ts>|<body>"), PublicKeys in base64
//	          telnyx-timestamp
//	sendgrid  X-Twilio-Email-Event-Webhook-…        ECDSA P-256 SHA-256("<ts><body>"), DER in
//	          Signature, …-Timestamp                base64; PublicKeys base64 DER or PEM
//	twilio    X-Twilio-Signature: <b64>             HMAC-SHA1(URL + sorted form name+value), or
//	                                                of the URL with bodySHA256 for JSON bodies
//	contentful X-Contentful-Signature: <hex>,       HMAC-SHA256("<method>\n<path>\n<headers>\n
//	          X-Contentful-Signed-Headers,          <body>"), the listed headers sorted, the
//	          X-Contentful-Timestamp (ms)           path and query as Contentful encodes them
//	netlify   X-Webhook-Signature: <JWS>            HS256 JWS, claim sha256 = hex SHA-256(body)
//	plaid     Plaid-Verification: <JWT>             ES256 JWT, request_body_sha256 and iat;
//	                                                PublicKeys as JWK (kid-bound) or PEM
//	mailgun   body signature.timestamp, .token,     HMAC-SHA256(timestamp + token), hex; the
//	          .signature (or .parent-signature)     rest of the body is not signed; id = token
//	msgraph   body value[].clientState              every item's compared with the secrets in
//	                                                constant time; answers ?validationToken=
//	svix, clerk, resend, polar, brex, gitlabsigned  the standard scheme under the sender's
//	                                                name: its secret form, type and headers
//	hmac      Config.SignatureHeader                the signed-content engine, by hand
//	<preset>  paddle, linear, lemonsqueezy, …       the engine, with the provider's values
//
// # The signed-content engine
//
// Most senders sign an HMAC over some arrangement of the body, a timestamp,
// an id, the URL, the method and headers, and send it in a header with some
// encoding. Config's engine fields describe that arrangement: SignedContent
// is a template such as "{timestamp}.{body}", compiled once by New; the
// timestamp comes from TimestampHeader or from a key of the signature
// header (TimestampKey, as Stripe's t=), in unix seconds, milliseconds or
// RFC 3339, or from a field of the verified body (TimestampField, as
// Linear's webhookTimestamp); SignatureSyntax reads one MAC
// (plain), a list, or key=value pairs; Algorithm and Encoding say how the
// MAC is made and written. Verify streams the template's parts into the MAC
// without concatenating them with the body.
//
// # Adding a provider
//
// A provider whose signature the engine can describe is a preset: one file,
// named for the provider, that registers a Preset from its init function,
// and its vectors. For example, paddle.go:
//
//	func init() {
//		registerPreset(Preset{
//			Name: "paddle",
//			Defaults: Config{
//				SignatureHeader: "Paddle-Signature",
//				SignatureSyntax: "pairs", SignatureKey: "h1", TimestampKey: "ts",
//				SignedContent:   "{timestamp}:{body}",
//				DeliveryIDField: "event_id", EventTypeField: "event_type",
//			},
//			PairSeparator: ";",
//		})
//	}
//
// Cite the provider's documentation in the file's comment. Add a vector to
// providerVectors (providers_test.go): a signature computed with openssl
// from the documented algorithm, not with Sign, and the page it follows.
// TestEveryScheme then checks that Sign and Verify agree for the new name,
// and the receiver picks up its Forward headers through Lookup: nothing
// else changes.
//
// A provider the engine cannot describe (Twilio's sorted form parameters,
// an asymmetric signature) gets a scheme of its own: one file that calls
// register with a scheme value holding its build (the Verifier, from a
// validated Config and the shared base: keys, clock, id and type chains),
// its sign, its id and type sources and its forwarded headers. A scheme
// that signs the request URL sets signsURL, so Config.PublicURL is
// accepted, and reads Request.URL (or PublicURL) in Verify. A scheme whose
// credential travels inside the body sets signBody (SignBody calls it;
// Sign refuses such a scheme), and one whose sender treats 202 as a
// failure sets Scheme.AcceptStatus (mailgun.go).
//
// # Adding a handshake
//
// Some senders check an endpoint before sending events: Slack posts a
// signed url_verification and wants its challenge back, others send a GET
// with a challenge or echo a secret header. A scheme answers them with a
// handshake function (the handshake field of scheme, or Preset.Handshake),
// given its own verifier and the request; New then returns a Verifier that
// is also a Handshaker. The function must
//
//   - return ok=false, quickly and without parsing the body, for requests
//     that are not handshakes (a plain byte search is fine);
//   - verify a signed handshake with the verifier before reading its body,
//     and return Verify's error (ErrNoMatch for a forgery);
//   - answer with a HandshakeResponse: status, content type, body, extra
//     headers.
//
// Set GETHandshake (Preset.GETHandshake) when the handshake arrives as a
// GET, so the receiver lets GET requests through to it. A POST handshake
// that is unsigned (asana.go, woocommerce.go) also sets UnsignedHandshake,
// which CheckHeaders consults so that it is not refused before its body is
// read. A handshake that signs a challenge with the event key (zoom.go,
// x.go) must keep challenges and events apart, so that no answer is an
// event's signature. slack.go is the model.
//
// # Errors
//
// Verify returns errors wrapping ErrMissingHeader, ErrMalformedHeader,
// ErrNoMatch or ErrTimestamp. Timestamps are checked after the signature, so
// ErrTimestamp is only returned for a request whose signature verified: a
// forged request is ErrNoMatch whatever its timestamp. No error text
// contains a secret, a key, a MAC, a header value or body bytes.
//
// # Cost
//
// Header values longer than MaxHeaderLen and headers with more than
// MaxSignatures signatures are rejected before any MAC is computed. Keyed
// HMAC states are pooled per secret, signatures are decoded on the stack and
// the signed content is written into the MAC part by part, never
// concatenated with the body; a warm Verify of an HMAC scheme allocates
// nothing but the strings of its Result that do not already exist as header
// values. ed25519 needs its message whole, so it is assembled in a pooled
// buffer; crypto/ed25519 allocates an error for each key that does not
// verify, and ECDSA allocates as crypto/ecdsa does.
package signature
