package consumer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/pullside"
	"github.com/caddywebhook/caddywebhook/queue"
)

// The JSON API (docs/CONSUMER.md). Durations are Go duration strings
// ("30s", "1m30s"); times are RFC 3339; payloads are base64.

// DefaultClaimMax is how many jobs a claim asks for when its body names
// no max.
const DefaultClaimMax = 10

// maxLeases bounds the claims one extend or ack names.
const maxLeases = 1000

// ClaimRequest is the body of POST …/claim.
type ClaimRequest struct {
	Target string `json:"target"`
	Max    int    `json:"max,omitempty"`
	Wait   string `json:"wait,omitempty"`
}

// ClaimedJob is one job a claim hands out.
type ClaimedJob struct {
	ID         int64          `json:"id"`
	Fence      int64          `json:"fence"`
	Attempt    int            `json:"attempt"`
	Replays    int            `json:"replays"`
	Source     string         `json:"source"`
	Target     string         `json:"target"`
	EventType  string         `json:"event_type"`
	DeliveryID string         `json:"delivery_id"`
	Headers    []queue.Header `json:"headers"`
	Payload    []byte         `json:"payload"`
	LeaseUntil time.Time      `json:"lease_until"`
	CreatedAt  time.Time      `json:"created_at"`
}

// ClaimResponse answers a claim: the jobs claimed, none if nothing came
// within the wait, and the lease, in milliseconds, that each claim holds
// for without an extension.
type ClaimResponse struct {
	Jobs    []ClaimedJob `json:"jobs"`
	LeaseMS int64        `json:"lease_ms"`
}

// ExtendRequest is the body of POST …/extend: the claims to extend, each
// a job id and the fence its claim was given, {"id": 7, "fence": 3}.
type ExtendRequest struct {
	Leases []queue.Claimed `json:"leases"`
}

// MarshalJSON writes the claims with the names the API documents;
// queue.Claimed has no JSON names of its own, and the API reads them in
// any case, as encoding/json does.
func (r ExtendRequest) MarshalJSON() ([]byte, error) {
	type claim struct {
		ID    int64 `json:"id"`
		Fence int64 `json:"fence"`
	}
	leases := make([]claim, len(r.Leases))
	for i, c := range r.Leases {
		leases[i] = claim(c)
	}
	return json.Marshal(struct {
		Leases []claim `json:"leases"`
	}{leases})
}

// ExtendResponse lists the claims that could not be extended: they are
// lost, and their jobs may be handed to another consumer.
type ExtendResponse struct {
	Lost    []int64 `json:"lost"`
	LeaseMS int64   `json:"lease_ms"`
}

// Ack is one answer in the body of POST …/ack: what became of the
// consumer's attempt at one claim. Outcome is an attempt word: delivered,
// retry, dead or handed_back (done and handback, their older spellings,
// are read as the first and the last).
type Ack struct {
	ID         int64  `json:"id"`
	Fence      int64  `json:"fence"`
	Outcome    string `json:"outcome"`
	Error      string `json:"error,omitempty"`
	RetryAfter string `json:"retry_after,omitempty"`
	Duration   string `json:"duration,omitempty"`
}

// AckRequest is the body of POST …/ack.
type AckRequest struct {
	Results []Ack `json:"results"`
}

// AckReply says what became of one answer: recorded false means the
// claim was no longer held and nothing changed.
type AckReply struct {
	ID       int64        `json:"id"`
	Recorded bool         `json:"recorded"`
	Status   queue.Status `json:"status,omitempty"`
	RunAt    time.Time    `json:"run_at,omitzero"`
}

// AckResponse answers an ack, one entry per result, in order.
type AckResponse struct {
	Results []AckReply `json:"results"`
}

// badRequest is a request error with the field it names.
type badRequest struct {
	status int
	msg    string
	param  string
}

func (e *badRequest) Error() string { return e.msg }

func fieldError(param, format string, args ...any) *badRequest {
	return &badRequest{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...), param: param}
}

// decode reads the JSON body into v, refusing unknown fields and trailing
// data; the error names the field at fault where there is one.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request, v any) *badRequest {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, h.MaxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, more := dec.Token(); more != io.EOF {
			return fieldError("", "body holds more than one JSON object")
		}
		return nil
	}
	var maxErr *http.MaxBytesError
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &maxErr):
		return &badRequest{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("body is larger than %d bytes", h.MaxBody)}
	case errors.Is(err, io.EOF):
		return fieldError("", "body is empty; it must be a JSON object")
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
		return fieldError("", "body is not valid JSON")
	case errors.As(err, &typeErr):
		return fieldError(typeErr.Field, "%s: must be a JSON %s", cmp.Or(typeErr.Field, "body"), jsonKind(typeErr.Type.Kind().String()))
	}
	// The only other error of a decoder that refuses unknown fields
	// names the field, as json: unknown field "name".
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if unq, err := strconv.Unquote(name); err == nil {
			name = unq
		}
		return fieldError(name, "unknown field %q", name)
	}
	return fieldError("", "body is not valid JSON")
}

