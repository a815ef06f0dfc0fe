package signature

// Sentry's integration platform signs the raw body with HMAC-SHA256 keyed
// with the integration's client secret, bare hex in Sentry-Hook-Signature.
// Sentry-Hook-Timestamp is not signed, so it is not checked; Request-ID
// names the request and Sentry-Hook-Resource the resource, e.g. issue
// (https://docs.sentry.io/integrations/integration-platform/webhooks/).
func init() {
	registerPreset(Preset{
		Name: "sentry",
		Defaults: Config{
			SignatureHeader:  "Sentry-Hook-Signature",
			DeliveryIDHeader: "Request-ID",
			EventTypeHeader:  "Sentry-Hook-Resource",
		},
		Forward: []string{"Sentry-Hook-Resource"},
		Sender:  Sender{ID: SenderIDUUID},
	})
}
