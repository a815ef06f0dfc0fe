package caddywebhook

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/forward"
	"github.com/caddywebhook/caddywebhook/caddywebhook/rules"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/signature"
	"github.com/caddywebhook/caddywebhook/signature/samples"
)

// The operators' endpoints beside the jobs': events, resend, send to a
// target, injected test events and the live tail.

// parseEventFilter reads the filters of events that the jobs and the
// events listings both take: source, event_type, delivery_id, since and
// until.
func (a *adminAPI) parseEventFilter(get func(string) string) (queue.EventFilter, error) {
	f := queue.EventFilter{Source: get("source"), EventType: get("event_type"), DeliveryID: get("delivery_id")}
	if f.DeliveryID != "" && f.Source == "" {
		return f, badParam("delivery_id", "needs source too: delivery ids are unique per source only")
	}
	var err error
	f.Since, f.Until, err = a.timeRange(get("since"), get("until"))
	return f, err
}

// timeRange parses since and until: an RFC 3339 time, or a duration back
// from now such as 90m, 1h or 2d.
func (a *adminAPI) timeRange(since, until string) (time.Time, time.Time, error) {
	now := a.clock()
	parse := func(name, s string) (time.Time, error) {
		if s == "" {
			return time.Time{}, nil
		}
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			return t, nil
		}
		if d, err := caddy.ParseDuration(s); err == nil && d >= 0 {
			return now.Add(-d), nil
		}
		return time.Time{}, badParam(name, "must be an RFC 3339 time or a duration back from now such as 1h or 2d, not %q", s)
	}
	lo, err := parse("since", since)
	if err != nil {
		return lo, lo, err
	}
	hi, err := parse("until", until)
	if err != nil {
		return lo, hi, err
	}
	if !lo.IsZero() && !hi.IsZero() && !lo.Before(hi) {
		return lo, hi, badParam("until", "%s is not after since %s", hi.Format(time.RFC3339), lo.Format(time.RFC3339))
	}
	return lo, hi, nil
}

// pageParams reads limit and cursor; what is not given stays 0.
func pageParams(get func(string) string) (limit int, cursor int64, err error) {
	if s := get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > adminapi.MaxLimit {
			return 0, 0, badParam("limit", "must be a whole number from 1 to %d, not %q", adminapi.MaxLimit, s)
		}
		limit = n
	}
	if s := get("cursor"); s != "" {
		c, err := strconv.ParseInt(s, 10, 64)
		if err != nil || c < 1 {
			return 0, 0, badParam("cursor", "must be a positive id from next_cursor, not %q", s)
		}
		cursor = c
	}
	return limit, cursor, nil
}

func (a *adminAPI) handleEvents(w http.ResponseWriter, r *http.Request, q *runningConfig, _ int64) error {
	query := r.URL.Query()
	if query.Has("where") {
		return a.handleEventSearch(w, r, q)
	}
	var p queue.EventListParams
	var err error
	if p.EventFilter, err = a.parseEventFilter(query.Get); err != nil {
		return err
	}
	switch s := query.Get("has_target"); s {
	case "":
	case "true", "false":
		v := s == "true"
		p.HasTarget = &v
	default:
		return badParam("has_target", "must be true or false, not %q", s)
	}
	if p.Limit, p.Cursor, err = pageParams(query.Get); err != nil {
		return err
	}
	page, err := q.Store.ListEvents(r.Context(), p)
	if err != nil {
		return storeError(0, err)
	}
	if page.Events == nil {
		page.Events = []queue.EventSummary{}
	}
	return adminapi.WriteJSON(w, http.StatusOK, page)
}

func (a *adminAPI) handleEvent(w http.ResponseWriter, r *http.Request, q *runningConfig, id int64) error {
	ev, err := q.Store.GetEvent(r.Context(), id)
	if err != nil {
		return eventStoreError(id, err)
	}
	if ev.Headers == nil {
		ev.Headers = []queue.Header{}
	}
	resp := adminapi.EventResponse{EventDetail: ev}
	if utf8.Valid(ev.Payload) {
		resp.PayloadText = string(ev.Payload)
	}
	for _, j := range ev.Jobs {
		if f := q.filterTook(queue.Route{Source: ev.Source, Target: j.Target}); f != "" {
			if resp.Filters == nil {
				resp.Filters = make(map[string]string)
			}
			resp.Filters[j.Target] = f
		}
	}
	return adminapi.WriteJSON(w, http.StatusOK, resp)
}