// jsonKind names a Go kind as the JSON type a client must send.
func jsonKind(kind string) string {
	switch {
	case strings.HasPrefix(kind, "int"), strings.HasPrefix(kind, "uint"), strings.HasPrefix(kind, "float"):
		return "number"
	case kind == "slice":
		return "array"
	case kind == "struct":
		return "object"
	}
	return kind
}

// parseDuration reads a duration field; empty is 0.
func parseDuration(param, v string) (time.Duration, *badRequest) {
	if v == "" {
		return 0, nil
	}
	d, err := caddy.ParseDuration(v)
	if err != nil {
		return 0, fieldError(param, "%s: %q is not a duration such as \"30s\"", param, v)
	}
	if d < 0 {
		return 0, fieldError(param, "%s: must not be negative", param)
	}
	return d, nil
}

// pull returns the running app's pull side, or answers 503.
func (h *Handler) pull(w http.ResponseWriter) pullside.Side {
	p, err := pullside.Of(h.app)
	if err != nil {
		w.Header().Set("Retry-After", "1")
		adminapi.WriteError(w, http.StatusServiceUnavailable, "no pull target is running; try again", "")
		return nil
	}
	return p
}

// storeFailed answers a store error with 503: the consumer retries.
func (h *Handler) storeFailed(w http.ResponseWriter, op string, err error) {
	h.logger.Error("consumer API: "+op, zap.Error(err))
	w.Header().Set("Retry-After", "1")
	adminapi.WriteError(w, http.StatusServiceUnavailable, op+": the queue's store failed; try again", "")
}

// serveClaim claims jobs of one target, waiting up to the request's wait
// (at most MaxWait) for some to become ready.
func (h *Handler) serveClaim(w http.ResponseWriter, r *http.Request, tok int) {
	var req ClaimRequest
	if bad := h.decode(w, r, &req); bad != nil {
		adminapi.WriteError(w, bad.status, bad.msg, bad.param)
		return
	}
	wait, bad := parseDuration("wait", req.Wait)
	switch {
	case bad != nil:
		adminapi.WriteError(w, bad.status, bad.msg, bad.param)
		return
	case req.Target == "":
		adminapi.WriteError(w, http.StatusBadRequest, "target: required", "target")
		return
	case req.Max < 0:
		adminapi.WriteError(w, http.StatusBadRequest, "max: must not be negative", "max")
		return
	case !h.allowed(req.Target):
		adminapi.WriteError(w, http.StatusForbidden, fmt.Sprintf("target: this endpoint's tokens may not consume %q", req.Target), "target")
		return
	}
	limit := min(cmp.Or(req.Max, DefaultClaimMax), h.MaxClaim)
	wait = min(wait, time.Duration(h.MaxWait))
	p := h.pull(w)
	if p == nil {
		return
	}
	if !p.Has(req.Target) {
		adminapi.WriteError(w, http.StatusNotFound, fmt.Sprintf("target: %q is not a pull target of the running config", req.Target), "target")
		return
	}
	if wait > 0 {
		if n := h.waiting[tok].Add(1); n > int32(h.MaxWaiting) {
			h.waiting[tok].Add(-1)
			w.Header().Set("Retry-After", "1")
			adminapi.WriteError(w, http.StatusTooManyRequests, fmt.Sprintf("this token has %d claims waiting already, the most max_waiting allows", h.MaxWaiting), "wait")
			return
		}
	}
	jobs, err := h.claim(r.Context(), p, req.Target, limit, wait)
	if wait > 0 {
		// Before the answer goes out: a consumer that asks again as soon
		// as it has its answer must find its place free.
		h.waiting[tok].Add(-1)
	}
	if err != nil {
		if r.Context().Err() == nil {
			h.storeFailed(w, "claim jobs", err)
		}
		return
	}
	resp := ClaimResponse{Jobs: make([]ClaimedJob, len(jobs)), LeaseMS: p.Lease().Milliseconds()}
	for i, j := range jobs {
		resp.Jobs[i] = ClaimedJob{
			ID: j.ID, Fence: j.Fence, Attempt: j.Attempt, Replays: j.Replays,
			Source: j.Source, Target: j.Target, EventType: j.EventType, DeliveryID: j.DeliveryID,
			Headers: cmpOrHeaders(j.Headers), Payload: j.Payload,
			LeaseUntil: j.LeaseUntil, CreatedAt: j.CreatedAt,
		}
	}
	adminapi.WriteJSON(w, http.StatusOK, resp)
}

