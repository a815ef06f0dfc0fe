package signature

// Bitbucket Cloud signs the raw body with HMAC-SHA256 keyed with the
// webhook's secret, hex after "sha256=" in X-Hub-Signature: GitHub's
// format under the name GitHub gives its SHA-1 header. X-Request-UUID
// names the request and X-Event-Key the event, e.g. repo:push
// (https://support.atlassian.com/bitbucket-cloud/docs/manage-webhooks/,
// https://support.atlassian.com/bitbucket-cloud/docs/event-payloads/).
func init() {
	registerPreset(Preset{
		Name: "bitbucket",
		Defaults: Config{
			SignatureHeader:  "X-Hub-Signature",
			SignaturePrefix:  "sha256=",
			DeliveryIDHeader: "X-Request-UUID",
			EventTypeHeader:  "X-Event-Key",
		},
		Forward: []string{"X-Event-Key"},
		Sender:  Sender{ID: SenderIDUUID},
	})
}
