package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Contentful signs each webhook request with HMAC-SHA256, keyed with the
// space's 64-character signing secret as written, over
//
//	<method>\n<path>\n<name>:<value>;<name>:<value>…\n<body>
//
// in lowercase hex in X-Contentful-Signature
// (https://contentful.com/developers/docs/webhooks/request-verification,
// and node-apps-toolkit's verifyRequest and signRequest, which the page
// refers to for the details). The request chooses its signed headers:
// X-Contentful-Signed-Headers lists them, separated by commas, and always
// names itself and X-Contentful-Timestamp, the signing time in unix
// milliseconds; this verifier refuses a list that leaves either out. The
// names are lower-cased, sorted and written once each, with their trimmed
// values; the list's own value is written as that sorted, comma-joined
// list, as verifyRequest rebuilds it. A signed header sent twice is
// refused: Node would join or drop the copies depending on the name. The
// timestamp is held to Config.Tolerance (verifyRequest's default TTL is
// 30 s, in the past only).
//
// The path is the request's path and query as sent, encoded as the
// toolkit's getNormalizedEncodedURI does: encodeURI of the path, and of
// the query, up to any second '?', after querystring.escape, so its
// escapes are escaped again ("a=1" is signed as "a%253D1"). Behind a proxy
// that changes the path, Config.PublicURL gives the scheme, host and path
// Contentful requested; the query is the request's.
//
// The delivery id is X-Contentful-Idempotency-Key
// (https://www.contentful.com/developers/changelog/idempotency-key-headers-for-webhook-requests/),
// the event type X-Contentful-Topic, as in ContentManagement.Entry.publish
// (https://contentful.com/developers/docs/webhooks/headers).
const (
	headerContentfulSignature     = "X-Contentful-Signature"
	headerContentfulSignedHeaders = "X-Contentful-Signed-Headers"
	headerContentfulTimestamp     = "X-Contentful-Timestamp"
	headerContentfulTopic         = "X-Contentful-Topic"
	headerContentfulIdempotency   = "X-Contentful-Idempotency-Key"
	schemeContentful              = "contentful"

	// The lower-case names of the two headers every list must sign.
	contentfulListName      = "x-contentful-signed-headers"
	contentfulTimestampName = "x-contentful-timestamp"

	// maxContentfulHeaders bounds the names of one signed-headers list,
	// maxContentfulName the length of each (Contentful sends three or
	// four names of about 30 bytes).
	maxContentfulHeaders = 32
	maxContentfulName    = 128
)

var (
	contentfulSignatureErrors = newHeaderErrors(schemeContentful, headerContentfulSignature)
	contentfulListErrors      = newHeaderErrors(schemeContentful, headerContentfulSignedHeaders)
	contentfulTimestampErrors = newHeaderErrors(schemeContentful, headerContentfulTimestamp)
	contentfulUnsigned        = fmt.Errorf("%s: %s must name itself and %s: %w", schemeContentful, headerContentfulSignedHeaders, headerContentfulTimestamp, ErrMalformedHeader)
	contentfulMissing         = fmt.Errorf("%s: a header named in %s: %w", schemeContentful, headerContentfulSignedHeaders, ErrMissingHeader)
	contentfulRepeated        = fmt.Errorf("%s: a header named in %s is sent twice: %w", schemeContentful, headerContentfulSignedHeaders, ErrMalformedHeader)
	contentfulNoMatch         = fmt.Errorf("%s: %w", schemeContentful, ErrNoMatch)
)

func init() {
	register(&scheme{
		Scheme: Scheme{
			Name:    schemeContentful,
			Keys:    KeySecrets,
			Forward: []string{headerContentfulTopic},
		},
		build:    buildContentful,
		sign:     signContentful,
		id:       []source{header(headerContentfulIdempotency)},
		typ:      []source{header(headerContentfulTopic)},
		signsURL: true,
		sender:   Sender{ID: SenderIDRandom},
	})
}

// contentfulVerifier verifies X-Contentful-Signature with the raw-byte
// SHA-256 keys of the base.
type contentfulVerifier struct {
	base
	publicPath string // the path of Config.PublicURL; "" for the request's
}

func buildContentful(cfg Config, b base) (Verifier, error) {
	v := &contentfulVerifier{base: b}
	if u := cfg.PublicURL; u != "" {
		if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
			return nil, errors.New("PublicURL must start with https:// or http://")
		}
		if strings.ContainsAny(u, "?#") {
			return nil, fmt.Errorf("PublicURL: for %s give the scheme, host and path; the query is the request's", schemeContentful)
		}
		v.publicPath, _ = contentfulURI(u)
	}
	return v, nil
}

// usesURL: the query is always the request's, even with a PublicURL.
func (v *contentfulVerifier) usesURL() bool { return true }

