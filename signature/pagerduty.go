package signature

// PagerDuty (webhooks v3) signs the raw body with HMAC-SHA256 keyed with
// the subscription's secret, hex in X-PagerDuty-Signature: v1=<hex>, one
// v1 per active secret while one rotates. X-Webhook-Id stays the same on
// every attempt; the body's event.event_type is the event, e.g.
// incident.triggered
// (https://developer.pagerduty.com/docs/webhooks/webhook-signatures/).
func init() {
	registerPreset(Preset{
		Name: "pagerduty",
		Defaults: Config{
			SignatureHeader:  "X-PagerDuty-Signature",
			SignatureSyntax:  "pairs",
			SignatureKey:     "v1",
			DeliveryIDHeader: "X-Webhook-Id",
			EventTypeField:   "event.event_type",
		},
		Sender: Sender{ID: SenderIDRandom},
	})
}
