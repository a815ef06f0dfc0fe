package signature

import (
	"net/http"
	"regexp"
)

// WooCommerce signs the body with HMAC-SHA256 keyed with the webhook's
// secret, in X-WC-Webhook-Signature: <base64>; the topic (order.created, …)
// is in X-WC-Webhook-Topic (woocommerce/woocommerce,
// plugins/woocommerce/includes/class-wc-webhook.php: generate_signature,
// deliver). Its X-WC-Webhook-Delivery-ID changes on every attempt and two
// deliveries in one second share it, so the body hash is the delivery id.
//
// When a webhook is created or activated, WooCommerce posts an unsigned
// ping, form-encoded webhook_id=<n>, and fails the webhook unless it gets
// exactly 200 (deliver_ping). The ping says nothing and is not stored.
const headerWooSignature = "X-WC-Webhook-Signature"

func init() {
	registerPreset(Preset{
		Name: "woocommerce",
		Defaults: Config{
			SignatureHeader: headerWooSignature,
			Encoding:        "base64",
			EventTypeHeader: "X-WC-Webhook-Topic",
		},
		Forward:           []string{"X-WC-Webhook-Topic"},
		Handshake:         wooHandshake,
		UnsignedHandshake: wooMayHandshake,
	})
}

var wooPing = regexp.MustCompile(`^webhook_id=[0-9]{1,20}$`)

// wooMayHandshake: an unsigned POST.
func wooMayHandshake(req Request) bool {
	return req.Method == http.MethodPost && req.Header.Get(headerWooSignature) == ""
}

func wooHandshake(_ Verifier, req Request) (HandshakeResponse, bool, error) {
	if !wooMayHandshake(req) || !wooPing.Match(req.Body) {
		return HandshakeResponse{}, false, nil
	}
	return HandshakeResponse{Status: http.StatusOK}, true, nil
}
