package signature

// Forgejo, a fork of Gitea, signs the same way and adds its own names:
// bare hex HMAC-SHA256 of the JSON body in X-Forgejo-Signature,
// X-Forgejo-Delivery, X-Forgejo-Event. Without a secret the header is sent
// empty, which is missing here; form-encoded hooks sign the JSON, not the
// body: use application/json (https://forgejo.org/docs/latest/user/webhooks).
func init() {
	registerPreset(Preset{
		Name: "forgejo",
		Defaults: Config{
			SignatureHeader:  "X-Forgejo-Signature",
			DeliveryIDHeader: "X-Forgejo-Delivery",
			EventTypeHeader:  "X-Forgejo-Event",
		},
		Forward: []string{"X-Forgejo-Event", "X-Forgejo-Event-Type"},
		Sender:  Sender{ID: SenderIDUUID},
	})
}
