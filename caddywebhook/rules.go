package caddywebhook

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddywebhook/caddywebhook/caddywebhook/rules"
	"github.com/caddywebhook/caddywebhook/queue"
)

// Content rules, wired in: a target's filter runs at ingest, after the
// signature verified, and decides whether the event gets a job for it; its
// transform runs at delivery, on the stored original, and reshapes what the
// target receives. Both are compiled once per config load (Provision), so a
// typo is a config error that `caddy validate` reports, and both run under
// the rules package's cost limit.

// routeRules are one target's compiled rules.
type routeRules struct {
	kind      string   // the target's kind (http, exec)
	events    []string // the target's event types (nil: all)
	filter    *rules.Filter
	transform *rules.Transform
}

// compileRules compiles tc's filter and transform; the errors name the
// directive ("filter: line 1, column 5: …").
func (tc *TargetConfig) compileRules() (routeRules, error) {
	rr := routeRules{events: tc.Events}
	if strings.TrimSpace(tc.Filter) != "" {
		f, err := rules.CompileFilter([]string{tc.Filter}, rules.Options{})
		if err != nil {
			return rr, fmt.Errorf("filter: %w", err)
		}
		rr.filter = f
	}
	t, err := compileTransform(tc.Transform)
	if err != nil {
		return rr, err
	}
	rr.transform = t
	return rr, nil
}

func compileTransform(c *rules.TransformConfig) (*rules.Transform, error) {
	t, err := rules.CompileTransform(c, rules.Options{})
	if err != nil {
		return nil, fmt.Errorf("transform: %w", err)
	}
	return t, nil
}

// withTransform wraps t so it delivers what tr makes of each job; a nil tr
// leaves t as it is.
func withTransform(t Target, tr *rules.Transform) Target {
	if tr == nil {
		return t
	}
	return &transformTarget{next: t, transform: tr}
}

// transformTarget runs a transform before the target it wraps: the target
// then sends (http, signing the new bytes with sign_secret) or pipes (exec)
// the transformed body and headers as if they had been stored.
type transformTarget struct {
	next      Target
	transform *rules.Transform
}

// Deliver implements Target. A transform that fails fails the same way on
// every attempt, so the job goes dead at once with the error as its last.
func (t *transformTarget) Deliver(ctx context.Context, job *queue.Job) error {
	j, err := transformJob(t.transform, job)
	if err != nil {
		return queue.Permanent(err)
	}
	err = t.next.Deliver(ctx, j)
	// The target reports what it got (an HTTP status, an exit code) on
	// the job it was handed, the reshaped copy; the pool records the
	// attempt from the job it claimed.
	job.Code = j.Code
	return err
}

// unwrapTarget returns the target the transform reshapes jobs for, so a
// transformed pull target is still a pull target that the pool leaves to
// its consumers.
func (t *transformTarget) unwrapTarget() Target { return t.next }

// shapeJob reshapes a job as Deliver would, for a consumer to be handed.
func (t *transformTarget) shapeJob(job *queue.Job) (*queue.Job, error) {
	return transformJob(t.transform, job)
}

// transformJob returns a copy of job with tr's body and headers; job is
// left as it is.
func transformJob(tr *rules.Transform, job *queue.Job) (*queue.Job, error) {
	res, err := tr.Apply(rules.NewInput(jobEvent(job)))
	if err != nil {
		return nil, err
	}
	j := *job
	if res.BodySet {
		j.Payload = res.Body
	}
	drop := func(name string) bool {
		return slices.ContainsFunc(res.Remove, func(r string) bool { return strings.EqualFold(r, name) }) ||
			res.Headers.Get(name) != "" ||
			(res.ContentType != "" && strings.EqualFold(name, "Content-Type"))
	}
	j.Headers = make([]queue.Header, 0, len(job.Headers)+len(res.Headers)+1)
	for _, h := range job.Headers {
		if !drop(h.Name) {
			j.Headers = append(j.Headers, h)
		}
	}
	if res.ContentType != "" && res.Headers.Get("Content-Type") == "" {
		j.Headers = append(j.Headers, queue.Header{Name: "Content-Type", Value: res.ContentType})
	}
	names := make([]string, 0, len(res.Headers))
	for name := range res.Headers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		j.Headers = append(j.Headers, queue.Header{Name: name, Value: res.Headers.Get(name)})
	}
	return &j, nil
}

// jobEvent is what a transform sees of a stored job: its body, the headers
// stored with it, no query.
func jobEvent(job *queue.Job) *rules.Event {
	return &rules.Event{
		Body:       job.Payload,
		Header:     storedHeaders(job.Headers),
		EventType:  job.EventType,
		Source:     job.Source,
		DeliveryID: job.DeliveryID,
	}
}

// storedHeaders are the headers stored with an event as an http.Header.
func storedHeaders(hs []queue.Header) http.Header {
	h := make(http.Header, len(hs))
	for _, sh := range hs {
		h.Add(sh.Name, sh.Value)
	}
	return h
}

// takes reports whether the target of f takes the event: its event types,
// then its filter. in is made on the first filter that needs it, so an
// event no filter looks at costs nothing more.
func (f targetFilter) takes(eventType string, in func() *rules.Input) (bool, error) {
	if !f.wants(eventType) {
		return false, nil
	}
	if f.rule == nil {
		return true, nil
	}
	return f.rule.Match(in())
}

// filterFailed logs a filter's evaluation error once per (target, error
// text) per minute for this receiver, and counts every one. The text is
// cel's, with what it quotes of the values taken out, so no body byte
// reaches the log.
func (rc *Receiver) filterFailed(target string, err error) {
	filterErrorCounter(rc.Source, target).Inc()
	msg := rules.RedactQuoted(err.Error())
	if rc.filterLog.first(target+"\x00"+msg, time.Now()) {
		rc.logger.Warn("filter failed; the target does not take the event",
			zap.String("source", rc.Source), zap.String("target", target), zap.String("error", msg))
	}
}

// onceAMinute says yes to the first of each key per minute. It remembers
// at most maxKeys keys a minute, so a rule whose error text changes with
// every event cannot grow it; past that it says no until the minute ends.
type onceAMinute struct {
	mu     sync.Mutex
	window time.Time
	seen   map[string]struct{}
}

const onceAMinuteMaxKeys = 256

func (o *onceAMinute) first(key string, now time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if now.Sub(o.window) >= time.Minute || o.seen == nil {
		o.window, o.seen = now, make(map[string]struct{})
	}
	if _, ok := o.seen[key]; ok || len(o.seen) >= onceAMinuteMaxKeys {
		return false
	}
	o.seen[key] = struct{}{}
	return true
}

// Interface guards
var (
	_ wrappedTarget = (*transformTarget)(nil)
	_ jobShaper     = (*transformTarget)(nil)
)
