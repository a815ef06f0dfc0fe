package signature

import "net/http"

// Xero signs the raw body with HMAC-SHA256 keyed with the app's webhooks
// key, used as the string it is (not base64-decoded), base64 in
// x-xero-signature. Its "intent to receive" check sends signed and
// wrongly signed deliveries and wants exactly 200 and 401, hence
// AcceptStatus (a forgery gets 401 from every scheme). Deliveries carry no id
// (https://developer.xero.com/documentation/guides/webhooks/, as Xero's
// intent-to-receive example code computes it).
func init() {
	registerPreset(Preset{
		Name:         "xero",
		AcceptStatus: http.StatusOK,
		Defaults: Config{
			SignatureHeader: "X-Xero-Signature",
			Encoding:        "base64",
		},
	})
}