func cmpOrHeaders(h []queue.Header) []queue.Header {
	if h == nil {
		return []queue.Header{}
	}
	return h
}

// claim claims up to limit jobs of target, asking the store again when
// this process signals new work, every poll interval, until wait has
// passed. It returns early, with nothing, when the app stops; and when
// the consumer goes away, with its error.
func (h *Handler) claim(ctx context.Context, p pullside.Side, target string, limit int, wait time.Duration) ([]*queue.Job, error) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	poll := time.NewTimer(p.PollInterval())
	defer poll.Stop()
	for {
		// Taken before the claim, so that work made ready after the
		// claim looked wakes the wait below.
		ready := p.Ready(target)
		jobs, err := p.Claim(ctx, target, limit)
		if err != nil || len(jobs) > 0 || wait == 0 {
			return jobs, err
		}
		poll.Reset(p.PollInterval())
		select {
		case <-ready:
		case <-poll.C:
		case <-deadline.C:
			return nil, nil
		case <-p.Stopped():
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// serveExtend extends the leases of claims still held.
func (h *Handler) serveExtend(w http.ResponseWriter, r *http.Request) {
	var req ExtendRequest
	if bad := h.decode(w, r, &req); bad != nil {
		adminapi.WriteError(w, bad.status, bad.msg, bad.param)
		return
	}
	if len(req.Leases) > maxLeases {
		adminapi.WriteError(w, http.StatusBadRequest, fmt.Sprintf("leases: %d claims, more than %d", len(req.Leases), maxLeases), "leases")
		return
	}
	p := h.pull(w)
	if p == nil {
		return
	}
	lost, err := p.Extend(r.Context(), h.Targets, req.Leases)
	if err != nil {
		h.storeFailed(w, "extend leases", err)
		return
	}
	if lost == nil {
		lost = []int64{}
	}
	adminapi.WriteJSON(w, http.StatusOK, ExtendResponse{Lost: lost, LeaseMS: p.Lease().Milliseconds()})
}

// serveAck records the consumer's answers.
func (h *Handler) serveAck(w http.ResponseWriter, r *http.Request) {
	var req AckRequest
	if bad := h.decode(w, r, &req); bad != nil {
		adminapi.WriteError(w, bad.status, bad.msg, bad.param)
		return
	}
	if len(req.Results) > maxLeases {
		adminapi.WriteError(w, http.StatusBadRequest, fmt.Sprintf("results: %d answers, more than %d", len(req.Results), maxLeases), "results")
		return
	}
	acks := make([]pullside.Ack, len(req.Results))
	for i, res := range req.Results {
		at := fmt.Sprintf("results[%d].", i)
		o := ackOutcome(res.Outcome)
		if !o.Valid() {
			adminapi.WriteError(w, http.StatusBadRequest, fmt.Sprintf("%soutcome: %q is not delivered, retry, dead or handed_back", at, res.Outcome), at+"outcome")
			return
		}
		after, bad := parseDuration(at+"retry_after", res.RetryAfter)
		if bad == nil && after > 0 && o != pullside.AckRetry {
			bad = fieldError(at+"retry_after", "%sretry_after: only for the outcome retry", at)
		}
		if bad != nil {
			adminapi.WriteError(w, bad.status, bad.msg, bad.param)
			return
		}
		dur, bad := parseDuration(at+"duration", res.Duration)
		if bad != nil {
			adminapi.WriteError(w, bad.status, bad.msg, bad.param)
			return
		}
		acks[i] = pullside.Ack{
			Claim:   queue.Claimed{ID: res.ID, Fence: res.Fence},
			Outcome: o, Error: res.Error, RetryAfter: after, Duration: dur,
		}
	}
	p := h.pull(w)
	if p == nil {
		return
	}
	// Not cancelled with the request: answers half recorded when the
	// consumer hung up would be answered again, but need not be.
	results, err := p.Answer(context.WithoutCancel(r.Context()), h.Targets, acks)
	if err != nil {
		h.storeFailed(w, "record answers", err)
		return
	}
	resp := AckResponse{Results: make([]AckReply, len(results))}
	for i, res := range results {
		resp.Results[i] = AckReply{ID: res.ID, Recorded: res.Recorded, Status: res.Status, RunAt: res.RunAt}
	}
	adminapi.WriteJSON(w, http.StatusOK, resp)
}

// ackOutcome reads an answer's outcome: an attempt word, or one of the
// spellings the API took before it spoke the attempt words of the logs
// and metrics (done, handback), which it still takes.
func ackOutcome(s string) pullside.AckOutcome {
	switch s {
	case "done":
		return pullside.AckDelivered
	case "handback":
		return pullside.AckHandedBack
	}
	return pullside.AckOutcome(s)
}
