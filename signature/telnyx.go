package signature

// Telnyx (API v2) signs with ed25519 over "<timestamp>|<body>", the
// signature in base64 in telnyx-signature-ed25519 and the unix timestamp
// in telnyx-timestamp; the account's public key is shown in base64
// (https://developers.telnyx.com/docs/development/api-fundamentals/webhooks).
// The event id and type are nested under data, so the delivery id is the
// body hash unless an override says otherwise.
const (
	headerTelnyxSignature = "Telnyx-Signature-Ed25519"
	headerTelnyxTimestamp = "Telnyx-Timestamp"
)

func init() {
	newEdScheme(SchemeTelnyx, headerTelnyxSignature, headerTelnyxTimestamp, "|", false).register(nil, nil)
}
