package signature

// Resend sends its webhooks through Svix: svix-* headers, a "whsec_" signing
// secret from the webhook's details page, the event type in the JSON type
// (https://resend.com/docs/webhooks/verify-webhooks-requests).
func init() {
	registerStandard(standardSender{name: "resend", keys: KeySecrets, mode: SecretBase64, svix: true, typ: []source{field("type")}})
}