func (a *adminAPI) handleSendEvent(w http.ResponseWriter, r *http.Request, q *runningConfig, id int64) error {
	target := r.URL.Query().Get("target")
	if target == "" {
		return badParam("target", "is required: the target of the event's source to send it to")
	}
	ev, err := q.Store.GetEvent(r.Context(), id)
	if err != nil {
		return eventStoreError(id, err)
	}
	src, ok := q.source(ev.Source)
	if !ok {
		return apiError(http.StatusBadRequest, "source %q of event %d is not in the running config", ev.Source, id)
	}
	if !slices.Contains(src.targets, target) {
		return badParam("target", "%q is not a target of source %q in the running config (its targets: %s)",
			target, ev.Source, strings.Join(src.targets, ", "))
	}
	jobID, err := q.Store.AddJob(r.Context(), id, target)
	if err != nil {
		return eventStoreError(id, err)
	}
	adminLogger().Info("webhook event sent to a target", zap.String("source", ev.Source), zap.String("target", target),
		zap.Int64("event_id", id), zap.Int64("job_id", jobID), zap.String("delivery_id", ev.DeliveryID))
	return adminapi.WriteJSON(w, http.StatusOK, adminapi.SendEventResponse{EventID: id, JobID: jobID, Target: target})
}

func (a *adminAPI) handleResend(w http.ResponseWriter, r *http.Request, q *runningConfig, id int64) error {
	if err := q.Store.Resend(r.Context(), id); err != nil {
		return eventStoreError(id, err)
	}
	adminLogger().Info("webhook job resent", zap.Int64("job_id", id))
	return adminapi.WriteJSON(w, http.StatusOK, adminapi.ResendResponse{ID: id, Resent: true})
}

// maxInjectOverhead is what the JSON around an injected body may add.
const maxInjectOverhead = 64 << 10

func (a *adminAPI) handleInject(w http.ResponseWriter, r *http.Request, q *runningConfig, _ int64) error {
	// The body cap is the source's, which the body names: read up to the
	// largest one a source may have (base64 adds a third) and check after.
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxMaxBody/3*4+maxInjectOverhead+1))
	if err != nil {
		return apiError(http.StatusBadRequest, "read request body: %v", err)
	}
	if len(raw) > maxMaxBody/3*4+maxInjectOverhead {
		return apiError(http.StatusRequestEntityTooLarge, "request body is larger than any source accepts")
	}
	var req adminapi.InjectRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return apiError(http.StatusBadRequest, "decode request body: %v", err)
	}
	if req.Source == "" {
		return apiError(http.StatusBadRequest, "source is required")
	}
	src, ok := q.source(req.Source)
	if !ok {
		return apiError(http.StatusBadRequest, "source %q is not in the running config", req.Source)
	}
	var payload []byte
	var sampleHeaders []queue.Header
	switch {
	case req.Sample != "" && (req.Body != nil || req.BodyBase64 != ""):
		return apiError(http.StatusBadRequest, "give a sample or a body, not both")
	case len(req.Set) > 0 && req.Sample == "":
		return apiError(http.StatusBadRequest, "set changes the fields of a sample: name one")
	case req.Sample != "":
		ev, err := injectSample(src.receiver, req)
		if err != nil {
			return err
		}
		payload, sampleHeaders = ev.Body, src.receiver.headers(nil, ev.Header)
		req.EventType = cmp.Or(req.EventType, ev.EventType)
		req.DeliveryID = cmp.Or(req.DeliveryID, ev.DeliveryID)
	case req.Body != nil && req.BodyBase64 != "":
		return apiError(http.StatusBadRequest, "give body or body_base64, not both")
	case req.BodyBase64 != "":
		if payload, err = base64.StdEncoding.DecodeString(req.BodyBase64); err != nil {
			return apiError(http.StatusBadRequest, "body_base64: %v", err)
		}
	case req.Body != nil:
		payload = []byte(*req.Body)
	default:
		payload = []byte("{}")
	}
	if int64(len(payload)) > src.maxBody {
		return apiError(http.StatusRequestEntityTooLarge, "body of %d bytes is larger than source %q accepts (%d)", len(payload), req.Source, src.maxBody)
	}
	headers, err := injectHeaders(sampleHeaders, req.Headers)
	if err != nil {
		return err
	}
	if req.DeliveryID == "" {
		b := make([]byte, 12)
		rand.Read(b)
		req.DeliveryID = "injected-" + hex.EncodeToString(b)
	}
	// An injected event meets the targets' filters as a received one does.
	targets := src.targetsFor(&rules.Event{Body: payload, Header: storedHeaders(headers),
		EventType: req.EventType, Source: req.Source, DeliveryID: req.DeliveryID})
	res, err := q.Store.Enqueue(r.Context(), queue.Event{
		Source:     req.Source,
		DeliveryID: req.DeliveryID,
		EventType:  req.EventType,
		Headers:    headers,
		Payload:    payload,
		Targets:    targets,
	})
	if err != nil {
		return storeError(0, err)
	}
	word := outcomeAccepted
	switch {
	case res.Duplicate:
		word = outcomeDuplicate
	case res.Jobs == 0:
		word = outcomeNoTarget
	}
	adminLogger().Info("webhook event injected", zap.String("source", req.Source), zap.String("outcome", word.String()),
		zap.String("delivery_id", req.DeliveryID), zap.String("event_type", req.EventType),
		zap.Int64("event_id", res.EventID), zap.Int("jobs", res.Jobs), zap.Bool("injected", true))
	tails.publish(adminapi.TailLine{Kind: adminapi.TailReceived, Source: req.Source, Outcome: word.String(), DeliveryID: req.DeliveryID,
		EventType: req.EventType, EventID: res.EventID, Injected: true})
	if res.Duplicate || targets == nil {
		targets = []string{}
	}
	return adminapi.WriteJSON(w, http.StatusOK, adminapi.InjectResponse{EventID: res.EventID, DeliveryID: req.DeliveryID, EventType: req.EventType,
		Duplicate: res.Duplicate, Jobs: res.Jobs, Targets: targets})
}

