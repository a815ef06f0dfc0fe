package signature

// Svix sends Standard Webhooks under its own header names, svix-id,
// svix-timestamp and svix-signature, unless an account has them
// white-labelled to webhook-*; the secret is "whsec_" + base64 and the
// event type is the JSON type
// (https://docs.svix.com/receiving/verifying-payloads/how-manual). Svix can
// also sign with ed25519 (v1a), so public keys are accepted too.
func init() {
	registerStandard(standardSender{name: "svix", keys: KeyEither, mode: SecretBase64, svix: true, typ: []source{field("type")}})
}
