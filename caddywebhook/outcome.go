package caddywebhook

import (
	"net"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddywebhook/caddywebhook/queue"
)

// storeFailedRetryAfter is the Retry-After of a 503 store_failed, in
// seconds: a store that failed or did not answer within store_timeout (a
// database restarting, a network partition) is usually back in seconds.
const storeFailedRetryAfter = "5"

// answer writes the outcome's answer, with an empty body unless it is a
// handshake's, and records it. An answer that leaves the body unread says
// Connection: close: otherwise Go's server would first read up to 256 KiB
// of what is left to keep the connection, and a sender that stopped
// sending would hold the status line back until read_body_idle (1 minute
// by default). HTTP/2 needs no such header: the stream is reset alone.
func (rc *Receiver) answer(w http.ResponseWriter, r *http.Request, x *exchange, o outcome) {
	h := w.Header()
	if !x.body.whole && r.ContentLength != 0 && r.ProtoMajor == 1 {
		h.Set("Connection", "close")
	}
	status := outcomeStatus[o]
	switch o {
	case outcomeAccepted, outcomeDuplicate, outcomeNoTarget:
		if rc.acceptStatus != 0 {
			status = rc.acceptStatus
		}
	case outcomeBusy:
		h.Set("Retry-After", busyRetryAfter)
	case outcomeDiskLow:
		h.Set("Retry-After", diskLowRetryAfter)
	case outcomeStoreFailed:
		h.Set("Retry-After", storeFailedRetryAfter)
	case outcomeMethodNotAllowed:
		allow := http.MethodPost
		if rc.getAllowed {
			allow = "GET, POST"
		}
		h.Set("Allow", allow)
	case outcomeHandshake:
		rc.record(r, &x.info, o, x.handshake.Status)
		writeHandshake(w, x.handshake)
		return
	}
	rc.record(r, &x.info, o, status)
	w.WriteHeader(status)
}

// record records the outcome in the access log, the placeholders and the
// metrics. The access log's field is added only where the server writes
// an access line for r: Caddy gives every request its extra fields, and
// each Add clears a sync.Map and grows a slice, 5 % of all the bytes an
// ingest request allocates, for an access line never written.
func (rc *Receiver) record(r *http.Request, info *requestInfo, o outcome, status int) {
	info.outcome, info.status = o, status
	ctx := r.Context()
	if extra, ok := ctx.Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields); ok && accessLogged(r) {
		extra.Add(zap.Object("webhook", info))
	}
	if repl, ok := ctx.Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		repl.Map(info.placeholder)
	}
	if c := rc.received[o]; c != nil {
		c.Inc()
	}
	tails.publishReceived(info)
}

// accessLogged reports whether r's server writes an access line for r,
// as Caddy's server decides (its shouldLogRequest): a server with logs,
// and r's host mapped to a logger, or not skipped. The Caddyfile adapter
// skips every site without a log directive once another site of the
// server logs. Outside a Caddy server (a handler called directly) it says
// yes.
func accessLogged(r *http.Request) bool {
	srv, ok := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if !ok {
		return true
	}
	logs := srv.Logs
	if logs == nil {
		return false
	}
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	for name := range logs.LoggerNames {
		if certmagic.MatchWildcard(host, name) {
			return true
		}
	}
	for _, skip := range logs.SkipHosts {
		if certmagic.MatchWildcard(host, skip) {
			return false
		}
	}
	return !logs.SkipUnmappedHosts
}

// outcome is what became of one request.
type outcome uint8

// The outcomes, in the order of outcomeWords and outcomeStatus.
const (
	outcomeAccepted outcome = iota
	outcomeDuplicate
	outcomeNoTarget
	outcomeBadSignature
	outcomeStaleTimestamp
	outcomeTooLarge
	outcomeMethodNotAllowed
	outcomeStoreFailed
	outcomeBadRequest
	outcomeHandshake
	outcomeBadDeliveryID
	outcomeBadEventType
	outcomeBusy
	outcomeTooSlow
	outcomeDiskLow
	numOutcomes
)

var outcomeWords = [numOutcomes]string{
	outcomeAccepted:         "accepted",
	outcomeDuplicate:        "duplicate",
	outcomeNoTarget:         "no_target",
	outcomeBadSignature:     "bad_signature",
	outcomeStaleTimestamp:   "stale_timestamp",
	outcomeTooLarge:         "too_large",
	outcomeMethodNotAllowed: "method_not_allowed",
	outcomeStoreFailed:      "store_failed",
	outcomeBadRequest:       "bad_request",
	outcomeHandshake:        "handshake",
	outcomeBadDeliveryID:    "bad_delivery_id",
	outcomeBadEventType:     "bad_event_type",
	outcomeBusy:             "busy",
	outcomeTooSlow:          "too_slow",
	outcomeDiskLow:          "disk_low",
}

var outcomeStatus = [numOutcomes]int{
	outcomeAccepted:         http.StatusAccepted,
	outcomeDuplicate:        http.StatusAccepted,
	outcomeNoTarget:         http.StatusAccepted,
	outcomeBadSignature:     http.StatusUnauthorized,
	outcomeStaleTimestamp:   http.StatusUnauthorized,
	outcomeTooLarge:         http.StatusRequestEntityTooLarge,
	outcomeMethodNotAllowed: http.StatusMethodNotAllowed,
	outcomeStoreFailed:      http.StatusServiceUnavailable,
	outcomeBadRequest:       http.StatusBadRequest,
	outcomeHandshake:        http.StatusOK, // the scheme's answer says
	outcomeBadDeliveryID:    http.StatusBadRequest,
	outcomeBadEventType:     http.StatusBadRequest,
	outcomeBusy:             http.StatusServiceUnavailable,
	outcomeTooSlow:          http.StatusRequestTimeout,
	outcomeDiskLow:          http.StatusServiceUnavailable,
}

// String returns the outcome word.
func (o outcome) String() string { return outcomeWords[o] }

// requestInfo is what one request told us, for the access log and the
// placeholders. One allocation serves both, and the event's forwarded
// headers; it is not changed after answer.
type requestInfo struct {
	source     string
	deliveryID string
	eventType  string
	outcome    outcome
	status     int // the answer's status code
	// headers backs the event's Headers: at most three are forwarded
	// (content type, the scheme's event header, an event_type header).
	headers [3]queue.Header
}

// MarshalLogObject implements zapcore.ObjectMarshaler.
func (i *requestInfo) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("source", i.source)
	enc.AddString("outcome", i.outcome.String())
	if i.deliveryID != "" {
		enc.AddString("delivery_id", i.deliveryID)
	}
	if i.eventType != "" {
		enc.AddString("event_type", i.eventType)
	}
	return nil
}

// placeholder is a caddy.ReplacerFunc for the {webhook.*} placeholders.
func (i *requestInfo) placeholder(key string) (any, bool) {
	switch key {
	case "webhook.outcome":
		return i.outcome.String(), true
	case "webhook.source":
		return i.source, true
	case "webhook.delivery_id":
		return i.deliveryID, true
	case "webhook.event_type":
		return i.eventType, true
	}
	return nil, false
}

// Interface guards
var (
	_ zapcore.ObjectMarshaler = (*requestInfo)(nil)
)
