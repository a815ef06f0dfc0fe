package signature

// Polar sends Standard Webhooks headers, but its SDKs key the HMAC with the
// bytes of the whole secret string (they base64-encode it before handing
// it to a Standard Webhooks verifier), while newer secrets may come in the
// standard "whsec_" form. SecretBoth tries the base64 key when the secret
// decodes and then the raw bytes, without trusting the prefix
// (https://docs.polar.sh/integrate/webhooks/delivery; the SDKs' key:
// https://hexdocs.pm/polar_express/webhooks.html, "your webhook secret as
// the HMAC key").
func init() {
	registerStandard(standardSender{name: "polar", keys: KeySecrets, mode: SecretBoth, typ: []source{field("type")}})
}
