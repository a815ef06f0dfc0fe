package signature

// Gitea signs the JSON body with HMAC-SHA256 keyed with the webhook's
// secret, bare hex in X-Gitea-Signature (the same MAC also travels as
// X-Hub-Signature-256); X-Gitea-Delivery is the delivery id and
// X-Gitea-Event the event, e.g. push. Without a secret the header is sent
// empty, which is missing here. A hook of content type form posts
// payload=<JSON> and signs the JSON, not the body: use application/json
// (https://docs.gitea.com/features/webhooks; services/webhook/deliver.go).
func init() {
	registerPreset(Preset{
		Name: "gitea",
		Defaults: Config{
			SignatureHeader:  "X-Gitea-Signature",
			DeliveryIDHeader: "X-Gitea-Delivery",
			EventTypeHeader:  "X-Gitea-Event",
		},
		Forward: []string{"X-Gitea-Event", "X-Gitea-Event-Type"},
		Sender:  Sender{ID: SenderIDUUID},
	})
}