// injectSample renders the sample req names for the scheme of the source's
// receiver rc. Its errors name the parameter at fault.
func injectSample(rc *Receiver, req adminapi.InjectRequest) (*samples.Event, error) {
	var known bool
	for _, info := range samples.List() {
		known = known || info.Scheme == rc.Scheme
	}
	if !known {
		return nil, caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: paramError{param: "sample",
			err: fmt.Errorf("source %s's scheme %s has no sample events (they exist for %s): give a body", req.Source, rc.Scheme,
				strings.Join(samples.Schemes(), ", "))}}
	}
	if _, ok := samples.Lookup(rc.Scheme, req.Sample); !ok {
		var names []string
		for _, info := range samples.List() {
			if info.Scheme == rc.Scheme {
				names = append(names, info.Event)
			}
		}
		return nil, caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: paramError{param: "sample",
			err: fmt.Errorf("no %s sample of event %q: there are %s; or give a body", rc.Scheme, req.Sample, strings.Join(names, ", "))}}
	}
	ev, err := samples.Render(rc.Scheme, req.Sample, samples.Options{Set: req.Set})
	if err != nil {
		// The name is known: what failed is an override.
		return nil, caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: paramError{param: "set", err: err}}
	}
	return ev, nil
}

// injectHeaders checks the headers of an injected event and returns them
// as stored: Content-Type (application/json unless given), those of a
// sample the receiver stores, the given ones in name order (over the
// sample's), and the injected marker last.
func injectHeaders(sample []queue.Header, given map[string]string) ([]queue.Header, error) {
	out := []queue.Header{{Name: "Content-Type", Value: "application/json"}}
	over := make(map[string]bool, len(given))
	for name := range given {
		over[textproto.CanonicalMIMEHeaderKey(name)] = true
	}
	for _, h := range sample {
		if canon := textproto.CanonicalMIMEHeaderKey(h.Name); over[canon] || canon == adminapi.InjectedHeader {
			continue
		}
		if textproto.CanonicalMIMEHeaderKey(h.Name) == "Content-Type" {
			out[0].Value = h.Value
			continue
		}
		out = append(out, h)
	}
	names := make([]string, 0, len(given))
	for name := range given {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		value := given[name]
		canon := textproto.CanonicalMIMEHeaderKey(name)
		switch {
		case !signature.ValidHeaderName(name):
			return nil, apiError(http.StatusBadRequest, "header %q: not a valid header name", name)
		case !forward.ValidHeaderValue(value):
			return nil, apiError(http.StatusBadRequest, "header %s: the value has a control character", name)
		case canon == adminapi.InjectedHeader:
			return nil, apiError(http.StatusBadRequest, "header %s is set by the server", name)
		case canon == "Content-Type":
			out[0].Value = value
		default:
			out = append(out, queue.Header{Name: name, Value: value})
		}
	}
	return append(out, queue.Header{Name: adminapi.InjectedHeader, Value: "1"}), nil
}

