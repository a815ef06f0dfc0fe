package caddywebhook

import (
	"net"
	"net/http"
	"net/url"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddywebhook/caddywebhook/signature"
)

// receiverSecrets is what a receiver keeps out of the store and out of
// Caddy's access log, from what its scheme declares (signature.Scheme's
// SecretFields, SecretQuery and SecretHeaders).
//
// A secret-bearing body field (Microsoft Graph's clientState, Slack's
// verification token) is replaced, after the body verified and before it
// is stored, by the JSON string signature.RedactedMarker, so the store,
// the admin API, the dashboard, the tail and the targets never see it.
//
// A secret-bearing query parameter or header (Meta's hub.verify_token,
// Asana's X-Hook-Secret, echoed in the response too) cannot be taken out
// of the access line: Caddy logs a copy of the request made before any
// handler runs, and the response headers as they were sent. So a request
// that carries one sets Caddy's log_skip variable, which drops its access
// line, and the receiver logs a line of its own instead, without the
// query string or any header.
type receiverSecrets struct {
	scheme  string
	fields  bool // the scheme declares secret-bearing body fields
	query   []string
	headers []string
}

func newReceiverSecrets(d signature.Scheme) receiverSecrets {
	return receiverSecrets{scheme: d.Name, fields: d.RedactsBody(), query: d.SecretQuery, headers: d.SecretHeaders}
}

// payload returns body as it is stored: itself, or a copy with the
// secret-bearing fields replaced.
func (s *receiverSecrets) payload(body []byte) []byte {
	if !s.fields {
		return body
	}
	return signature.RedactSecrets(s.scheme, body)
}

// carried reports whether r holds a secret in a part the access log
// records: a declared header, or a declared query parameter however it is
// encoded (the handshakes decode the names too).
func (s *receiverSecrets) carried(r *http.Request) bool {
	for _, h := range s.headers {
		if len(r.Header[h]) > 0 {
			return true
		}
	}
	if len(s.query) == 0 || r.URL.RawQuery == "" {
		return false
	}
	q, _ := url.ParseQuery(r.URL.RawQuery) // the pairs that decode
	for _, name := range s.query {
		if _, ok := q[name]; ok {
			return true
		}
	}
	return false
}

// hideFromAccessLog drops the access line of a request that carries a
// secret, and reports whether it did; the caller then logs the request
// with logHidden once it is answered. A server without an access log has
// no line to drop, and gets none in its stead: a line per request there
// would be one per forged request too.
func (rc *Receiver) hideFromAccessLog(r *http.Request) bool {
	if !rc.keptSecret.carried(r) || !accessLogged(r) {
		return false
	}
	caddyhttp.SetVar(r.Context(), caddyhttp.LogSkipVar, true)
	return true
}

// logHidden writes the line that stands in for a dropped access line:
// what the access line's webhook object says, with the method, the path
// without its query and the client address.
func (rc *Receiver) logHidden(r *http.Request, info *requestInfo) {
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		ip = r.RemoteAddr
	}
	rc.logger.Info("request carrying a secret kept out of the access log",
		zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.String("remote_ip", ip),
		zap.Object("webhook", info))
}
