package caddywebhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
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
	msg := redactQuoted(err.Error())
	if rc.filterLog.first(target+"\x00"+msg, time.Now()) {
		rc.logger.Warn("filter failed; the target does not take the event",
			zap.String("source", rc.Source), zap.String("target", target), zap.String("error", msg))
	}
}

// maxErrorText bounds a logged rule error, in bytes.
const maxErrorText = 200

// redactQuoted replaces what s quotes in double quotes with an ellipsis,
// drops what follows the word "key" or "value", and cuts it to
// maxErrorText: cel's messages name the values they failed on, quoted
// (strconv's `parsing "abc"`) or not, after those words (`no such key:
// abc`, `insert failed: key abc already exists`, `unsupported index value
// abc in list`), and those may come from the body (`headers[body.k]`).
// Single quotes stay: cel puts type names in them.
func redactQuoted(s string) string {
	s = cutAfterNamedValue(s)
	var b strings.Builder
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
			b.WriteString("…")
			b.WriteRune(r)
		case quote != 0:
		case r == '"':
			quote = r
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
		if b.Len() >= maxErrorText {
			break
		}
	}
	if quote != 0 {
		b.WriteString("…")
	}
	return b.String()
}

// cutAfterNamedValue cuts s after the first whole word "key" or "value"
// (with its colon, if any) and ends it with an ellipsis.
func cutAfterNamedValue(s string) string {
	for i := 0; i < len(s); {
		j := strings.IndexAny(s[i:], " ")
		word := s[i:]
		if j >= 0 {
			word = s[i : i+j]
		}
		if w := strings.TrimSuffix(word, ":"); (w == "key" || w == "value") && j >= 0 {
			return s[:i+j+1] + "…"
		}
		if j < 0 {
			break
		}
		i += j + 1
	}
	return s
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

// activeRules are the compiled rules of the running config, by route, for
// the admin API's rule test; the owner check is activeQueue's.
var activeRules atomic.Pointer[rulesOf]

type rulesOf struct {
	owner  *App // the app whose config compiled them
	routes map[queue.Route]routeRules
}

func setActiveRules(owner *App, routes map[queue.Route]routeRules) {
	activeRules.Store(&rulesOf{owner: owner, routes: routes})
}

// clearActiveRules forgets the rules of owner, unless a newer app's
// replaced them already.
func clearActiveRules(owner *App) {
	if cur := activeRules.Load(); cur != nil && cur.owner == owner {
		activeRules.CompareAndSwap(cur, nil)
	}
}

// ruleArgs reads the expression of a `filter`, `body` or `header <name>`
// line: the rest of the line, as Caddy's `expression` matcher reads it. One
// argument is taken unquoted (a backtick or double-quoted token), several
// are joined raw with spaces, quotes kept, so `filter body.ref ==
// "refs/heads/main"` needs no quoting of its own.
func ruleArgs(d *caddyfile.Dispenser) (string, bool) {
	switch d.CountRemainingArgs() {
	case 0:
		return "", false
	case 1:
		d.NextArg()
		return d.Val(), true
	}
	return strings.Join(d.RemainingArgsRaw(), " "), true
}

// caddyfileRule is one rule line of a Caddyfile, kept until the whole
// receiver is read, so that its compile error can name the receiver and
// the target as well as the line.
type caddyfileRule struct {
	field     string // filter, transform: body, transform: header X, …
	file      string
	line      int
	filter    string
	transform *rules.TransformConfig // the line alone
}

// newCaddyfileRule records the rule of the line the dispenser is on.
func newCaddyfileRule(d *caddyfile.Dispenser, field string) caddyfileRule {
	return caddyfileRule{field: field, file: d.File(), line: d.Line()}
}

// check compiles the rule; the error names where, the field, the line of
// the Caddyfile and the column in the expression, in the form of Caddy's
// own parse errors.
func (cr caddyfileRule) check(where string) error {
	var err error
	if cr.transform != nil {
		_, err = rules.CompileTransform(cr.transform, rules.Options{})
		var fe *rules.FieldError
		if errors.As(err, &fe) {
			err = fe.Err // the field is cr.field
		}
	} else {
		_, err = rules.CompileFilter([]string{cr.filter}, rules.Options{})
	}
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s:%d - Error during parsing: %s: %s: %w", cr.file, cr.line, where, cr.field, err)
}

// checkCaddyfileRules compiles each of crs, where naming their receiver
// and target (or the notify block).
func checkCaddyfileRules(crs []caddyfileRule, where string) error {
	for _, cr := range crs {
		if err := cr.check(where); err != nil {
			return err
		}
	}
	return nil
}

// unmarshalTransform reads a `transform { body <CEL> header <name> <CEL>
// remove_header <name…> }` block, the dispenser on `transform`; where
// starts the messages. It returns each line's rule too, for the caller to
// compile once it can name the target.
func unmarshalTransform(d *caddyfile.Dispenser, where string) (*rules.TransformConfig, []caddyfileRule, error) {
	where += ": transform"
	if d.NextArg() {
		return nil, nil, d.Errf("%s: unexpected argument %q; the rules go in a block", where, d.Val())
	}
	c := new(rules.TransformConfig)
	var crs []caddyfileRule
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		switch opt {
		case "body":
			cr := newCaddyfileRule(d, "transform: body")
			if c.Body != "" {
				return nil, nil, d.Errf("%s: body is set twice", where)
			}
			src, ok := ruleArgs(d)
			if !ok {
				return nil, nil, d.Errf("%s: body needs a CEL expression", where)
			}
			c.Body = src
			cr.transform = &rules.TransformConfig{Body: src}
			crs = append(crs, cr)
		case "header":
			if !d.NextArg() {
				return nil, nil, d.Errf("%s: header needs a name and a CEL expression", where)
			}
			name := d.Val()
			cr := newCaddyfileRule(d, "transform: header "+name)
			src, ok := ruleArgs(d)
			if !ok {
				return nil, nil, d.Errf("%s: header %s needs a CEL expression", where, name)
			}
			if c.Headers == nil {
				c.Headers = make(map[string]string)
			}
			if _, dup := c.Headers[name]; dup {
				return nil, nil, d.Errf("%s: header %s is set twice", where, name)
			}
			c.Headers[name] = src
			cr.transform = &rules.TransformConfig{Headers: map[string]string{name: src}}
			crs = append(crs, cr)
		case "remove_header":
			names := d.RemainingArgs()
			if len(names) == 0 {
				return nil, nil, d.Errf("%s: remove_header needs a header name", where)
			}
			for _, name := range names {
				cr := newCaddyfileRule(d, "transform: remove_header "+name)
				cr.transform = &rules.TransformConfig{RemoveHeaders: []string{name}}
				crs = append(crs, cr)
			}
			c.RemoveHeaders = append(c.RemoveHeaders, names...)
		default:
			return nil, nil, d.Errf("%s: unknown option %q (want body, header, remove_header)", where, opt)
		}
	}
	if c.IsZero() {
		return nil, nil, d.Errf("%s: the block is empty", where)
	}
	return c, crs, nil
}

// joinFilters ANDs several filter expressions into the one of the JSON
// config; each is parenthesised, on its own line, so it keeps its meaning.
func joinFilters(srcs []string) string {
	if len(srcs) == 1 {
		return srcs[0]
	}
	parts := make([]string, len(srcs))
	for i, s := range srcs {
		parts[i] = "(" + s + ")"
	}
	return strings.Join(parts, "\n&& ")
}

// Interface guards
var (
	_ wrappedTarget = (*transformTarget)(nil)
	_ jobShaper     = (*transformTarget)(nil)
)
