// Package httptarget is the webhook.targets.http module: it delivers a
// webhook by POSTing its payload to an upstream URL.
package httptarget

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddywebhook/caddywebhook/caddywebhook"
	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/caddyfileopt"
	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/forward"
	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/tracecontext"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/signature"
)

func init() {
	caddy.RegisterModule(Target{})
}

// userAgent identifies the forwarder to upstreams.
const userAgent = "caddywebhook"

const (
	// errorBodyLen is how much of an error response's body goes into the
	// job's last error: enough for a framework's error message.
	errorBodyLen = 512
	// drainLen bounds how much of a response body is read and thrown
	// away so the connection can be reused; a bigger body costs less as a
	// new connection than as a download.
	drainLen = 64 << 10
	// maxResponseHeader bounds the upstream's response headers. Go's
	// default is 10 MB, which an upstream gone wrong could make every
	// worker hold at once; no webhook answer needs more than a few
	// headers. Past it the round trip fails with net/http's "server
	// response headers exceeded … bytes", a transient error.
	maxResponseHeader = 64 << 10
	// defaultTimeout is the default per-attempt timeout.
	defaultTimeout = 10 * time.Second
)

// Target delivers a webhook by POSTing its original payload to an
// upstream URL. The request carries the headers stored with the event (the
// content type and the scheme's event-type header, never the sender's
// signature), the extra static headers, the metadata headers
// X-Webhook-Delivery-Id, X-Webhook-Source, X-Webhook-Event-Type,
// X-Webhook-Attempt, X-Webhook-Job-Id and, after a replay, X-Webhook-Replay,
// and, with sign_secret, a Standard
// Webhooks signature (webhook-id, webhook-timestamp, webhook-signature),
// or with resign the signature the provider would send (Resign).
//
// The upstream's answer decides the job's fate: 2xx is done; 408, 425, 429,
// 5xx and network errors or timeouts are retried, after at least the wait a
// Retry-After header asks for (capped by the app's max_retry_after); every
// other status is permanent and parks the job as dead. An answer whose
// headers exceed 64 KiB is a transient error too. Redirects are not
// followed and count as permanent: following one would send the payload, and
// its signature, to a place the config does not name (or, for 301, 302 and
// 303, turn the POST into a bodiless GET), and a moved endpoint is a config
// change that no retry fixes.
//
// Connections are kept alive between deliveries. An http:// upstream that
// no proxy stands in front of is reached by the worker's own HTTP/1.1
// exchange (plainClient); https:// and proxied ones by net/http's
// Transport.
type Target struct {
	// The upstream's absolute http:// or https:// URL. Placeholders such as
	// {env.HOOK_URL} are resolved once, when the config loads. Its query
	// string, query values and userinfo password (each of 8 bytes or more)
	// are replaced by [redacted] where the upstream's answer echoes them
	// into a job's last error. Required.
	URL string `json:"url,omitempty"`

	// How long one attempt may take, from connecting until the response
	// has been read; an attempt that runs out of time is retried.
	// Default: 10s.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	// Extra static headers set on every forwarded request; they replace
	// stored headers of the same name but not the metadata headers.
	// Placeholders in values are resolved when the config loads. A Host
	// header sets the request's host. Default: none.
	Headers http.Header `json:"headers,omitempty"`

	// The Standard Webhooks secret ("whsec_" followed by base64) with which
	// to sign forwarded requests, usually a placeholder such as
	// {env.UPSTREAM_WEBHOOK_SECRET}. The resolved secret is kept out of the
	// config, logs and errors. Default: requests are not signed.
	SignSecret string `json:"sign_secret,omitempty"`

	// Sign each request again as the provider signs it, with a secret of
	// your choosing, for a handler that verifies with the provider's SDK
	// (Resign). Not with sign_secret. Default: requests are not signed.
	Resign *Resign `json:"resign,omitempty"`

	url        string
	host       string // from a static Host header
	headers    http.Header
	signSecret string
	resign     *resigner
	redact     []string      // values never to repeat in an error
	basicAuth  *url.Userinfo // from the URL, sent when no Authorization header is configured
	transport  *http.Transport
	plain      *plainClient // for an http:// URL no proxy stands in front of; else the transport
	now        func() time.Time
}

