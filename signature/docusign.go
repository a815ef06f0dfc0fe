package signature

import "strconv"

// DocuSign Connect signs the raw body with HMAC-SHA256 keyed with each of
// the account's Connect HMAC keys, as the strings they are, base64 in
// X-DocuSign-Signature-1, -2, … one header per active key, in an order a
// receiver cannot know: every header is tried with every secret. The body's
// event is the event, e.g. envelope-completed; there is no delivery id
// (https://developers.docusign.com/platform/webhooks/connect/validate).
func init() {
	// The first header is required; the rest, up to MaxSignatures in all,
	// are read when present.
	more := make([]string, 0, MaxSignatures-1)
	for n := 2; n <= MaxSignatures; n++ {
		more = append(more, "X-DocuSign-Signature-"+strconv.Itoa(n))
	}
	registerPreset(Preset{
		Name: "docusign",
		Defaults: Config{
			SignatureHeader: "X-DocuSign-Signature-1",
			Encoding:        "base64",
			EventTypeField:  "event",
		},
		MoreSignatureHeaders: more,
	})
}
