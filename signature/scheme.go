package signature

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// KeyKind says which Config field holds a scheme's keys.
type KeyKind uint8

const (
	// KeySecrets: shared secrets in Config.Secrets (HMAC keys, tokens).
	KeySecrets KeyKind = iota + 1
	// KeyPublic: public keys in Config.PublicKeys (ed25519, ECDSA).
	KeyPublic
	// KeyEither: Secrets, PublicKeys or both (Standard Webhooks v1, v1a).
	KeyEither
)

// Scheme describes a registered scheme to the code around this package:
// the receiver reads which headers to forward and whether GET requests may
// be handshakes.
type Scheme struct {
	// Name is what Config.Scheme selects.
	Name string
	// Keys says which Config field holds the scheme's keys.
	Keys KeyKind
	// Forward lists the request headers stored with each event for its
	// targets, besides Content-Type: the sender's event-type and
	// delivery-id headers and the others a handler reads (Shopify's shop
	// domain), never a signature. A target that signs the event again as
	// its sender did (Resign) sends them as they came. Register adds
	// the headers the delivery id and event type are read from.
	Forward []string
	// GETHandshake is true when the sender checks an endpoint with a GET
	// request, so the receiver must let GET reach Handshake.
	GETHandshake bool
	// AcceptStatus is the status that tells the sender an event was
	// received (stored, or already stored): Mailgun retries anything but
	// 200 for hours. Lookup reports 202 (Accepted) for the schemes that
	// set none.
	AcceptStatus int
	// SecretFields are the JSON body members that carry a secret in the
	// clear (Microsoft Graph's clientState, Slack's verification token),
	// as paths: member names joined with dots, a name ending in "[]"
	// standing for each element of that member's array
	// ("value[].clientState"). The receiver stores the payload with them
	// replaced (RedactSecrets), so the secret reaches no one who reads it.
	SecretFields []string
	// SecretFormFields are the fields of a form-encoded body
	// (application/x-www-form-urlencoded) that carry a secret in the
	// clear (the verification token of Slack's slash commands), and
	// FormJSONFields the fields of one whose value is a JSON document in
	// which SecretFields apply (the payload of Slack's interactivity
	// requests). RedactSecrets replaces them as it does SecretFields.
	SecretFormFields []string
	FormJSONFields   []string
	// SecretQuery and SecretHeaders are the query parameters and request
	// headers that carry a secret in the clear (Meta's hub.verify_token,
	// Asana's X-Hook-Secret, also echoed in the response), canonical
	// header names: the receiver keeps a request with one of them out of
	// Caddy's access log (receiverSecrets.carried in the caddywebhook
	// package).
	SecretQuery   []string
	SecretHeaders []string
}

// RedactsBody reports whether the scheme declares secret-bearing body
// fields, JSON or form, that RedactSecrets replaces.
func (d Scheme) RedactsBody() bool {
	return len(d.SecretFields)+len(d.SecretFormFields)+len(d.FormJSONFields) > 0
}

// scheme is a registry entry: the public description and the code.
type scheme struct {
	Scheme

	// build returns the verifier of a validated cfg; b carries the keys
	// of KeySecrets schemes (raw bytes, SHA-256) unless the scheme
	// replaces them, the clock and the id and type chains.
	build func(cfg Config, b base) (Verifier, error)

	// sign returns the headers a sender would send; key is a secret or a
	// private key, as the scheme's Keys say.
	sign func(key string, body []byte, opts SignOptions) (http.Header, error)

	// signBody, when set, is how the scheme signs: its credential travels
	// inside the body (Mailgun's signature object, Microsoft Graph's
	// clientState), so it returns the body to send; sign then only says
	// to use SignBody.
	signBody func(key string, body []byte, opts SignOptions) ([]byte, error)

	// handshake, when set, answers the sender's endpoint checks; v is
	// the scheme's own verifier, for handshakes that are signed.
	handshake func(v Verifier, req Request) (HandshakeResponse, bool, error)

	// unsignedHandshake, when set, reports from the method, URL and
	// headers alone whether req may be an unsigned handshake sent by POST
	// (Asana's X-Hook-Secret, WooCommerce's ping), which CheckHeaders then
	// lets through to Handshake.
	unsignedHandshake func(req Request) bool

	// verifyToken is set for schemes whose handshake compares a token
	// configured apart from the keys (Meta's verify token), so that they
	// accept Config.VerifyToken.
	verifyToken bool

	// id and typ are where the delivery id and event type come from, after
	// any configured override.
	id, typ []source

	// signsURL is set for code schemes that sign the request URL, so
	// they accept Config.PublicURL (the engine's presets always do).
	signsURL bool

	// secretMode is set for the Standard Webhooks schemes: their default
	// SecretMode; the others refuse Config.SecretMode.
	secretMode SecretMode

	// preset is set for schemes over the signed-content engine: the
	// engine's Config fields are accepted, and preset supplies defaults.
	preset *Preset

	// secretPaths are SecretFields split into their steps once, at
	// register, for RedactSecrets.
	secretPaths [][]string
	// sender is what the scheme's sender sends besides its signature
	// (sender.go).
	sender Sender
}

var registry = map[string]*scheme{}