// CaddyModule returns the Caddy module information.
func (Target) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "webhook.targets.http",
		New: func() caddy.Module { return new(Target) },
	}
}

// Provision resolves placeholders, applies defaults and builds the HTTP
// transport whose connections are pooled across deliveries.
func (t *Target) Provision(ctx caddy.Context) error {
	u, err := caddywebhook.ResolveSecret(ctx, "url", t.URL)
	if err != nil {
		return err
	}
	t.url = u
	// nil when the URL does not parse: then there are no URL secrets and no
	// Basic auth, and Validate refuses it.
	parsed, _ := url.Parse(u)
	if t.Timeout == 0 {
		t.Timeout = caddy.Duration(defaultTimeout)
	}
	t.headers = make(http.Header, len(t.Headers))
	t.redact = urlSecrets(parsed)
	for _, name := range slices.Sorted(maps.Keys(t.Headers)) {
		for _, v := range t.Headers[name] {
			v, err := caddywebhook.ResolveSecret(ctx, "headers: "+name, v)
			if err != nil {
				return err
			}
			if http.CanonicalHeaderKey(name) == "Host" {
				t.host = v
				continue
			}
			t.headers.Add(name, v)
			// A static header is where an upstream's token lives; an
			// upstream that echoes the request in its error body must not
			// get it into the job's last error. Short values are left alone
			// so that "1" or "yes" do not blank out the message.
			if len(v) >= 8 {
				t.redact = append(t.redact, v)
			}
		}
	}
	if t.SignSecret != "" {
		secret, err := caddywebhook.ResolveSecret(ctx, "sign_secret", t.SignSecret)
		if err != nil {
			return err
		}
		t.signSecret = secret
		t.redact = append(t.redact, secret)
	}
	if err := t.provisionResign(ctx, parsed); err != nil {
		return err
	}
	if t.now == nil {
		t.now = time.Now
	}
	// Deliveries go straight to the transport rather than through an
	// http.Client: redirects are not followed (a 3xx is the upstream's
	// answer), the attempt's context carries the timeout, and there is no
	// cookie jar, so what the client adds is a copy of every request's
	// headers and a deeper stack per delivery. The one thing it did that a
	// target needs, Basic auth from the URL's userinfo, is done in Deliver.
	t.transport = http.DefaultTransport.(*http.Transport).Clone()
	// Several workers deliver to the same upstream at once; the default of
	// two idle connections per host would make most of them reconnect.
	t.transport.MaxIdleConnsPerHost = 32
	t.transport.MaxResponseHeaderBytes = maxResponseHeader
	if parsed != nil && parsed.User != nil && t.headers.Get("Authorization") == "" {
		t.basicAuth = parsed.User
		// An upstream that echoes the request's headers must not get the
		// credential into the job's last error in its encoded form either.
		password, _ := parsed.User.Password()
		encoded := base64.StdEncoding.EncodeToString([]byte(parsed.User.Username() + ":" + password))
		t.redact = append(t.redact, encoded)
	}
	if addr, ok := plainAddr(parsed, t.transport.Proxy); ok {
		t.plain = newPlainClient(addr)
	}
	return nil
}

