package caddywebhook

import (
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/tracecontext"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/signature"
)

// ServeHTTP verifies, stores and acknowledges one webhook. It never calls
// next: the receiver answers every request itself. serve decides what
// becomes of the request; this is the one place that gives back its
// buffer and budget, answers and records the outcome.
func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	x := &exchange{info: requestInfo{source: rc.Source}}
	x.body.budget = &rc.inflight
	if rc.hideFromAccessLog(r) {
		defer rc.logHidden(r, &x.info)
	}
	o := rc.serve(w, r, x)
	x.body.release()
	rc.answer(w, r, x, o)
	return nil
}

// exchange is one request while the receiver handles it: what it told
// us, its body, and the scheme's answer to a handshake.
type exchange struct {
	info      requestInfo
	body      requestBody
	handshake *signature.HandshakeResponse // with outcomeHandshake
}

// serve verifies and stores one request and returns its outcome; it
// writes nothing to w, which it only needs to pace the body.
func (rc *Receiver) serve(w http.ResponseWriter, r *http.Request, x *exchange) outcome {
	if r.Method == http.MethodGet && rc.getAllowed {
		return rc.serveGET(r, x)
	}
	if r.Method != http.MethodPost {
		return outcomeMethodNotAllowed
	}
	if r.ContentLength > rc.maxBody {
		return outcomeTooLarge
	}

	// A request whose signature header is missing or malformed cannot
	// verify: refused before its body is read.
	req := signature.Request{Method: r.Method, Header: r.Header}
	if rc.needsURL || (rc.handshaker != nil && r.URL.RawQuery != "") {
		req.URL = requestURL(r)
	}
	if err := signature.CheckHeaders(rc.verifier, req); err != nil {
		return refusal(err)
	}

	// 1. The body, capped; memory beyond the pooled buffer is charged to
	// the receiver's bound until the signature is checked.
	body, err := x.body.read(w, r, bodyLimits{max: rc.maxBody, hint: r.ContentLength, minRate: rc.minBodyRate})
	switch {
	case errors.Is(err, errTooLarge):
		return outcomeTooLarge
	case errors.Is(err, errBusy):
		return outcomeBusy
	case errors.Is(err, errTooSlow):
		return outcomeTooSlow
	case err != nil:
		return outcomeBadRequest
	}

	// 2. Verify before anything else looks at the bytes: a handshake
	// first, answered and never stored, then an event.
	req.Body = body
	if rc.handshaker != nil {
		resp, ok, err := rc.handshaker.Handshake(req)
		if err != nil {
			return refusal(err)
		}
		if ok {
			return rc.acceptHandshake(x, resp)
		}
	}
	res, err := rc.verifier.Verify(req)
	x.body.releaseBudget()
	if err != nil {
		return refusal(err)
	}

	// 3. The delivery id and event type, from the verifier, checked here
	// so that both backends give the same answer for the same bytes.
	if !validEventText(res.DeliveryID) {
		return outcomeBadDeliveryID
	}
	x.info.deliveryID = res.DeliveryID
	if !validEventText(res.EventType) {
		return outcomeBadEventType
	}
	x.info.eventType = res.EventType

	// 4. Store, fanned out to the matching targets; 5. ServeHTTP
	// acknowledges what is on disk.
	return rc.store(r, x, res, body)
}

// store enqueues a verified event and returns the outcome to answer.
func (rc *Receiver) store(r *http.Request, x *exchange, res signature.Result, body []byte) outcome {
	store, err := rc.app.queueStore()
	if err == nil {
		payload := rc.keptSecret.payload(body) // verified: its secrets can go
		ev := queue.Event{
			Source:     rc.Source,
			DeliveryID: res.DeliveryID,
			EventType:  res.EventType,
			Headers:    rc.headers(x.info.headers[:0], r.Header),
			Payload:    payload,
			// The filters see what is stored, as a transform and the rule
			// test do later.
			Targets: rc.targetsFor(r, res.EventType, res.DeliveryID, payload),
			Trace:   tracecontext.FromRequest(r),
		}
		if res.OrderingKey != "" {
			ev.OrderingKey, ev.OrderingHold = orderingKey(res.OrderingKey), rc.orderingHold
		}
		// An event the store admitted before the refusal that began the
		// episode can finish after it: only one sent once the episode was
		// known says the space is back.
		episodeKnown := rc.diskLow.Load()
		var out queue.EnqueueResult
		if out, err = store.Enqueue(r.Context(), ev); err == nil {
			if episodeKnown && rc.diskLow.CompareAndSwap(true, false) {
				rc.logger.Info("free disk space is back above min_free_space; storing events again", zap.String("source", rc.Source))
			}
			switch {
			case out.Duplicate:
				return outcomeDuplicate
			case out.Jobs == 0:
				return outcomeNoTarget
			}
			return outcomeAccepted
		}
	}
	if errors.Is(err, queue.ErrDiskLow) {
		// Nothing was sent to the store, so the buffer is free again.
		if rc.diskLow.CompareAndSwap(false, true) {
			rc.logger.Warn("free disk space is below min_free_space; refusing events with 503 until space is freed",
				zap.String("source", rc.Source))
		}
		return outcomeDiskLow
	}
	// The buffer is not recycled: a store that gave up on the request may
	// still hold it.
	x.body.kept = true
	level := zapcore.ErrorLevel
	if r.Context().Err() != nil {
		// The client went away before the commit; it will retry.
		level = zapcore.DebugLevel
	}
	if ce := rc.logger.Check(level, "store webhook event"); ce != nil {
		ce.Write(zap.String("source", rc.Source), zap.String("delivery_id", res.DeliveryID), zap.Error(err))
	}
	return outcomeStoreFailed
}

// refusal is the outcome of a request or handshake that did not verify.
func refusal(err error) outcome {
	if errors.Is(err, signature.ErrTimestamp) {
		return outcomeStaleTimestamp
	}
	return outcomeBadSignature
}

// requestURL rebuilds the URL the sender requested: the scheme of the
// connection, the Host header and the request URI as sent, before any
// rewrite by an earlier handler.
func requestURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	uri := r.RequestURI
	if orig, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok && orig.RequestURI != "" {
		uri = orig.RequestURI
	}
	if uri == "" {
		uri = r.URL.RequestURI()
	}
	return scheme + "://" + r.Host + uri
}
