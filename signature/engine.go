package signature

import (
	"cmp"
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The signed-content engine verifies the long tail of senders: an HMAC over
// some arrangement of body, timestamp, id, URL, method and headers, in some
// header, with some encoding. Config's engine fields describe the
// arrangement; New compiles them once into an engine, whose Verify streams
// the parts into the MAC without concatenating them with the body.

// Limits on a SignedContent template: generous for any provider, small
// enough that a template cannot make a request expensive.
const (
	maxTemplateLen   = 1 << 10
	maxTemplateParts = 32
)

// partKind is what one part of the signed content is.
type partKind uint8

const (
	partText      partKind = iota + 1 // literal text
	partBody                          // the raw body
	partTimestamp                     // the timestamp as sent
	partID                            // the delivery id header
	partURL                           // the public URL
	partMethod                        // the request method
	partHeader                        // a named request header
)

type part struct {
	kind partKind
	text string // the literal, or the canonical header name
}

// compileTemplate parses a SignedContent template into its parts.
func compileTemplate(tmpl string) ([]part, error) {
	if len(tmpl) > maxTemplateLen {
		return nil, fmt.Errorf("SignedContent longer than %d bytes", maxTemplateLen)
	}
	var (
		parts []part
		lit   []byte
	)
	flush := func() {
		if len(lit) > 0 {
			parts = append(parts, part{kind: partText, text: string(lit)})
			lit = lit[:0]
		}
	}
	for i := 0; i < len(tmpl); {
		c := tmpl[i]
		switch {
		case (c == '{' || c == '}') && i+1 < len(tmpl) && tmpl[i+1] == c:
			lit = append(lit, c)
			i += 2
		case c == '}':
			return nil, fmt.Errorf("SignedContent: '}' at byte %d closes nothing (write }} for a literal brace)", i)
		case c == '\\':
			if i+1 == len(tmpl) {
				return nil, fmt.Errorf("SignedContent: '\\' at the end (write \\\\ for a literal backslash)")
			}
			e, ok := templateEscapes[tmpl[i+1]]
			if !ok {
				return nil, fmt.Errorf("SignedContent: escape \\%c at byte %d unknown (want \\n, \\r, \\t or \\\\)", tmpl[i+1], i)
			}
			lit = append(lit, e)
			i += 2
		case c == '{':
			end := strings.IndexByte(tmpl[i+1:], '}')
			if end < 0 {
				return nil, fmt.Errorf("SignedContent: '{' at byte %d is not closed", i)
			}
			p, err := templateVar(tmpl[i+1 : i+1+end])
			if err != nil {
				return nil, fmt.Errorf("SignedContent: %w", err)
			}
			flush()
			parts = append(parts, p)
			i += end + 2
		default:
			lit = append(lit, c)
			i++
		}
	}
	flush()
	if len(parts) == 0 {
		return nil, errors.New("SignedContent: empty")
	}
	if len(parts) > maxTemplateParts {
		return nil, fmt.Errorf("SignedContent: more than %d parts", maxTemplateParts)
	}
	return parts, nil
}

// templateEscapes are the escapes of a template, so that a Caddyfile
// token, where "\n" is two characters, can hold a line break.
var templateEscapes = map[byte]byte{'n': '\n', 'r': '\r', 't': '\t', '\\': '\\'}

func templateVar(name string) (part, error) {
	// The Caddyfile adapter expands {method} and {header.*} into Caddy's
	// long placeholder names; both spellings mean the same here.
	if long, ok := strings.CutPrefix(name, "http.request."); ok && (long == "method" || strings.HasPrefix(long, "header.")) {
		name = long
	}
	switch name {
	case "body":
		return part{kind: partBody}, nil
	case "timestamp":
		return part{kind: partTimestamp}, nil
	case "id":
		return part{kind: partID}, nil
	case "url":
		return part{kind: partURL}, nil
	case "method":
		return part{kind: partMethod}, nil
	}
	if h, ok := strings.CutPrefix(name, "header."); ok {
		if !ValidHeaderName(h) {
			return part{}, fmt.Errorf("{header.%s}: not a valid header name", h)
		}
		return part{kind: partHeader, text: http.CanonicalHeaderKey(h)}, nil
	}
	return part{}, fmt.Errorf("{%s} unknown (want body, timestamp, id, url, method or header.<Name>)", name)
}

// syntax is how a signature header lists its MACs.
type syntax uint8

const (
	syntaxPlain syntax = iota
	syntaxList
	syntaxPairs
)

func syntaxFor(name string) (syntax, error) {
	switch name {
	case "", "plain":
		return syntaxPlain, nil
	case "list":
		return syntaxList, nil
	case "pairs":
		return syntaxPairs, nil
	}
	return 0, fmt.Errorf("SignatureSyntax %q unknown (want plain, list or pairs)", name)
}

// engine is the Verifier of the hmac scheme and of every preset.
type engine struct {
	base
	parts        []part
	newHash      func() hash.Hash
	header       string // canonical SignatureHeader
	syntax       syntax
	sigKey       string   // pairs: the key of the MACs
	more         []string // canonical further headers of one plain MAC each
	secretBase64 bool
	prefix       string
	enc          encoding
	size         int    // MAC bytes
	tsHeader     string // canonical TimestampHeader
	tsKey        string // pairs: the key of the timestamp
	tsField      string // JSON path of the timestamp, read after the MAC
	tsFormat     tsFormat
	idHeader     string // canonical, for {id}
	publicURL    string
	urlUsed      bool

	sigErrors, tsErrors, idErrors headerErrors
	noMatch, tsFieldErr           error
}

// tsFormat is how a timestamp is written.
type tsFormat uint8

const (
	tsUnix tsFormat = iota
	tsUnixMillis
	tsRFC3339
)

// compileEngine checks the engine fields of cfg, whose preset defaults are
// applied, and compiles them; ids is the delivery id chain, whose first
// source is the header of {id}. It needs no keys, so Sign uses it too.
func compileEngine(cfg Config, ids []source) (*engine, error) {
	if cfg.SignatureHeader == "" {
		return nil, fmt.Errorf("SignatureHeader is required for the %s scheme", cfg.Scheme)
	}
	newHash, err := hashFor(cfg.Algorithm)
	if err != nil {
		return nil, err
	}
	enc, err := encodingFor(cfg.Encoding)
	if err != nil {
		return nil, err
	}
	syn, err := syntaxFor(cfg.SignatureSyntax)
	if err != nil {
		return nil, err
	}
	parts, err := compileTemplate(cmp.Or(cfg.SignedContent, "{body}"))
	if err != nil {
		return nil, err
	}
	if len(cfg.SignaturePrefix) > MaxHeaderLen {
		return nil, fmt.Errorf("SignaturePrefix longer than %d bytes", MaxHeaderLen)
	}
	e := &engine{
		parts:     parts,
		newHash:   newHash,
		header:    http.CanonicalHeaderKey(cfg.SignatureHeader),
		syntax:    syn,
		sigKey:    cfg.SignatureKey,
		prefix:    cfg.SignaturePrefix,
		enc:       enc,
		size:      newHash().Size(),
		tsHeader:  http.CanonicalHeaderKey(cfg.TimestampHeader),
		tsKey:     cfg.TimestampKey,
		tsField:   cfg.TimestampField,
		publicURL: cfg.PublicURL,
		sigErrors: newHeaderErrors(cfg.Scheme, cfg.SignatureHeader),
		noMatch:   fmt.Errorf("%s: %w", cfg.Scheme, ErrNoMatch),
	}
	switch {
	case syn == syntaxPairs && cfg.SignatureKey == "":
		return nil, errors.New("SignatureKey is required with SignatureSyntax pairs")
	case syn != syntaxPairs && cfg.SignatureKey != "":
		return nil, errors.New("SignatureKey applies only to SignatureSyntax pairs")
	case syn != syntaxPairs && cfg.TimestampKey != "":
		return nil, errors.New("TimestampKey applies only to SignatureSyntax pairs (or set TimestampHeader)")
	case cfg.TimestampKey != "" && cfg.TimestampHeader != "":
		return nil, errors.New("TimestampHeader and TimestampKey are mutually exclusive")
	case cfg.TimestampField != "" && (cfg.TimestampKey != "" || cfg.TimestampHeader != ""):
		return nil, errors.New("TimestampField and TimestampHeader or TimestampKey are mutually exclusive")
	case cfg.TimestampKey != "" && cfg.TimestampKey == cfg.SignatureKey:
		return nil, errors.New("TimestampKey and SignatureKey are the same")
	case strings.ContainsAny(cfg.SignatureKey+cfg.TimestampKey, ",;= \t"):
		return nil, errors.New("SignatureKey and TimestampKey must not contain ',', ';', '=' or spaces")
	case syn == syntaxList && strings.ContainsAny(cfg.SignaturePrefix, ", \t"):
		return nil, errors.New("SignaturePrefix must not contain ',' or spaces with SignatureSyntax list")
	case syn == syntaxPairs && strings.ContainsAny(cfg.SignaturePrefix, ",;"):
		return nil, errors.New("SignaturePrefix must not contain ',' or ';' with SignatureSyntax pairs")
	}
	switch cfg.TimestampFormat {
	case "", "unix":
	case "unix_ms":
		e.tsFormat = tsUnixMillis
	case "rfc3339":
		e.tsFormat = tsRFC3339
	default:
		return nil, fmt.Errorf("TimestampFormat %q unknown (want unix, unix_ms or rfc3339)", cfg.TimestampFormat)
	}
	if e.tsField != "" {
		e.tsFieldErr = fmt.Errorf("%s: body field %s: timestamp missing or malformed: %w", cfg.Scheme, cfg.TimestampField, ErrTimestamp)
	}
	if s := registry[cfg.Scheme]; s != nil && s.preset != nil {
		e.secretBase64 = s.preset.SecretBase64
	}
	if s := registry[cfg.Scheme]; s != nil && s.preset != nil && strings.EqualFold(cfg.SignatureHeader, s.preset.Defaults.SignatureHeader) {
		// A header configured in the preset's place replaces them too.
		for _, h := range s.preset.MoreSignatureHeaders {
			e.more = append(e.more, http.CanonicalHeaderKey(h))
		}
		if len(e.more) > 0 && syn != syntaxPlain {
			return nil, errors.New("a preset's further signature headers need SignatureSyntax plain")
		}
	}
	if e.tsHeader != "" {
		e.tsErrors = newHeaderErrors(cfg.Scheme, cfg.TimestampHeader)
	} else {
		e.tsErrors = e.sigErrors
	}
	for _, p := range parts {
		switch p.kind {
		case partTimestamp:
			if !e.hasTimestamp() {
				return nil, errors.New("SignedContent uses {timestamp}: set TimestampHeader or TimestampKey")
			}
		case partID:
			if len(ids) == 0 || ids[0].kind != fromHeader {
				return nil, errors.New("SignedContent uses {id}: set DeliveryIDHeader")
			}
			e.idHeader = ids[0].name
			e.idErrors = newHeaderErrors(cfg.Scheme, ids[0].name)
		case partURL:
			e.urlUsed = true
		}
	}
	if cfg.PublicURL != "" {
		if !e.urlUsed {
			return nil, errors.New("PublicURL is set but SignedContent has no {url}")
		}
		if !strings.HasPrefix(cfg.PublicURL, "https://") && !strings.HasPrefix(cfg.PublicURL, "http://") {
			return nil, errors.New("PublicURL must start with https:// or http://")
		}
	}
	return e, nil
}

func (e *engine) hasTimestamp() bool { return e.tsHeader != "" || e.tsKey != "" }

func (e *engine) usesURL() bool { return e.urlUsed && e.publicURL == "" }

// buildEngine is the build of the hmac scheme and of every preset.
func buildEngine(cfg Config, b base) (Verifier, error) {
	e, err := compileEngine(cfg, b.meta.id)
	if err != nil {
		return nil, err
	}
	b.keys = make([]*macKey, len(cfg.Secrets))
	for i, secret := range cfg.Secrets {
		key, err := e.key(secret)
		if err != nil {
			return nil, fmt.Errorf("Secrets[%d]: %w", i, err)
		}
		b.keys[i] = newMACKey(i, e.newHash, key)
	}
	e.base = b
	return e, nil
}

// key is the HMAC key of a secret: its bytes, or for a preset whose
// secrets are base64 what they decode to.
func (e *engine) key(secret string) ([]byte, error) {
	if !e.secretBase64 {
		return []byte(secret), nil
	}
	key, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(secret, "="))
	if err != nil || len(key) == 0 {
		// err would quote a byte offset only, but say less anyway.
		return nil, errors.New("not base64 (this provider's secrets are)")
	}
	return key, nil
}