// plainAddr returns the host:port of an http:// URL that proxy, the
// transport's proxy policy (the environment's HTTP_PROXY and NO_PROXY),
// sends straight to the upstream, and false for any other URL: those go
// through net/http's Transport (TLS, HTTP/2, the proxy).
func plainAddr(u *url.URL, proxy func(*http.Request) (*url.URL, error)) (string, bool) {
	if !plainSupported || u == nil || u.Scheme != "http" || u.Host == "" || u.Opaque != "" {
		return "", false
	}
	if proxy != nil {
		if via, err := proxy(&http.Request{URL: u}); err != nil || via != nil {
			return "", false
		}
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	return net.JoinHostPort(u.Hostname(), port), true
}

// Validate checks the URL, the timeout, the header names and the signing
// secret.
func (t *Target) Validate() error {
	if t.url == "" {
		return errors.New("url: required")
	}
	u, err := url.Parse(t.url)
	if err != nil {
		// url.Parse's error repeats the URL, which may hold a token.
		return errors.New("url: not a valid URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("url: scheme must be http or https, not %q", u.Scheme)
	}
	if u.Host == "" {
		return errors.New("url: must be absolute, with a host")
	}
	if t.Timeout < 0 {
		return errors.New("timeout: must not be negative")
	}
	for name := range t.Headers {
		if !signature.ValidHeaderName(name) {
			return fmt.Errorf("headers: invalid header name %q", name)
		}
	}
	if err := t.validateResign(); err != nil {
		return err
	}
	if t.signSecret != "" {
		// Signing once here turns a malformed secret into a config error
		// instead of a dead job per delivery.
		if _, err := forward.Sign(t.signSecret, "msg_validate", time.Unix(0, 0), nil); err != nil {
			return fmt.Errorf("sign_secret: %w", err)
		}
	}
	return nil
}

// Cleanup closes the idle connections.
func (t *Target) Cleanup() error {
	if t.transport != nil {
		t.transport.CloseIdleConnections()
	}
	if t.plain != nil {
		t.plain.close()
	}
	return nil
}

// Deliver POSTs the job's payload to the upstream once and classifies the
// outcome (see Target).
func (t *Target) Deliver(ctx context.Context, job *queue.Job) error {
	// A delivery id or event type read from a JSON body may hold a control
	// character that no header can carry; the transport would refuse every
	// attempt, so say so once instead of retrying for hours.
	if !forward.ValidHeaderValue(job.DeliveryID) {
		return queue.Permanent(errors.New("build request: delivery id has a control character and cannot be sent as a header"))
	}
	if !forward.ValidHeaderValue(job.EventType) {
		return queue.Permanent(errors.New("build request: event type has a control character and cannot be sent as a header"))
	}

	deadline := time.Now().Add(time.Duration(t.Timeout))
	resp, err := t.roundTrip(ctx, job, deadline)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	job.Code = queue.CodeOf(resp.StatusCode)

	tracecontext.SetStatus(ctx, resp.StatusCode)
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLen))
		return nil
	}

	head, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyLen))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLen))
	msg := fmt.Sprintf("upstream answered %d", resp.StatusCode)
	if text := t.scrub(queue.SafeLine(string(head), 0)); text != "" {
		msg += ": " + text
	}
	failure := errors.New(msg)

	if !retryable(resp.StatusCode) {
		return queue.Permanent(failure)
	}
	if after, ok := parseRetryAfter(resp.Header.Get("Retry-After"), t.now()); ok {
		return queue.RetryAfter(failure, after)
	}
	return failure
}

