package caddywebhook

import (
	"net/http"

	"go.uber.org/zap"

	"github.com/caddywebhook/caddywebhook/signature"
)

// serveGET decides a GET, for the schemes whose handshake is one: the
// handshake's answer, a refusal, or 405 for any other GET.
func (rc *Receiver) serveGET(r *http.Request, x *exchange) outcome {
	req := signature.Request{Method: r.Method, URL: requestURL(r), Header: r.Header}
	resp, ok, err := rc.handshaker.Handshake(req)
	switch {
	case err != nil:
		return refusal(err)
	case ok:
		return rc.acceptHandshake(x, resp)
	}
	return outcomeMethodNotAllowed
}

// acceptHandshake keeps the scheme's answer to a verified handshake for
// ServeHTTP to write. A secret the sender issues in it is written to
// IssuedSecretFile first; when it cannot be, the handshake is refused,
// since confirming it would subscribe an endpoint that cannot verify what
// follows.
func (rc *Receiver) acceptHandshake(x *exchange, resp signature.HandshakeResponse) outcome {
	if resp.IssuedSecret != "" {
		if rc.IssuedSecretFile == "" {
			return outcomeBadSignature
		}
		if err := writeIssuedSecret(rc.IssuedSecretFile, resp.IssuedSecret); err != nil {
			// The error names the file, never the secret.
			rc.logger.Warn("handshake secret not kept", zap.String("source", rc.Source), zap.Error(err))
			return outcomeBadSignature
		}
		rc.logger.Info("handshake secret written; reload to verify with it",
			zap.String("source", rc.Source), zap.String("file", rc.IssuedSecretFile))
	}
	x.handshake = &resp
	return outcomeHandshake
}

// writeHandshake writes the scheme's answer to a handshake.
func writeHandshake(w http.ResponseWriter, resp *signature.HandshakeResponse) {
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	if resp.ContentType != "" {
		h.Set("Content-Type", resp.ContentType)
	}
	w.WriteHeader(resp.Status)
	w.Write(resp.Body)
}