// Verify implements Verifier.
func (e *engine) Verify(req Request) (Result, error) {
	value, err := e.sigErrors.get(req.Header, e.header)
	if err != nil {
		return Result{}, err
	}
	var sigs sigSet
	sigs.size = e.size
	ts, err := e.parse(value, &sigs)
	if err != nil {
		return Result{}, err
	}
	for _, name := range e.more {
		e.parseMore(req.Header.Get(name), &sigs)
	}
	var unix int64
	if e.tsHeader != "" {
		if ts, err = e.tsErrors.get(req.Header, e.tsHeader); err != nil {
			return Result{}, err
		}
	}
	if e.hasTimestamp() {
		var ok bool
		if unix, ok = e.parseTime(ts); !ok {
			return Result{}, e.tsErrors.malformed
		}
	}
	var id string
	if e.idHeader != "" {
		if id, err = e.idErrors.get(req.Header, e.idHeader); err != nil {
			return Result{}, err
		}
	}
	index, ok := -1, false
	for _, k := range e.keys {
		st := k.get()
		e.content(st, &req, ts, id)
		ok = sigs.match(st.finish())
		k.put(st)
		if ok {
			index = k.index
			break
		}
	}
	if !ok {
		return Result{}, e.noMatch
	}
	// After the MAC: ErrTimestamp means a genuine request outside the
	// window, a forgery is ErrNoMatch whatever its timestamp.
	if e.hasTimestamp() {
		if err := e.checkTime(unix); err != nil {
			return Result{}, err
		}
	}
	var js jsonValues
	if e.tsField != "" && e.tolerance != 0 {
		if err := e.checkField(e.meta.field(e.tsField, req.Body, &js)); err != nil {
			return Result{}, err
		}
	}
	return e.meta.resultWith(index, req.Header, req.Body, id, &js), nil
}