// Verify implements Verifier.
func (v *contentfulVerifier) Verify(req Request) (Result, error) {
	var (
		sigs   sigSet
		names  contentfulNames
		values [maxContentfulHeaders]string
	)
	ms, err := contentfulHeaders(req.Header, &sigs, &names, &values)
	if err != nil {
		return Result{}, err
	}

	path, query := contentfulURI(req.URL)
	if v.publicPath != "" {
		path = v.publicPath
	}
	for _, k := range v.keys {
		st := k.get()
		st.scratch = appendContentfulHead(st.scratch, req.Method, path, query, &names, &values)
		st.write(req.Body)
		ok := sigs.match(st.finish())
		k.put(st)
		if ok {
			// After the MAC: ErrTimestamp means a genuine request
			// outside the window, a forgery is ErrNoMatch.
			if err := v.checkTime(ms / 1000); err != nil {
				return Result{}, err
			}
			return v.meta.result(k.index, req.Header, req.Body, ""), nil
		}
	}
	return Result{}, contentfulNoMatch
}

// contentfulHeaders reads what Verify needs from the headers alone: the
// signature into sigs, the signed-header list into names, the trimmed
// value of each named header into values, and the timestamp in unix
// milliseconds. CheckHeaders calls it too, so a request it refuses is one
// Verify refuses with the same error.
func contentfulHeaders(h http.Header, sigs *sigSet, names *contentfulNames, values *[maxContentfulHeaders]string) (int64, error) {
	value, err := contentfulSignatureErrors.get(h, headerContentfulSignature)
	if err != nil {
		return 0, err
	}
	sigs.size = sha256.Size
	if !decodeHex(sigs.slot(), strings.TrimSpace(value)) {
		return 0, contentfulSignatureErrors.malformed
	}
	sigs.commit()

	list, err := contentfulListErrors.get(h, headerContentfulSignedHeaders)
	if err != nil {
		return 0, err
	}
	if !names.parse(list) {
		return 0, contentfulListErrors.malformed
	}
	if !names.signs(contentfulListName) || !names.signs(contentfulTimestampName) {
		return 0, contentfulUnsigned
	}
	ts, err := contentfulTimestampErrors.get(h, headerContentfulTimestamp)
	if err != nil {
		return 0, err
	}
	ts = strings.TrimSpace(ts)
	ms, ok := parseUnix(ts)
	if !ok {
		return 0, contentfulTimestampErrors.malformed
	}
	// The values of the other signed headers, found once for every key.
	for i, name := range names.list[:names.n] {
		vs := headerValues(h, name)
		switch {
		case len(vs) == 0:
			return 0, contentfulMissing
		case len(vs) > 1:
			return 0, contentfulRepeated
		}
		values[i] = strings.TrimSpace(vs[0])
	}
	return ms, nil
}

// contentfulNames is a parsed X-Contentful-Signed-Headers: the names as
// sent, trimmed, sorted as their lower-case forms and without repeats.
type contentfulNames struct {
	n    int
	list [maxContentfulHeaders]string
}

// parse reads a comma-separated list of header names. It reports false for
// an empty name, a name that is not a header name or is longer than
// maxContentfulName, and more than maxContentfulHeaders names.
func (c *contentfulNames) parse(value string) bool {
	c.n = 0
	for name := range strings.SplitSeq(value, ",") {
		name = strings.TrimSpace(name)
		if len(name) > maxContentfulName || !ValidHeaderName(name) {
			return false
		}
		// Insertion sort: lists are short and this allocates nothing.
		i := c.n
		for i > 0 && compareFold(c.list[i-1], name) > 0 {
			i--
		}
		if i > 0 && compareFold(c.list[i-1], name) == 0 {
			continue
		}
		if c.n == maxContentfulHeaders {
			return false
		}
		copy(c.list[i+1:c.n+1], c.list[i:c.n])
		c.list[i] = name
		c.n++
	}
	return true
}

// signs reports whether the list names the lower-case name lower.
func (c *contentfulNames) signs(lower string) bool {
	for _, name := range c.list[:c.n] {
		if compareFold(name, lower) == 0 {
			return true
		}
	}
	return false
}

// compareFold compares a and b as their ASCII lower-case forms.
func compareFold(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if ca, cb := lowerASCII(a[i]), lowerASCII(b[i]); ca != cb {
			return int(ca) - int(cb)
		}
	}
	return len(a) - len(b)
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// appendLower appends s in ASCII lower case.
func appendLower(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		dst = append(dst, lowerASCII(s[i]))
	}
	return dst
}

// headerValues returns h's values for name, in any case, without
// allocating the canonical key as http.Header.Values would. name is a
// valid header name of at most maxContentfulName bytes.
func headerValues(h http.Header, name string) []string {
	var buf [maxContentfulName]byte
	upper := true
	for i := 0; i < len(name); i++ {
		c := lowerASCII(name[i])
		if upper && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		buf[i] = c
		upper = c == '-'
	}
	return h[string(buf[:len(name)])]
}

