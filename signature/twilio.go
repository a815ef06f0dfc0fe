package signature

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// Twilio signs the URL it requested followed by the POST parameters sorted
// by name, each as its name and value with no separator, values decoded,
// with HMAC-SHA1 keyed with the account's Auth Token, in base64 in
// X-Twilio-Signature (https://www.twilio.com/docs/usage/webhooks/webhooks-security).
// Requests with a JSON body carry bodySHA256=<hex SHA-256 of the body> in
// the URL's query instead: the URL alone is signed and the body must hash
// to that value (twilio-node's validateRequestWithBody). A URL matched by
// a Webhook Rule is signed with HMAC-SHA256 and the rule's shared key,
// which X-Twilio-Webhooks-Signature-Settings announces with
// algorithm=HMAC_SHA256.
//
// The URL is the public one, query included. Twilio is inconsistent about
// an explicit default port, so, as its libraries do, the URL is tried as
// sent and with the port added (":443", ":80") or removed. There is no
// timestamp and no delivery id: the body hash deduplicates retries.
const (
	headerTwilioSignature = "X-Twilio-Signature"
	headerTwilioSettings  = "X-Twilio-Webhooks-Signature-Settings"
	schemeTwilio          = "twilio"
)

var (
	twilioSignatureErrors = newHeaderErrors(schemeTwilio, headerTwilioSignature)
	twilioNoMatch         = fmt.Errorf("%s: %w", schemeTwilio, ErrNoMatch)
)

func init() {
	register(&scheme{
		Scheme:   Scheme{Name: schemeTwilio, Keys: KeySecrets, Forward: []string{"I-Twilio-Idempotency-Token"}},
		build:    buildTwilio,
		sign:     signTwilio,
		signsURL: true,
		// Twilio posts its parameters as a form; a JSON body is signed
		// through bodySHA256 in the URL instead.
		sender: Sender{FormUnlessJSON: true},
	})
}

// twilioVerifier verifies X-Twilio-Signature: with the SHA-1 keys, or the
// SHA-256 keys for a Webhook Rule.
type twilioVerifier struct {
	base
	sha256Keys []*macKey
	sha1Keys   []*macKey
	publicURL  string // scheme, host and path; the query is the request's
}

func buildTwilio(cfg Config, b base) (Verifier, error) {
	if u := cfg.PublicURL; u != "" {
		if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
			return nil, errors.New("PublicURL must start with https:// or http://")
		}
		if strings.ContainsAny(u, "?#") {
			return nil, fmt.Errorf("PublicURL: for %s give the scheme, host and path; the query is the request's", schemeTwilio)
		}
	}
	return &twilioVerifier{
		base:       b,
		sha1Keys:   rawKeys(sha1.New, cfg.Secrets),
		sha256Keys: b.keys,
		publicURL:  cfg.PublicURL,
	}, nil
}

// usesURL: the query is always the request's, even with a PublicURL.
func (v *twilioVerifier) usesURL() bool { return true }

// Verify implements Verifier.
func (v *twilioVerifier) Verify(req Request) (Result, error) {
	value, err := twilioSignatureErrors.get(req.Header, headerTwilioSignature)
	if err != nil {
		return Result{}, err
	}
	keys, sigs := v.sha1Keys, sigSet{size: sha1.Size}
	if strings.Contains(req.Header.Get(headerTwilioSettings), "algorithm=HMAC_SHA256") {
		keys, sigs.size = v.sha256Keys, sha256.Size
	}
	if !decodeBase64(sigs.slot(), value) {
		return Result{}, twilioSignatureErrors.malformed
	}
	sigs.commit()

	url := req.URL
	if v.publicURL != "" {
		url = v.publicURL
		if i := strings.IndexByte(req.URL, '?'); i >= 0 {
			url += req.URL[i:]
		}
	}
	var params *twilioParams
	if want, ok := queryValue(url, "bodySHA256"); ok {
		// The JSON form: the URL alone is signed, the body hashed.
		sum := sha256.Sum256(req.Body)
		var got [2 * sha256.Size]byte
		hex.Encode(got[:], sum[:])
		if subtle.ConstantTimeCompare(got[:], []byte(strings.ToLower(want))) != 1 {
			return Result{}, twilioNoMatch
		}
	} else if len(req.Body) > 0 {
		params = twilioParamsPool.Get().(*twilioParams)
		defer params.put()
		if !params.parse(req.Body) {
			return Result{}, twilioNoMatch
		}
	}
	urls := [2]string{url, otherPortURL(url)}
	n := 1
	if urls[1] != "" {
		n = 2
	}
	for _, k := range keys {
		for _, u := range urls[:n] {
			st := k.get()
			st.writeString(u)
			params.write(st)
			ok := sigs.match(st.finish())
			k.put(st)
			if ok {
				return v.meta.result(k.index, req.Header, req.Body, ""), nil
			}
		}
	}
	return Result{}, twilioNoMatch
}