// register adds s to the registry; it is called from the init function of
// the scheme's file, and a duplicate name is a programming error.
func register(s *scheme) {
	if _, dup := registry[s.Name]; dup {
		panic("signature: scheme " + s.Name + " registered twice")
	}
	if s.Name == "" || strings.ToLower(s.Name) != s.Name || s.build == nil || s.sign == nil || s.Keys == 0 {
		panic("signature: scheme " + s.Name + " is incomplete")
	}
	if len(s.id) > 0 && s.id[0].kind == fromHeader && s.sender.ID == SenderIDNone {
		// SignAsSender would send no id, and the receiver would fall back
		// to the body's hash.
		panic("signature: scheme " + s.Name + " reads its delivery id from " + s.id[0].name + ": say how its sender makes one (Sender.ID)")
	}
	// The headers that name the delivery and its type travel with the
	// event, so a handler that reads them, and Resign, find them.
	for _, src := range append(slices.Clone(s.id), s.typ...) {
		if src.kind == fromHeader && !slices.ContainsFunc(s.Forward, func(f string) bool { return strings.EqualFold(f, src.name) }) {
			s.Forward = append(s.Forward, src.name)
		}
	}
	for _, f := range s.SecretFields {
		s.secretPaths = append(s.secretPaths, strings.Split(f, "."))
	}
	registry[s.Name] = s
}

// Schemes returns the name of every registered scheme and preset, sorted.
func Schemes() []string {
	names := make([]string, 0, len(registry))
	for name := range registry {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Lookup returns the description of the scheme or preset called name.
func Lookup(name string) (Scheme, bool) {
	s, ok := registry[name]
	if !ok {
		return Scheme{}, false
	}
	d := s.Scheme
	d.Forward = slices.Clone(d.Forward)
	d.SecretFields = slices.Clone(d.SecretFields)
	d.SecretFormFields = slices.Clone(d.SecretFormFields)
	d.FormJSONFields = slices.Clone(d.FormJSONFields)
	d.SecretQuery = slices.Clone(d.SecretQuery)
	d.SecretHeaders = slices.Clone(d.SecretHeaders)
	if d.AcceptStatus == 0 {
		d.AcceptStatus = http.StatusAccepted
	}
	return d, true
}

func lookup(name string) (*scheme, error) {
	s, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("Scheme %q unknown (want one of %s)", name, strings.Join(Schemes(), ", "))
	}
	return s, nil
}

// HandshakeResponse is the answer to a sender's endpoint check.
type HandshakeResponse struct {
	Status      int         // HTTP status, e.g. 200
	ContentType string      // of Body; empty when Body is empty, unless the sender wants one (Discord)
	Body        []byte      // e.g. the echoed challenge
	Header      http.Header // extra response headers, e.g. X-Hook-Secret; may be nil

	// IssuedSecret is a secret the sender issues in the handshake and
	// signs its later events with (Asana's X-Hook-Secret), when it is
	// none of the configured secrets. The caller must keep it where the
	// operator can configure it, and answer 401 instead when it cannot:
	// the response echoes it, and echoing a secret the receiver will not
	// verify with would confirm a subscription that can never deliver.
	IssuedSecret string
}

// Handshaker is implemented by the Verifier of a scheme whose sender checks
// the endpoint before (or besides) sending events: Slack's url_verification,
// Discord's PING, a GET with a challenge, an echoed secret header.
type Handshaker interface {
	// Handshake reports ok=false, with no error, when req is not a
	// handshake: the caller goes on to Verify. With ok=true, resp is the
	// answer and the request is not an event. A handshake that claims to
	// be one but fails its check returns an error wrapping a sentinel
	// (ErrNoMatch for a forged one), as Verify does.
	Handshake(req Request) (resp HandshakeResponse, ok bool, err error)
}

// withHandshake adds a scheme's handshake to its verifier.
type withHandshake struct {
	Verifier
	handshake func(v Verifier, req Request) (HandshakeResponse, bool, error)
	unsigned  func(req Request) bool
}

// Handshake implements Handshaker. Every answer with a body says nosniff,
// whatever the scheme's function set: an echoed challenge is the sender's
// text, and a browser must never read it as HTML.
func (w *withHandshake) Handshake(req Request) (HandshakeResponse, bool, error) {
	resp, ok, err := w.handshake(w.Verifier, req)
	if ok && err == nil && len(resp.Body) > 0 && resp.Header.Get(headerNoSniff) != "nosniff" {
		h := resp.Header.Clone()
		if h == nil {
			h = make(http.Header, 1)
		}
		h.Set(headerNoSniff, "nosniff")
		resp.Header = h
	}
	return resp, ok, err
}

// headerNoSniff is the header every handshake answer carries.
const headerNoSniff = "X-Content-Type-Options"

// headerChecker is implemented by the verifiers that can tell from the
// headers alone that a request cannot verify.
type headerChecker interface {
	checkHeaders(h http.Header) error
}

// CheckHeaders reports, from req's method, URL and headers alone (its
// Body is not read), whether req is already known to fail Verify: its
// signature, timestamp or id header is missing or malformed. Call it
// before reading the body, so a request that cannot verify is refused
// unread. The error wraps ErrMissingHeader or ErrMalformedHeader, or
// ErrNoMatch for a header that holds no signature the scheme could match
// (a Stripe header with v0 values only), as Verify's would. It returns nil
// when the request may verify, when it may be an unsigned handshake of the
// scheme, and for schemes whose credential is in the body (mailgun).
func CheckHeaders(v Verifier, req Request) error {
	if w, ok := v.(*withHandshake); ok {
		if w.unsigned != nil && w.unsigned(req) {
			return nil
		}
		v = w.Verifier
	}
	if c, ok := v.(headerChecker); ok {
		return c.checkHeaders(req.Header)
	}
	return nil
}

// UsesURL reports whether v reads Request.URL, so that a caller builds the
// URL string only for the schemes that sign it.
func UsesURL(v Verifier) bool {
	if w, ok := v.(*withHandshake); ok {
		v = w.Verifier
	}
	u, ok := v.(interface{ usesURL() bool })
	return ok && u.usesURL()
}

var _ Handshaker = (*withHandshake)(nil)
