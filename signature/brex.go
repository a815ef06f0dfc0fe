package signature

// Brex signs its webhooks the Standard Webhooks way: Webhook-Id,
// Webhook-Timestamp and Webhook-Signature with one v1 entry per active
// secret during a rotation; the secrets, listed by GET /v1/webhooks/secrets,
// are base64 without a prefix, and the event type is the JSON event_type
// (https://developer.brex.com/docs/webhooks,
// https://developer.brex.com/openapi/webhooks_api/).
func init() {
	registerStandard(standardSender{name: "brex", keys: KeySecrets, mode: SecretBase64, typ: []source{field("event_type")}})
}