// parseTime reads a timestamp in the engine's format as unix seconds.
func (e *engine) parseTime(s string) (int64, bool) {
	switch e.tsFormat {
	case tsRFC3339:
		t, err := time.Parse(time.RFC3339, s)
		return t.Unix(), err == nil
	case tsUnixMillis:
		ms, ok := parseUnix(s)
		return ms / 1000, ok
	}
	return parseUnix(s)
}

// checkField applies the tolerance to the timestamp of a body field, raw
// as scanned: a number, or a string in the engine's format.
func (e *engine) checkField(raw []byte) error {
	var (
		unix int64
		ok   bool
	)
	switch {
	case len(raw) > 0 && raw[0] == '"':
		if s, _ := jsonScalar(raw); s != "" && len(s) <= MaxHeaderLen {
			unix, ok = e.parseTime(s)
		}
	case e.tsFormat == tsRFC3339:
	case e.tsFormat == tsUnixMillis:
		unix, ok = parseUnix(raw)
		unix /= 1000
	default:
		unix, ok = parseUnix(raw)
	}
	if !ok {
		return e.tsFieldErr
	}
	return e.checkTime(unix)
}

// parseMore adds the MAC of a further signature header, if it decodes and
// there is room: a header that does not read matches nothing, as a list's
// undecodable entries do.
func (e *engine) parseMore(value string, sigs *sigSet) {
	if value == "" || sigs.n == MaxSignatures {
		return
	}
	if encoded, ok := strings.CutPrefix(value, e.prefix); ok && e.decode(sigs.slot(), encoded) {
		sigs.commit()
	}
}