// appendContentfulHead appends the signed content before the body: the
// method, the encoded path and the signed headers, each line ended by a
// newline. values holds the trimmed value of each name.
func appendContentfulHead(dst []byte, method, path, query string, names *contentfulNames, values *[maxContentfulHeaders]string) []byte {
	dst = append(dst, method...)
	dst = append(dst, '\n')
	dst = appendContentfulPath(dst, path, query)
	dst = append(dst, '\n')
	for i, name := range names.list[:names.n] {
		if i > 0 {
			dst = append(dst, ';')
		}
		dst = appendLower(dst, name)
		dst = append(dst, ':')
		if compareFold(name, contentfulListName) != 0 {
			dst = append(dst, values[i]...)
			continue
		}
		// The list itself, as verifyRequest rebuilds it.
		for j, n := range names.list[:names.n] {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendLower(dst, n)
		}
	}
	return append(dst, '\n')
}

// contentfulURI returns the path and query of url, a full URL or a path,
// as Contentful's getNormalizedEncodedURI splits them: the query ends at
// a second '?'. A full URL without a path has the path "/".
func contentfulURI(url string) (path, query string) {
	_, rest, full := strings.Cut(url, "://")
	if full {
		i := strings.IndexAny(rest, "/?")
		if i < 0 {
			return "/", ""
		}
		url = rest[i:]
	}
	path, query, _ = strings.Cut(url, "?")
	query, _, _ = strings.Cut(query, "?")
	if full && path == "" {
		path = "/"
	}
	return path, query
}

// appendContentfulPath appends path and query as getNormalizedEncodedURI
// encodes them: the path with encodeURI; the query, when not empty, after
// a '?', with querystring.escape and then encodeURI, which turns each '%'
// of the first escape into "%25".
func appendContentfulPath(dst []byte, path, query string) []byte {
	dst = appendEscaped(dst, path, encodeURIKeeps, "%")
	if query != "" {
		dst = append(dst, '?')
		dst = appendEscaped(dst, query, escapeKeeps, "%25")
	}
	return dst
}

// escapeKeeps are the bytes querystring.escape (and encodeURIComponent)
// leave as they are; encodeURIKeeps those encodeURI leaves.
var (
	escapeKeeps    = byteSet("-_.!~*'()")
	encodeURIKeeps = byteSet("-_.!~*'();,/?:@&=+$#")
)

func byteSet(extra string) (set [256]bool) {
	for c := range 256 {
		set[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
	}
	for i := 0; i < len(extra); i++ {
		set[extra[i]] = true
	}
	return set
}

// appendEscaped appends s with every byte not in keep written as prefix
// and two upper-case hex digits.
func appendEscaped(dst []byte, s string, keep [256]bool, prefix string) []byte {
	const digits = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if keep[c] {
			dst = append(dst, c)
			continue
		}
		dst = append(dst, prefix...)
		dst = append(dst, digits[c>>4], digits[c&0xf])
	}
	return dst
}

// signContentful signs body as Contentful does, for opts.Method (default
// POST) and the path and query of opts.URL (a URL or a path), with the
// headers of opts.Header, X-Contentful-Topic (opts.EventType) and
// X-Contentful-Idempotency-Key (opts.ID) signed besides the list and the
// timestamp.
func signContentful(secret string, body []byte, opts SignOptions) (http.Header, error) {
	h := http.Header{}
	for name, vs := range opts.Header {
		if len(vs) != 1 {
			return nil, fmt.Errorf("header %s: want one value, have %d", name, len(vs))
		}
		h.Set(name, vs[0])
	}
	setNonEmpty(h, headerContentfulTopic, opts.EventType)
	setNonEmpty(h, headerContentfulIdempotency, opts.ID)
	ts := opts.Timestamp
	if ts.IsZero() {
		ts = time.Now()
	}
	h.Set(headerContentfulTimestamp, strconv.FormatInt(ts.UnixMilli(), 10))

	var list []string
	for name := range h {
		list = append(list, strings.ToLower(name))
	}
	list = append(list, contentfulListName)
	var names contentfulNames
	if !names.parse(strings.Join(list, ",")) {
		return nil, fmt.Errorf("sign headers: want at most %d valid names", maxContentfulHeaders-2)
	}
	var values [maxContentfulHeaders]string
	for i, name := range names.list[:names.n] {
		values[i] = strings.TrimSpace(h.Get(name))
	}
	method := opts.Method
	if method == "" {
		method = http.MethodPost
	}
	path, query := contentfulURI(opts.URL)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(appendContentfulHead(nil, method, path, query, &names, &values))
	mac.Write(body)

	signed := make([]string, names.n)
	for i, name := range names.list[:names.n] {
		signed[i] = strings.ToLower(name)
	}
	h.Set(headerContentfulSignedHeaders, strings.Join(signed, ","))
	h.Set(headerContentfulSignature, hex.EncodeToString(mac.Sum(nil)))
	return h, nil
}

var _ Verifier = (*contentfulVerifier)(nil)
