package signature

import (
	"cmp"
	"net/http"
)

// Preset is a provider's arrangement of the signed-content engine: data, no
// code. Registering one (registerPreset, from the init function of the
// provider's own file) makes its Name a scheme; see the package
// documentation for how to add one.
type Preset struct {
	// Name is the scheme name: lower case, as Config.Scheme selects it.
	Name string

	// Defaults holds the provider's engine fields (SignatureHeader,
	// SignatureSyntax, SignatureKey, SignaturePrefix, Algorithm, Encoding,
	// SignedContent, TimestampHeader, TimestampKey, TimestampField,
	// TimestampFormat) and
	// its Tolerance; a Config field that is set overrides its default.
	// Its DeliveryIDHeader or DeliveryIDField and EventTypeHeader or
	// EventTypeField are the provider's own sources, read after a
	// configured override. Other fields are ignored.
	Defaults Config

	// Forward lists the headers stored with each event for its targets
	// besides Content-Type: the provider's event-type header, if any.
	Forward []string

	// MoreSignatureHeaders are further headers that each carry one MAC
	// in the plain syntax, tried as the SignatureHeader's is: Box's
	// secondary signature, DocuSign's numbered family. SignatureHeader
	// must be present; these may be absent. They are dropped when a
	// Config sets another SignatureHeader.
	MoreSignatureHeaders []string

	// SecretBase64 is true when the provider hands out its secrets in
	// base64 and signs with the decoded bytes (Airtable's
	// macSecretBase64); New refuses a secret that does not decode.
	SecretBase64 bool

	// PairSeparator joins the items of a pairs header in Sign: "," or
	// ";". Verify accepts either. Default: ",".
	PairSeparator string

	// Handshake, when set, answers the provider's endpoint checks (see
	// Handshaker); v is the preset's verifier, for signed handshakes.
	Handshake func(v Verifier, req Request) (HandshakeResponse, bool, error)

	// GETHandshake is true when Handshake answers GET requests.
	GETHandshake bool

	// UnsignedHandshake, when set, reports from the method, URL and
	// headers alone whether a POST may be an unsigned handshake, which
	// CheckHeaders must then let through (see Handshaker).
	UnsignedHandshake func(req Request) bool

	// AcceptStatus is the status the receiver answers an accepted event
	// with, for a sender that wants another than 202 (Scheme.AcceptStatus).
	// Default: 202.
	AcceptStatus int

	// Sender is what the provider sends besides its signature: how it
	// names a delivery (required when DeliveryIDHeader is set) and the
	// headers it always adds. SignAsSender sends it.
	Sender Sender
}

// registerPreset registers p as a scheme over the engine.
func registerPreset(p Preset) { register(presetScheme(p)) }

// presetScheme returns the registry entry of p, for a provider file that
// adds to it (a build that wraps the engine's) before registering it.
func presetScheme(p Preset) *scheme {
	s := &scheme{
		Scheme:            Scheme{Name: p.Name, Keys: KeySecrets, Forward: p.Forward, GETHandshake: p.GETHandshake, AcceptStatus: p.AcceptStatus},
		build:             buildEngine,
		handshake:         p.Handshake,
		unsignedHandshake: p.UnsignedHandshake,
		id:                sourceOf(p.Defaults.DeliveryIDHeader, p.Defaults.DeliveryIDField),
		typ:               sourceOf(p.Defaults.EventTypeHeader, p.Defaults.EventTypeField),
		preset:            &p,
		sender:            p.Sender,
	}
	s.sign = func(secret string, body []byte, opts SignOptions) (http.Header, error) {
		return signEngine(s, secret, body, opts)
	}
	return s
}

// sourceOf is the chain of one header or field, or none.
func sourceOf(headerName, fieldName string) []source {
	switch {
	case headerName != "":
		return []source{header(headerName)}
	case fieldName != "":
		return []source{field(fieldName)}
	}
	return nil
}

// apply fills the engine fields cfg leaves empty with the preset's.
func (p *Preset) apply(cfg Config) Config {
	d := &p.Defaults
	cfg.SignatureHeader = cmp.Or(cfg.SignatureHeader, d.SignatureHeader)
	cfg.SignatureSyntax = cmp.Or(cfg.SignatureSyntax, d.SignatureSyntax)
	cfg.SignatureKey = cmp.Or(cfg.SignatureKey, d.SignatureKey)
	cfg.SignaturePrefix = cmp.Or(cfg.SignaturePrefix, d.SignaturePrefix)
	cfg.Algorithm = cmp.Or(cfg.Algorithm, d.Algorithm)
	cfg.Encoding = cmp.Or(cfg.Encoding, d.Encoding)
	cfg.SignedContent = cmp.Or(cfg.SignedContent, d.SignedContent)
	cfg.TimestampHeader = cmp.Or(cfg.TimestampHeader, d.TimestampHeader)
	cfg.TimestampKey = cmp.Or(cfg.TimestampKey, d.TimestampKey)
	cfg.TimestampFormat = cmp.Or(cfg.TimestampFormat, d.TimestampFormat)
	if cfg.TimestampHeader == "" && cfg.TimestampKey == "" {
		// A configured header or key replaces the preset's field.
		cfg.TimestampField = cmp.Or(cfg.TimestampField, d.TimestampField)
	}
	if cfg.Tolerance == 0 && !cfg.IgnoreTimestamp {
		cfg.Tolerance = d.Tolerance
	}
	return cfg
}