// content writes the signed content of req into st.
func (e *engine) content(st *macState, req *Request, ts, id string) {
	for _, p := range e.parts {
		switch p.kind {
		case partText:
			st.writeString(p.text)
		case partBody:
			st.write(req.Body)
		case partTimestamp:
			st.writeString(ts)
		case partID:
			st.writeString(id)
		case partURL:
			st.writeString(cmp.Or(e.publicURL, req.URL))
		case partMethod:
			st.writeString(req.Method)
		case partHeader:
			st.writeString(req.Header.Get(p.text))
		}
	}
}

// parse decodes the MACs of value into sigs and returns the timestamp of
// a pairs header with a TimestampKey. A value that cannot be read is
// malformed; one whose MACs are all of another kind or undecodable matches
// nothing, as with Stripe's and Standard Webhooks' own libraries.
func (e *engine) parse(value string, sigs *sigSet) (ts string, err error) {
	switch e.syntax {
	case syntaxPlain:
		encoded, ok := strings.CutPrefix(value, e.prefix)
		if !ok || !e.decode(sigs.slot(), encoded) {
			return "", e.sigErrors.malformed
		}
		sigs.commit()
		return "", nil
	case syntaxList:
		seen := 0
		for rest := value; rest != ""; {
			var entry string
			entry, rest = nextItem(rest, ", \t")
			if entry == "" {
				continue
			}
			if seen++; seen > MaxSignatures {
				return "", e.sigErrors.malformed
			}
			if encoded, ok := strings.CutPrefix(entry, e.prefix); ok && e.decode(sigs.slot(), encoded) {
				sigs.commit()
			}
		}
		if seen == 0 {
			return "", e.sigErrors.malformed
		}
	case syntaxPairs:
		seen, haveTS := 0, false
		for rest := value; rest != ""; {
			var item string
			item, rest = nextItem(rest, ",;")
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			k, v, ok := strings.Cut(item, "=")
			if !ok {
				return "", e.sigErrors.malformed
			}
			switch {
			case e.tsKey != "" && k == e.tsKey:
				if haveTS {
					return "", e.sigErrors.malformed
				}
				haveTS, ts = true, v
			case k == e.sigKey:
				if seen++; seen > MaxSignatures {
					return "", e.sigErrors.malformed
				}
				if encoded, ok := strings.CutPrefix(v, e.prefix); ok && e.decode(sigs.slot(), encoded) {
					sigs.commit()
				}
			}
		}
		if e.tsKey != "" && !haveTS {
			return "", e.sigErrors.malformed
		}
		if seen == 0 {
			return "", e.sigErrors.malformed
		}
	}
	if sigs.n == 0 {
		return "", e.noMatch
	}
	return ts, nil
}