// twilioParams are the decoded parameters of a form body: names and values
// in buf, their bounds in pairs.
type twilioParams struct {
	buf   []byte
	pairs []twilioPair
}

type twilioPair struct{ name, value, end int } // buf[name:value], buf[value:end]

var twilioParamsPool = sync.Pool{New: func() any { return new(twilioParams) }}

func (p *twilioParams) put() {
	if cap(p.buf) <= maxPooledMessage {
		twilioParamsPool.Put(p)
	}
}

// parse decodes an application/x-www-form-urlencoded body and sorts its
// parameters by name, then value, dropping exact duplicates, as Twilio's
// libraries order them. It reports false for an escape that does not
// decode.
func (p *twilioParams) parse(body []byte) bool {
	p.buf, p.pairs = p.buf[:0], p.pairs[:0]
	for rest := body; len(rest) > 0; {
		var item []byte
		item, rest, _ = bytes.Cut(rest, []byte("&"))
		if len(item) == 0 {
			continue
		}
		name, value, _ := bytes.Cut(item, []byte("="))
		pair := twilioPair{name: len(p.buf)}
		var ok bool
		if p.buf, ok = appendUnescaped(p.buf, name); !ok {
			return false
		}
		pair.value = len(p.buf)
		if p.buf, ok = appendUnescaped(p.buf, value); !ok {
			return false
		}
		pair.end = len(p.buf)
		p.pairs = append(p.pairs, pair)
	}
	slices.SortFunc(p.pairs, func(a, b twilioPair) int {
		if c := bytes.Compare(p.buf[a.name:a.value], p.buf[b.name:b.value]); c != 0 {
			return c
		}
		return bytes.Compare(p.buf[a.value:a.end], p.buf[b.value:b.end])
	})
	p.pairs = slices.CompactFunc(p.pairs, func(a, b twilioPair) bool {
		return bytes.Equal(p.buf[a.name:a.end], p.buf[b.name:b.end]) && a.value-a.name == b.value-b.name
	})
	return true
}

// write adds the sorted parameters to the MAC; a nil p adds nothing.
func (p *twilioParams) write(st *macState) {
	if p == nil {
		return
	}
	for _, pair := range p.pairs {
		st.write(p.buf[pair.name:pair.end])
	}
}

// appendUnescaped appends s decoded as a form value: '+' is a space and
// %XX a byte.
func appendUnescaped(dst, s []byte) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '+':
			dst = append(dst, ' ')
		case '%':
			if i+2 >= len(s) {
				return dst, false
			}
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if !ok1 || !ok2 {
				return dst, false
			}
			dst = append(dst, hi<<4|lo)
			i += 2
		default:
			dst = append(dst, c)
		}
	}
	return dst, true
}

// otherPortURL returns url with its port removed when it has one, or the
// scheme's default port added when it has none; "" when url has no
// http(s) scheme or host.
func otherPortURL(url string) string {
	scheme, rest, ok := strings.Cut(url, "://")
	var port string
	switch {
	case !ok:
		return ""
	case scheme == "https":
		port = ":443"
	case scheme == "http":
		port = ":80"
	default:
		return ""
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	host := rest[:end]
	if host == "" {
		return ""
	}
	// The port follows the last ':' after any userinfo and IPv6 literal.
	hostStart := strings.LastIndexByte(host, '@') + 1
	colon := strings.LastIndexByte(host, ':')
	if colon >= hostStart && colon > strings.LastIndexByte(host, ']') {
		return scheme + "://" + host[:colon] + rest[end:]
	}
	return scheme + "://" + host + port + rest[end:]
}

// signTwilio signs opts.URL and the body's form parameters, or, when
// opts.URL carries bodySHA256, the URL alone, with HMAC-SHA1.
func signTwilio(secret string, body []byte, opts SignOptions) (http.Header, error) {
	st := &macState{h: hmac.New(sha1.New, []byte(secret))}
	st.writeString(opts.URL)
	if _, ok := queryValue(opts.URL, "bodySHA256"); !ok && len(body) > 0 {
		var p twilioParams
		if !p.parse(body) {
			return nil, errors.New("body is not form-encoded")
		}
		p.write(st)
	}
	h := http.Header{}
	h.Set(headerTwilioSignature, base64.StdEncoding.EncodeToString(st.finish()))
	return h, nil
}

var _ Verifier = (*twilioVerifier)(nil)
