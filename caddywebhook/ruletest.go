package caddywebhook

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/caddywebhook/rules"
	"github.com/caddywebhook/caddywebhook/queue"
)

// The rule test: POST /webhook/rules/test runs the running config's
// compiled rules of one target on a stored event or a given body, and says
// whether the filter takes it and what the target would receive. Nothing is
// stored or sent; `caddy webhook rules test` is its client.

// maxRulesTestBody bounds the body of a rule test request.
const maxRulesTestBody = 8 << 20

func (a *adminAPI) handleRulesTest(w http.ResponseWriter, r *http.Request, q *runningConfig, _ int64) error {
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxRulesTestBody+1))
	if err != nil {
		return apiError(http.StatusBadRequest, "read request body: %v", err)
	}
	if len(raw) > maxRulesTestBody {
		return apiError(http.StatusRequestEntityTooLarge, "request body is larger than %d bytes", maxRulesTestBody)
	}
	var req adminapi.RulesTestRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return apiError(http.StatusBadRequest, "decode request body: %v", err)
	}
	given := 0
	for _, set := range []bool{req.Job != 0, req.Event != 0, req.Body != nil || req.BodyBase64 != ""} {
		if set {
			given++
		}
	}
	if given != 1 {
		return apiError(http.StatusBadRequest, "give one of job, event and body")
	}
	ev := queue.Job{DeliveryID: req.DeliveryID, EventType: req.EventType}
	switch {
	case req.Job != 0:
		j, err := q.Store.GetJob(r.Context(), req.Job)
		if err != nil {
			return storeError(req.Job, err)
		}
		if j.ReadError != "" {
			return apiError(http.StatusConflict, "job %d: its event cannot be read: %s", req.Job, j.ReadError)
		}
		req.Source, req.Target = cmp.Or(req.Source, j.Source), cmp.Or(req.Target, j.Target)
		ev = queue.Job{Source: j.Source, DeliveryID: j.DeliveryID, EventType: j.EventType, Headers: j.Headers, Payload: j.Payload}
	case req.Event != 0:
		e, err := q.Store.GetEvent(r.Context(), req.Event)
		if err != nil {
			return eventStoreError(req.Event, err)
		}
		if e.ReadError != "" {
			return apiError(http.StatusConflict, "event %d cannot be read: %s", req.Event, e.ReadError)
		}
		req.Source = cmp.Or(req.Source, e.Source)
		ev = queue.Job{Source: e.Source, DeliveryID: e.DeliveryID, EventType: e.EventType, Headers: e.Headers, Payload: e.Payload}
	default:
		if req.Body != nil && req.BodyBase64 != "" {
			return apiError(http.StatusBadRequest, "give body or body_base64, not both")
		}
		ev.Payload = []byte(derefOr(req.Body))
		if req.BodyBase64 != "" {
			if ev.Payload, err = base64.StdEncoding.DecodeString(req.BodyBase64); err != nil {
				return badParam("body_base64", "%v", err)
			}
		}
		names := make([]string, 0, len(req.Headers))
		for name := range req.Headers {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			ev.Headers = append(ev.Headers, queue.Header{Name: http.CanonicalHeaderKey(name), Value: req.Headers[name]})
		}
		ev.Source = req.Source
		ev.DeliveryID = cmp.Or(ev.DeliveryID, "rules-test")
	}
	if req.Source == "" {
		return badParam("source", "is required (with a body; a job or an event has its own)")
	}
	if req.Target == "" {
		return badParam("target", "is required (with an event or a body; a job has its own)")
	}
	ev.Source, ev.Target = req.Source, req.Target
	rr, ok := q.routeRules(queue.Route{Source: req.Source, Target: req.Target})
	if !ok {
		return badParam("target", "%q is not a target of source %q in the running config", req.Target, req.Source)
	}
	return adminapi.WriteJSON(w, http.StatusOK, rr.test(&ev))
}

// test runs rr on job as the receiver and the target would.
func (rr routeRules) test(job *queue.Job) adminapi.RulesTestResponse {
	resp := adminapi.RulesTestResponse{Source: job.Source, Target: job.Target, Events: rr.events, Takes: true}
	if srcs := rr.filter.Sources(); len(srcs) > 0 {
		resp.Filter = srcs[0]
	}
	f := targetFilter{name: job.Target, events: rr.events, rule: rr.filter}
	if !f.wants(job.EventType) {
		resp.Takes, resp.Reason = false, "event type "+quoteOrEmpty(job.EventType)+" is not in the target's events"
	} else if rr.filter != nil {
		in := rules.NewInput(jobEvent(job))
		ok, err := rr.filter.Match(in)
		for _, n := range rr.filter.Explain(in) {
			resp.FilterNotes = append(resp.FilterNotes, n.String())
		}
		switch {
		case err != nil:
			resp.Takes, resp.Reason, resp.FilterError = false, "the filter failed", err.Error()
		case !ok:
			resp.Takes, resp.Reason = false, "the filter is false"
		}
	}
	out := job
	if rr.transform != nil {
		j, err := transformJob(rr.transform, job)
		if err != nil {
			resp.TransformError = err.Error()
			return resp
		}
		out = j
	}
	req := &adminapi.RulesTestOutput{Method: http.MethodPost, Headers: out.Headers}
	if rr.kind == "exec" {
		req.Method = "EXEC"
	}
	if req.Headers == nil {
		req.Headers = []queue.Header{}
	}
	if utf8.Valid(out.Payload) {
		req.Body = string(out.Payload)
	} else {
		req.BodyBase64 = base64.StdEncoding.EncodeToString(out.Payload)
	}
	resp.Request = req
	return resp
}

func quoteOrEmpty(s string) string {
	if s == "" {
		return "(empty)"
	}
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}

func derefOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