// nextItem splits s at the first byte of seps.
func nextItem(s, seps string) (item, rest string) {
	if i := strings.IndexAny(s, seps); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

func (e *engine) decode(dst []byte, s string) bool {
	switch e.enc {
	case encBase64:
		return decodeBase64(dst, s)
	case encBase64URL:
		return decodeBase64With(base64.RawURLEncoding, dst, s)
	}
	return decodeHex(dst, s)
}

func (e *engine) encode(mac []byte) string {
	switch e.enc {
	case encBase64:
		return base64.StdEncoding.EncodeToString(mac)
	case encBase64URL:
		return base64.URLEncoding.EncodeToString(mac)
	}
	return hex.EncodeToString(mac)
}

// signEngine signs for the hmac scheme or a preset: the engine fields of
// opts override the preset's, as in Config.
func signEngine(s *scheme, secret string, body []byte, opts SignOptions) (http.Header, error) {
	cfg := opts.engineConfig()
	cfg.Scheme, cfg.Secrets = s.Name, []string{secret}
	cfg = s.preset.apply(cfg)
	if err := cfg.validate(s); err != nil {
		return nil, err
	}
	ids := newMeta(cfg, s.id, nil).id
	e, err := compileEngine(cfg, ids)
	if err != nil {
		return nil, err
	}
	ts := opts.Timestamp
	if ts.IsZero() {
		ts = time.Now()
	}
	stamp := strconv.FormatInt(ts.Unix(), 10)
	switch e.tsFormat {
	case tsUnixMillis:
		stamp = strconv.FormatInt(ts.UnixMilli(), 10)
	case tsRFC3339:
		stamp = ts.UTC().Format(time.RFC3339Nano)
	}
	h := opts.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	id := opts.ID
	if e.idHeader != "" {
		if id == "" {
			id = "msg_" + rand.Text()
		}
		h.Set(e.idHeader, id)
	}
	setFirstHeader(h, ids, id)
	setFirstHeader(h, newMeta(cfg, nil, s.typ).typ, opts.EventType)
	if e.tsHeader != "" {
		h.Set(e.tsHeader, stamp)
	}
	req := Request{Method: cmp.Or(opts.Method, http.MethodPost), URL: opts.URL, Header: h, Body: body}
	key, err := e.key(secret)
	if err != nil {
		return nil, err
	}
	st := &macState{h: hmac.New(e.newHash, key)}
	e.content(st, &req, stamp, id)
	encoded := e.prefix + e.encode(st.finish())
	if e.syntax == syntaxPairs {
		sep := cmp.Or(s.preset.PairSeparator, ",")
		if e.tsKey != "" {
			encoded = e.tsKey + "=" + stamp + sep + e.sigKey + "=" + encoded
		} else {
			encoded = e.sigKey + "=" + encoded
		}
	}
	h.Set(e.header, encoded)
	return h, nil
}

// setFirstHeader sets the header of the first source of c, if it is one,
// to value, unless value is empty.
func setFirstHeader(h http.Header, c []source, value string) {
	if value != "" && len(c) > 0 && c[0].kind == fromHeader {
		h.Set(c[0].name, value)
	}
}

var _ Verifier = (*engine)(nil)
