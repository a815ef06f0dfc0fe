package signature

// Razorpay signs the raw body with HMAC-SHA256 keyed with the webhook
// secret set in the dashboard (not the API key secret), bare hex in
// X-Razorpay-Signature; X-Razorpay-Event-Id names the event across retries
// and the body's event is its type, e.g. payment.captured
// (https://razorpay.com/docs/webhooks/validate-test/).
func init() {
	registerPreset(Preset{
		Name: "razorpay",
		Defaults: Config{
			SignatureHeader:  "X-Razorpay-Signature",
			DeliveryIDHeader: "X-Razorpay-Event-Id",
			EventTypeField:   "event",
		},
		Sender: Sender{ID: SenderIDRandom},
	})
}
