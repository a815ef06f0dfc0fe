package signature

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
)

// Helpers of the handshake functions (see Handshaker).

// maxChallenge bounds a challenge a handshake echoes or signs: senders
// send a few dozen bytes.
const maxChallenge = 1 << 10

// textAnswer echoes s as text/plain, with nosniff so that a browser never
// reads a reflected challenge as HTML.
func textAnswer(s string) HandshakeResponse {
	return HandshakeResponse{
		Status:      http.StatusOK,
		ContentType: "text/plain; charset=utf-8",
		Body:        []byte(s),
		Header:      http.Header{"X-Content-Type-Options": {"nosniff"}},
	}
}

// jsonAnswer answers with v as JSON.
func jsonAnswer(v any) HandshakeResponse {
	b, _ := json.Marshal(v) // maps of strings and numbers always marshal
	return HandshakeResponse{Status: http.StatusOK, ContentType: "application/json", Body: b}
}

// queryValue returns the first value of key in the query of rawURL,
// decoded, and whether it is there. Pairs that do not decode are passed
// over rather than failing the whole query, so one malformed pair does
// not hide the one asked for.
func queryValue(rawURL, key string) (string, bool) {
	_, query, ok := strings.Cut(rawURL, "?")
	if !ok {
		return "", false
	}
	for item := range strings.SplitSeq(query, "&") {
		k, v, _ := strings.Cut(item, "=")
		if k, err := url.QueryUnescape(k); err != nil || k != key {
			continue
		}
		if v, err := url.QueryUnescape(v); err == nil {
			return v, true
		}
	}
	return "", false
}

// equalSecret compares a presented secret with the configured one in
// constant time, through their digests so that the length does not show;
// an empty configured secret matches nothing.
func equalSecret(presented, configured string) bool {
	a, b := sha256.Sum256([]byte(presented)), sha256.Sum256([]byte(configured))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1 && configured != ""
}

// firstMAC returns the MAC of msg keyed with the first configured secret of
// v, the current one, as the handshakes that sign a challenge need; nil
// when v has no keys.
func firstMAC(v Verifier, msg string) []byte {
	b := coreOf(v)
	if b == nil || len(b.keys) == 0 {
		return nil
	}
	k := b.keys[0]
	st, sum := k.mac(nil, msg)
	out := append([]byte(nil), sum...)
	k.put(st)
	return out
}

// plainToken reports whether s is a short token of letters, digits and
// "-_.+/=": a challenge a handshake may sign. Its characters exclude ':'
// and '{', so no such token is the signed content of an event (Zoom's
// "v0:<ts>:<body>", a JSON body), and signing one cannot forge an event.
func plainToken(s string) bool {
	if s == "" || len(s) > maxChallenge {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("-_.+/=", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// echoable reports whether s may be echoed as a text/plain challenge:
// present, short and free of control characters.
func echoable(s string) bool {
	if s == "" || len(s) > maxChallenge {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return false
		}
	}
	return true
}
