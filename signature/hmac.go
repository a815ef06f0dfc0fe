package signature

// The hmac scheme is the signed-content engine with no preset: the
// SignatureHeader is required and every other engine field has its
// documented default, so an hmac Config written before the engine existed
// (header, algorithm, encoding, prefix; a MAC of the raw body) means what
// it meant. It carries no delivery id or event type of its own.
func init() {
	registerPreset(Preset{Name: SchemeHMAC})
}
