package caddywebhook

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

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

func (a *adminAPI) handleRulesTest(w http.ResponseWriter, r *http.Request, q *activeQueue, _ int64) error {
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
		req.Source, req.Target = cmp.Or(req.Source, j.Source), cmp.Or(req.Target, j.Target)
		ev = queue.Job{Source: j.Source, DeliveryID: j.DeliveryID, EventType: j.EventType, Headers: j.Headers, Payload: j.Payload}
	case req.Event != 0:
		e, err := q.Store.GetEvent(r.Context(), req.Event)
		if err != nil {
			return eventStoreError(req.Event, err)
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
	rr, ok := runningRules(queue.Route{Source: req.Source, Target: req.Target})
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
		ok, err := rr.filter.Match(rules.NewInput(jobEvent(job)))
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

// runningRules returns the compiled rules of route in the running config.
func runningRules(route queue.Route) (routeRules, bool) {
	cur := activeRules.Load()
	if cur == nil {
		return routeRules{}, false
	}
	rr, ok := cur.routes[route]
	return rr, ok
}

// filterTook returns the filter of route in the running config, when it
// has one: for the job and event pages, a job of that route is an event
// its filter took.
func filterTook(route queue.Route) string {
	rr, ok := runningRules(route)
	if !ok {
		return ""
	}
	if srcs := rr.filter.Sources(); len(srcs) > 0 {
		return srcs[0]
	}
	return ""
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

// addRulesCommands adds `caddy webhook rules test`.
func addRulesCommands(cmd *cobra.Command, run cliRunner) {
	rulesCmd := &cobra.Command{
		Use:   "rules",
		Short: "Tries the content rules (filters and transforms) of the running config",
		Long: `
Content rules are a target's filter and transform, CEL expressions compiled
when the config loads (see docs/RULES.md). 'caddy webhook rules test' runs
them on a stored event or a body of your own.
`,
		Example: `  caddy webhook rules test --source github --target deploy --event 1234`,
		Args:    noArgs,
	}
	rulesCmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	test := &cobra.Command{
		Use:   "test --source <name> --target <name> (--job <id> | --event <id> | --body <file> [--header 'Name: value'…])",
		Short: "Shows whether a target's filter takes an event, and the request its transform makes",
		Long: `
Runs the running config's compiled rules of one target on a stored job's or
event's payload, or on a body of your own, and prints whether the target
takes the event (its events and its filter) and the request the target would
receive: method, headers and body. The target adds its own header options
and the X-Webhook-* metadata to what is shown. Nothing is stored or sent.

With --job the source and target default to the job's, with --event the
source to the event's. A stored event's headers are those stored with it
(its content type and event-type header); --body takes the request headers
from --header and the event type from --event-type.
`,
		Example: `  caddy webhook rules test --source github --target deploy --event 1234
  caddy webhook rules test --job 56
  caddy webhook rules test --source github --target deploy --body push.json --event-type push --header 'X-GitHub-Event: push'`,
		Args: noArgs,
		RunE: run((*cli).rulesTest),
	}
	f := test.Flags()
	f.String("source", "", "The receiver's source")
	f.String("target", "", "The target's name")
	f.Int64("job", 0, "Try the payload of this stored job")
	f.Int64("event", 0, "Try the payload of this stored event")
	f.String("body", "", "Try this file's bytes as the body ('-' for stdin)")
	f.StringArray("header", nil, "With --body: a request header, 'Name: value' (repeatable)")
	f.String("event-type", "", "With --body: the event type")
	rulesCmd.AddCommand(test)
	cmd.AddCommand(rulesCmd)
}

func (c *cli) rulesTest(cmd *cobra.Command, _ []string) error {
	fl := cmd.Flags()
	var req adminapi.RulesTestRequest
	req.Source, _ = fl.GetString("source")
	req.Target, _ = fl.GetString("target")
	req.Job, _ = fl.GetInt64("job")
	req.Event, _ = fl.GetInt64("event")
	if fl.Changed("body") {
		body, err := readBodyFlag(cmd)
		if err != nil {
			return err
		}
		if utf8.Valid(body) {
			s := string(body)
			req.Body = &s
		} else {
			req.BodyBase64 = base64.StdEncoding.EncodeToString(body)
		}
		req.EventType, _ = fl.GetString("event-type")
		headers, _ := fl.GetStringArray("header")
		req.Headers = make(map[string]string, len(headers))
		for _, h := range headers {
			name, value, ok := strings.Cut(h, ":")
			if !ok || strings.TrimSpace(name) == "" {
				return fmt.Errorf("--header %q: write it as Name: value", h)
			}
			req.Headers[strings.TrimSpace(name)] = strings.TrimSpace(value)
		}
	}
	var r adminapi.RulesTestResponse
	if ok, err := c.callBody(http.MethodPost, "/webhook/rules/test", req, &r); !ok {
		return err
	}
	c.printRulesTest(r)
	return nil
}

// printRulesTest prints a rule test for a person: the verdict, then the
// request as it would go out.
func (c *cli) printRulesTest(r adminapi.RulesTestResponse) {
	w := c.out
	if r.Takes {
		fmt.Fprintf(w, "target %s of source %s takes the event", r.Target, r.Source)
		if r.Filter != "" {
			fmt.Fprintf(w, ": its filter is true")
		}
		fmt.Fprintln(w)
	} else {
		fmt.Fprintf(w, "target %s of source %s does not take the event: %s\n", r.Target, r.Source, r.Reason)
		if r.FilterError != "" {
			fmt.Fprintf(w, "filter error: %s\n", r.FilterError)
		}
	}
	if r.Filter != "" {
		fmt.Fprintf(w, "filter: %s\n", strings.ReplaceAll(r.Filter, "\n", " "))
	}
	if r.TransformError != "" {
		fmt.Fprintf(w, "transform error (the job would go dead): %s\n", r.TransformError)
		return
	}
	if r.Request == nil {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, r.Request.Method)
	for _, h := range r.Request.Headers {
		fmt.Fprintf(w, "%s: %s\n", h.Name, h.Value)
	}
	fmt.Fprintln(w)
	if r.Request.BodyBase64 != "" {
		fmt.Fprintf(w, "(%d bytes, not UTF-8, as base64)\n%s\n", base64.StdEncoding.DecodedLen(len(r.Request.BodyBase64)), r.Request.BodyBase64)
		return
	}
	fmt.Fprintln(w, r.Request.Body)
}
