package signature

// Clerk sends its webhooks through Svix: svix-* headers, a "whsec_" signing
// secret from the endpoint's page in the Clerk dashboard, the event type in
// the JSON type (https://clerk.com/docs/references/backend/verify-webhook).
func init() {
	registerStandard(standardSender{name: "clerk", keys: KeySecrets, mode: SecretBase64, svix: true, typ: []source{field("type")}})
}