// roundTrip sends job's request and returns the upstream's answer, or the
// attempt's error: a permanent one when no request can be built, a
// transient one when the round trip failed or ran past deadline.
func (t *Target) roundTrip(ctx context.Context, job *queue.Job, deadline time.Time) (*http.Response, error) {
	if t.plain != nil {
		req, err := t.newRequest(ctx, job)
		if err != nil {
			return nil, err
		}
		resp, err := t.plain.roundTrip(ctx, req, deadline)
		if err != nil {
			return nil, t.networkError(ctx, !time.Now().Before(deadline), err)
		}
		return resp, nil
	}
	attemptCtx, cancel := context.WithDeadline(ctx, deadline)
	req, err := t.newRequest(attemptCtx, job)
	if err != nil {
		cancel()
		return nil, err
	}
	resp, err := t.transport.RoundTrip(req)
	if err != nil {
		cancel()
		// Timed out only if the deadline passed, as the plain client
		// decides (the context, cancelled just above, cannot say).
		return nil, t.networkError(ctx, !time.Now().Before(deadline), err)
	}
	// The attempt's context lives until the body is closed: cancelling it
	// earlier would cut the body off.
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelBody releases the attempt's context when the answer's body is
// closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// newRequest builds the POST of job's payload with its stored, static and
// metadata headers, signed when the target has a secret.
func (t *Target) newRequest(ctx context.Context, job *queue.Job) (*http.Request, error) {
	payload := job.Payload
	var resigned http.Header
	if t.resign != nil {
		var err error
		if payload, resigned, err = t.resign.resigned(job, t.now()); err != nil {
			return nil, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(payload))
	if err != nil {
		// Validate makes this unreachable; the URL stays out of the text.
		return nil, queue.Permanent(errors.New("build request: invalid url"))
	}
	for _, h := range job.Headers {
		req.Header.Add(h.Name, h.Value)
	}
	for name, values := range t.headers {
		// A copy: deliveries run concurrently and share t.headers.
		req.Header[name] = slices.Clone(values)
	}
	if t.host != "" {
		req.Host = t.host
	}
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set(caddywebhook.HeaderDeliveryID, job.DeliveryID)
	req.Header.Set(caddywebhook.HeaderSource, job.Source)
	if job.EventType != "" {
		req.Header.Set(caddywebhook.HeaderEventType, job.EventType)
	} else {
		req.Header.Del(caddywebhook.HeaderEventType)
	}
	req.Header.Set(caddywebhook.HeaderAttempt, strconv.Itoa(job.Attempt))
	if job.Replays > 0 {
		req.Header.Set(caddywebhook.HeaderReplay, strconv.Itoa(job.Replays))
	} else {
		req.Header.Del(caddywebhook.HeaderReplay) // not from a static header either
	}
	req.Header.Set(caddywebhook.HeaderJobID, strconv.FormatInt(job.ID, 10))
	// The trace context is set last among the headers: neither a stored
	// header, a static one nor a transform's can stand in for it, and an
	// event that arrived in no trace sends none.
	if parent, state := tracecontext.Traceparent(ctx); parent != "" {
		req.Header[caddywebhook.HeaderTraceparent] = []string{parent}
		if state != "" {
			req.Header[caddywebhook.HeaderTracestate] = []string{state}
		} else {
			delete(req.Header, caddywebhook.HeaderTracestate)
		}
	} else {
		delete(req.Header, caddywebhook.HeaderTraceparent)
		delete(req.Header, caddywebhook.HeaderTracestate)
	}
	for name, values := range resigned {
		req.Header[name] = values
	}
	if t.signSecret != "" {
		signed, err := forward.Sign(t.signSecret, forward.MessageID(job), t.now(), job.Payload)
		if err != nil {
			return nil, queue.Permanent(fmt.Errorf("sign request: %w", err))
		}
		for name, values := range signed {
			req.Header[name] = values
		}
	}

	if t.basicAuth != nil {
		password, _ := t.basicAuth.Password()
		req.SetBasicAuth(t.basicAuth.Username(), password)
	}
	// A header a transform or the config set may hold what no header can
	// carry; no retry would send it, so the job is parked at once.
	for name, values := range req.Header {
		if !signature.ValidHeaderName(name) {
			return nil, queue.Permanent(fmt.Errorf("build request: invalid header name %q", name))
		}
		for _, v := range values {
			if !forward.ValidHeaderValue(v) {
				return nil, queue.Permanent(fmt.Errorf("build request: header %s has a control character and cannot be sent", name))
			}
		}
	}
	return req, nil
}

// networkError describes a failed round trip without the URL, whose query
// string may hold a token. All of them are transient. timedOut says the
// attempt ran out of its time.
func (t *Target) networkError(parent context.Context, timedOut bool, err error) error {
	if parent.Err() != nil {
		// The pool cancelled the attempt (shutdown, lost lease).
		return fmt.Errorf("post to upstream: %w", parent.Err())
	}
	if timedOut {
		return fmt.Errorf("post to upstream: timed out after %s", time.Duration(t.Timeout))
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	return fmt.Errorf("post to upstream: %s", t.scrub(queue.SafeLine(err.Error(), 0)))
}

// urlSecrets returns the parts of the upstream URL that may be
// credentials (the query string, its values, the userinfo password), so
// that an upstream echoing the request line in its error body ("Cannot POST
// /hook?token=…") does not store them in the job's last error. Like static
// header values, parts shorter than 8 bytes are left alone. A nil URL (one
// that did not parse) yields nothing.
func urlSecrets(u *url.URL) []string {
	if u == nil {
		return nil
	}
	var secrets []string
	add := func(v string) {
		if len(v) >= 8 {
			secrets = append(secrets, v)
		}
	}
	if pw, ok := u.User.Password(); ok {
		add(pw)
	}
	add(u.RawQuery)
	for _, values := range u.Query() {
		for _, v := range values {
			add(v)
			add(url.QueryEscape(v))
		}
	}
	return secrets
}

// scrub removes the signing secret, long static header values and the
// URL's credentials from text an upstream chose to send back.
func (t *Target) scrub(s string) string { return forward.RedactSecrets(s, t.redact) }

// retryable reports whether a non-2xx status is worth another attempt:
// the upstream is overloaded, failing or asked us to slow down.
func retryable(status int) bool {
	switch {
	case status == http.StatusRequestTimeout, // 408
		status == http.StatusTooEarly,        // 425
		status == http.StatusTooManyRequests, // 429
		status >= 500:
		return true
	}
	return false
}

// parseRetryAfter reads a Retry-After value, delta-seconds or an
// HTTP-date, as a wait from now. A date in the past means no wait.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseUint(v, 10, 64); err == nil {
		// Clamp before multiplying; the pool caps the wait anyway.
		if secs > uint64(math.MaxInt64/int64(time.Second)) {
			return time.Duration(math.MaxInt64), true
		}
		return time.Duration(secs) * time.Second, true
	} else if errors.Is(err, strconv.ErrRange) {
		return time.Duration(math.MaxInt64), true
	}
	when, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(when.Sub(now), 0), true
}

// UnmarshalCaddyfile sets up the target from Caddyfile tokens. The dispenser
// starts at the kind token:
//
//	http <url> {
//		timeout <duration>
//		header <name> <value>
//		sign <secret>
//		resign <scheme> <secret>
//	}
//
// header may be repeated; sign takes the Standard Webhooks secret, usually a
// placeholder such as {env.UPSTREAM_WEBHOOK_SECRET}; resign a scheme and
// the secret to sign as its sender with (Resign), not with sign.
func (t *Target) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the kind, "http"
	if !d.NextArg() {
		return d.Errf("http target: missing the upstream URL")
	}
	t.URL = d.Val()
	if d.NextArg() {
		return d.Errf("http target: unexpected argument %q after the URL", d.Val())
	}
	for d.NextBlock(0) {
		switch opt := d.Val(); opt {
		case "timeout":
			dur, err := caddyfileopt.Timeout(d, "http")
			if err != nil {
				return err
			}
			t.Timeout = dur
		case "header":
			args := d.RemainingArgs()
			if len(args) != 2 {
				return d.Errf("http target: header: takes a name and a value")
			}
			if t.Headers == nil {
				t.Headers = make(http.Header)
			}
			t.Headers.Add(args[0], args[1])
		case "sign":
			args := d.RemainingArgs()
			if len(args) != 1 {
				return d.Errf("http target: sign: takes one secret")
			}
			t.SignSecret = args[0]
		case "resign":
			args := d.RemainingArgs()
			if len(args) != 2 {
				return d.Errf("http target: resign: takes a scheme and a secret, e.g. resign stripe {env.APP_WEBHOOK_SECRET}")
			}
			t.Resign = &Resign{Scheme: args[0], Secret: args[1]}
		default:
			return d.Errf("http target: unknown option %q", opt)
		}
	}
	return nil
}

// Interface guards.
var (
	_ caddy.Provisioner     = (*Target)(nil)
	_ caddy.Validator       = (*Target)(nil)
	_ caddy.CleanerUpper    = (*Target)(nil)
	_ caddyfile.Unmarshaler = (*Target)(nil)
	_ caddywebhook.Target   = (*Target)(nil)
)