// tailKeepalive is how often an idle tail sends a comment line, so proxies
// and the client can tell a quiet stream from a dead one.
const tailKeepalive = 15 * time.Second

func (a *adminAPI) handleTail(w http.ResponseWriter, r *http.Request, q *runningConfig, _ int64) error {
	query := r.URL.Query()
	if o := query.Get("outcome"); o != "" && !slices.Contains(tailOutcomes(), o) {
		return badParam("outcome", "must be an outcome word (%s), not %q", strings.Join(tailOutcomes(), ", "), o)
	}
	rc := http.NewResponseController(w)
	sub := tails.subscribe(tailFilter{source: query.Get("source"), target: query.Get("target"), outcome: query.Get("outcome")}, q.maxTails)
	if sub == nil {
		w.Header().Set("Retry-After", "30")
		return apiError(http.StatusServiceUnavailable, "too many live tails open (max_tails); close one or raise max_tails")
	}
	defer tails.unsubscribe(sub)
	// A reader that falls behind by more than the lag is cut off: each
	// write must reach the connection within it, and a line it takes must
	// be younger than it. Otherwise one stalled reader would hold its
	// goroutine and buffer for as long as its TCP connection lives.
	maxLag := cmp.Or(q.tailMaxLag, defaultTailMaxLag)
	lagging := func(l adminapi.TailLine) bool { return time.Since(l.Time) > maxLag }
	deadline := func() { _ = rc.SetWriteDeadline(time.Now().Add(maxLag)) }
	deadline()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := io.WriteString(w, ": tail of the webhook queue\n\n"); err != nil {
		return nil
	}
	if err := rc.Flush(); err != nil {
		return nil // the client is gone, or cannot stream
	}
	keepalive := time.NewTicker(tailKeepalive)
	defer keepalive.Stop()
	for {
		var line adminapi.TailLine
		select {
		case <-r.Context().Done():
			return nil
		case <-keepalive.C:
			deadline()
			if _, err := io.WriteString(w, ": keepalive\n\n"); err != nil {
				return nil
			}
			if err := rc.Flush(); err != nil {
				return nil
			}
			continue
		case line = <-sub.lines:
		}
		if lagging(line) {
			return nil
		}
		deadline()
		if n := sub.dropped.Swap(0); n > 0 {
			if writeEvent(w, adminapi.TailLine{Time: time.Now().UTC(), Kind: adminapi.TailDropped, Dropped: n}) != nil {
				return nil
			}
		}
		if writeEvent(w, line) != nil {
			return nil
		}
		// Send whatever else is waiting before flushing once.
		for more := true; more; {
			select {
			case line = <-sub.lines:
				if writeEvent(w, line) != nil {
					return nil
				}
			default:
				more = false
			}
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
	}
}

// tailOutcomes are the outcome words a tail line can carry: the
// receiver's, then a delivery attempt's.
func tailOutcomes() []string {
	return slices.Concat(outcomeWords[:], adminapi.AttemptWords())
}

// writeEvent writes one server-sent event holding l as JSON.
func writeEvent(w io.Writer, l adminapi.TailLine) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "data: %s\n\n", b)
	return err
}

// adminLogger logs the operators' writes, as Caddy's admin logs its own.
func adminLogger() *zap.Logger { return caddy.Log().Named("admin.api.webhook") }

// eventStoreError is storeError for the operations that name an event or
// resend a job; id names the event or the job.
func eventStoreError(id int64, err error) error {
	switch {
	case errors.Is(err, queue.ErrEventNotFound):
		return apiError(http.StatusNotFound, "event %d not found", id)
	case errors.Is(err, queue.ErrNotFinished):
		return apiError(http.StatusConflict, "job %d is pending or running; only done or dead jobs can be resent", id)
	}
	return storeError(id, err)
}
