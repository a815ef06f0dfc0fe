package caddywebhook

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/textproto"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/signature"
)

func init() {
	caddy.RegisterModule(new(Receiver))
}

// Receiver is the webhook_receiver handler. For each request it does five
// things, in this order:
//
//  1. reads the body, capped at MaxBody (413 when larger), into memory
//     that grows with the bytes received, within MaxBodyInflight for all
//     its requests together (503 with Retry-After past it);
//  2. verifies the signature and, for timestamped schemes, the timestamp
//     (401 with an empty body; nothing is stored);
//  3. takes the delivery id the scheme provides (or an override, or the
//     body's SHA-256 as a last resort) and the event type, and refuses
//     either with 400 unless it is UTF-8 text without control characters
//     of at most 1024 bytes, the same on every backend;
//  4. stores the event with one job per target whose events filter
//     matches, deduplicated on (source, delivery id), durably committed;
//  5. answers 202 after the commit — also for a duplicate and for an event
//     no target wants (stored, no job); 200 for the senders that retry a
//     202 (mailgun: signature.Scheme.AcceptStatus) — and 503 when the store failed,
//     so the sender retries. It never answers 2xx for anything not on disk.
//
// Some senders check the endpoint before sending events (a handshake:
// Slack's url_verification, Meta's GET hub.challenge, Zoom's
// endpoint.url_validation, …). The receiver answers them itself,
// synchronously, as the scheme says (signature.Handshaker), after
// verifying them wherever the sender signs them; a handshake is never
// stored as an event, and a forged one gets 401 like any forgery.
//
// Other methods than POST get 405, except GET for the schemes whose
// handshake is a GET (meta, dropbox, x, okta). A POST whose signature
// header is missing or malformed gets 401 before its body is read. The
// handler is terminal: it never calls
// the next handler, on success or failure, since the request is answered.
//
// Each request gets one outcome word — accepted, duplicate, no_target,
// handshake, bad_signature, stale_timestamp, too_large, method_not_allowed,
// store_failed, bad_request, bad_delivery_id, bad_event_type, busy — in Caddy's access log (the "webhook" object
// of the extra log fields: source, outcome, delivery_id, event_type), in
// the metric caddy_webhook_events_received_total, and in the placeholders
// {webhook.outcome}, {webhook.source}, {webhook.delivery_id} and
// {webhook.event_type}. Headers, bodies, query strings and secrets are
// never logged by the receiver. Caddy's own access log, when enabled, copies
// every request header before any handler runs, signature headers included
// (and X-Gitlab-Token, which is the secret itself); drop them with the log's
// filter encoder:
//
//	log {
//		format filter {
//			request>headers>X-Hub-Signature-256 delete
//			request>headers>Stripe-Signature delete
//			request>headers>Webhook-Signature delete
//			request>headers>X-Gitlab-Token delete
//		}
//	}
type Receiver struct {
	// Source names this receiver: it scopes the dedupe of delivery ids,
	// is stored with every event, labels metrics and is how the admin API
	// and the CLI filter jobs. Unique per config; letters, digits, '.',
	// '_' and '-'. Required.
	Source string `json:"source,omitempty"`

	// Scheme is the signature scheme: github, stripe, standard (Standard
	// Webhooks: Svix, Polar…), slack, shopify, gitlab, discord, sendgrid,
	// telnyx, hmac (generic, see HMAC) or a provider preset such as
	// paddle, linear or lemonsqueezy (signature.Schemes lists them all).
	// Required.
	Scheme string `json:"scheme,omitempty"`

	// Secrets are the accepted signing secrets, tried in order, so a
	// secret can be rotated without downtime. Use placeholders such as
	// {env.GITHUB_WEBHOOK_SECRET} or {file./run/secrets/github}: they are
	// resolved once at provisioning and the values are kept out of the
	// config, logs, errors and metrics. At least one is required, except
	// by the schemes that sign with a private key (see PublicKeys).
	Secrets []string `json:"secrets,omitempty"`

	// PublicKeys are the accepted public keys of the schemes that sign
	// with a private key, tried in order like secrets: ed25519 in hex
	// (discord), base64 (telnyx) or whpk_… (standard v1a), ECDSA P-256 as
	// base64 DER or PEM (sendgrid). Placeholders are resolved as for
	// secrets. Required by discord, sendgrid and telnyx. Default: none.
	PublicKeys []string `json:"public_keys,omitempty"`

	// VerifyToken is the token of the meta scheme's GET handshake
	// (hub.verify_token, chosen in the App Dashboard next to the callback
	// URL): a secret, so use a placeholder as for secrets. The handshake
	// is refused without it. Default: none.
	VerifyToken string `json:"verify_token,omitempty"`

	// IssuedSecretFile is where the receiver writes a signing secret the
	// sender issues in its handshake (Asana's X-Hook-Secret, Notion's
	// verification_token), once: the
	// file is created with mode 0600 when it does not exist, and the
	// handshake is refused (401) when it does, so an endpoint accepts a
	// new secret only while the operator has armed it by removing the
	// file. At provisioning, the file's content, when it exists, is one of
	// the secrets (after those of Secrets; an existing empty file is an
	// error, remove it to re-arm); reload Caddy after the
	// handshake to verify with it. Without it, such a handshake is refused
	// unless it presents one of the Secrets. Default: none.
	IssuedSecretFile string `json:"issued_secret_file,omitempty"`

	// PublicURL is the URL the sender signs, for schemes that sign the
	// request URL, when a proxy in front changes the scheme, host or path.
	// Default: the URL rebuilt from the request (its scheme, Host header
	// and original request URI).
	PublicURL string `json:"public_url,omitempty"`

	// SecretMode says how a standard scheme secret becomes the key:
	// base64 (the specification, Svix), raw (the secret string's bytes,
	// Polar's SDKs) or both. Default: base64.
	SecretMode string `json:"secret_mode,omitempty"`

	// Tolerance is how far the signed timestamp of the stripe, standard
	// and slack schemes may be from now, in either direction, as a
	// duration; "off" turns the check off, an explicit choice, e.g. to
	// accept deliveries replayed from the sender's archive. Default: 5m.
	Tolerance string `json:"tolerance,omitempty"`

	// MaxBody is the largest body accepted, in bytes; a larger request
	// gets 413 and is not read further. Default: 1 MiB.
	MaxBody int64 `json:"max_body,omitempty"`

	// MaxBodyInflight bounds the bytes this receiver holds for bodies
	// still being read or verified, summed over its requests: a request
	// whose body would take it past the bound gets 503 with Retry-After
	// (outcome busy) instead of more memory. A body's buffer starts small
	// and grows with the bytes that actually arrive, never with a declared
	// Content-Length, so the bound is reached by senders that send bytes,
	// not by ones that only declare them. Between max_body and 1 GiB.
	// Default: 64 MiB or 4 × max_body, whichever is larger.
	MaxBodyInflight int64 `json:"max_body_inflight,omitempty"`

	// DeliveryID overrides where the delivery id comes from: a request
	// header or a top-level field of the JSON body (read only after the
	// signature verified). Default: the scheme's id (X-GitHub-Delivery,
	// Stripe's event id, webhook-id…), else the body's SHA-256.
	DeliveryID *FieldSource `json:"delivery_id,omitempty"`

	// EventType overrides where the event type comes from, the same way.
	// Default: the scheme's event type, if it has one.
	EventType *FieldSource `json:"event_type,omitempty"`

	// OrderingKey delivers the events that share a key in the order they
	// arrived, to each target: a job whose key is K does not start while
	// an earlier job of K for the same target is pending, running or
	// waiting to retry. The jobs waiting behind a key are counted as
	// blocked, and cost the worker pool's claim nothing. Events without
	// the key, and other keys, are not held up. The key is read, like
	// delivery_id, from a header or a JSON field (a dotted path) after the
	// signature verified; an event whose key is absent or empty is not
	// ordered. A key longer than 256 bytes, or that is not valid text, is
	// replaced by its SHA-256. Default: none, events are delivered in any
	// order.
	OrderingKey *OrderingKey `json:"ordering_key,omitempty"`

	// HMAC configures the signed-content engine: required with the hmac
	// scheme, optional with a preset (its fields override the preset's),
	// refused with the other schemes.
	HMAC *HMACOptions `json:"hmac,omitempty"`

	// Targets receive the accepted events, each as its own job with its
	// own retries. An event that matches no target is still stored (and
	// answered 202, outcome no_target) but delivered nowhere.
	Targets []*TargetConfig `json:"targets,omitempty"`

	// Set in Provision: what the hot path reads.
	secrets      []string // resolved; Validate builds the verifier from them
	verifier     signature.Verifier
	publicKeys   []string             // resolved public keys
	verifyToken  string               // resolved verify token
	handshaker   signature.Handshaker // nil when the scheme has no handshake
	getAllowed   bool                 // the scheme's handshake is a GET
	acceptStatus int                  // of accepted, duplicate and no_target; 0: 202
	needsURL     bool                 // the verifier signs Request.URL
	app          *App                 // its store opens when the app starts
	maxBody      int64
	inflight     bodyBudget
	orderingHold bool            // OrderingKey.OnDead is hold
	forward      []forwardHeader // headers stored with the event
	allTargets   []string        // every target name, when no target filters events
	filters      []targetFilter  // per target, when some filter
	logger       *zap.Logger
	received     [numOutcomes]prometheus.Counter
}

// FieldSource names where a value is read from: a header or a top-level
// JSON field of the body. Set exactly one.
type FieldSource struct {
	// Header is a request header name.
	Header string `json:"header,omitempty"`
	// JSON is a top-level field of the JSON body.
	JSON string `json:"json,omitempty"`
}

// OrderingKey says where a receiver's ordering key comes from and what a
// dead job does to its key. Set exactly one of Header and JSON.
type OrderingKey struct {
	// Header is a request header name.
	Header string `json:"header,omitempty"`
	// JSON is a field of the JSON body; a nested field is a path of
	// member names joined with dots ("data.object.id").
	JSON string `json:"json,omitempty"`
	// OnDead says what a job that goes dead does to its key: hold keeps
	// the later jobs of the key (for that target) blocked until the dead
	// job is replayed and delivered, or discarded, so the order is never
	// broken; release lets the next job go ahead, and a replay of the
	// dead job then waits behind the key's current job. The choice is
	// stored with each job when it is received. Default: hold.
	OnDead string `json:"on_dead,omitempty"`
}

// HMACOptions configures the signed-content engine: an HMAC over a
// template of the body, timestamp, id, URL, method and headers, in one
// header. With a preset, every field defaults to the preset's value.
type HMACOptions struct {
	// Header carries the signature, e.g. X-Signature. Required with the
	// hmac scheme.
	Header string `json:"header,omitempty"`
	// Syntax is how Header lists signatures: plain, list (comma- or
	// space-separated) or pairs (key=value items, as in t=…,v1=…).
	// Default: plain.
	Syntax string `json:"syntax,omitempty"`
	// Key is the key of the signatures in a pairs header, e.g. v1.
	// Required with pairs.
	Key string `json:"key,omitempty"`
	// Algorithm is sha256, sha1 or sha512. Default: sha256.
	Algorithm string `json:"algorithm,omitempty"`
	// Encoding of the signature: hex, base64 or base64url. Default: hex.
	Encoding string `json:"encoding,omitempty"`
	// Prefix precedes each encoded signature, as in "sha256=". Default: none.
	Prefix string `json:"prefix,omitempty"`
	// SignedContent is the template of what is signed, e.g.
	// "{timestamp}.{body}"; see signature.Config. Default: {body}.
	SignedContent string `json:"signed_content,omitempty"`
	// TimestampHeader names the header of the signed timestamp.
	// Default: none.
	TimestampHeader string `json:"timestamp_header,omitempty"`
	// TimestampKey is the key of the timestamp in a pairs header, e.g. t.
	// Default: none.
	TimestampKey string `json:"timestamp_key,omitempty"`
	// TimestampField is a field of the JSON body that holds the sender's
	// timestamp, as Linear's webhookTimestamp, checked against the
	// tolerance after the signature verified; see signature.Config.
	// Default: none.
	TimestampField string `json:"timestamp_field,omitempty"`
	// TimestampFormat is unix (seconds), unix_ms or rfc3339. Default: unix.
	TimestampFormat string `json:"timestamp_format,omitempty"`
}

// TargetConfig is one destination of a receiver's events.
type TargetConfig struct {
	// Name identifies the target in jobs, logs, metrics and the admin API.
	// Jobs store it, so it must stay the same across reloads for their
	// deliveries to continue. Default: the kind (http, exec), then
	// <kind>-2, <kind>-3… for further targets of the same kind in this
	// receiver.
	Name string `json:"name,omitempty"`

	// Events limits the target to these event types; an entry ending in
	// '*' matches by prefix ("invoice.*"). Default: every event.
	Events []string `json:"events,omitempty"`

	// DeliverRaw is the target module, in the webhook.targets namespace,
	// selected by its "kind": http or exec.
	DeliverRaw json.RawMessage `json:"deliver,omitempty" caddy:"namespace=webhook.targets inline_key=kind"`

	// DeliverySettings are the target's own retry and flow-control
	// settings; their JSON fields sit beside name and events.
	DeliverySettings
}

// forwardHeader is a header stored with each event for the targets.
type forwardHeader struct {
	name  string // as stored and forwarded
	canon string // key in http.Header
}

// targetFilter is a target's events filter.
type targetFilter struct {
	name   string
	events []string // nil: all
}

// defaultMaxBody is the default cap on a body: enough for the provider
// payloads we have seen (GitHub caps its own at 25 MB, but pushes are far
// smaller); raise max_body for larger ones.
const defaultMaxBody = 1 << 20

// maxMaxBody bounds max_body: payloads live in the database and in memory
// while a request is verified, so a typo such as 1GB should fail loudly.
const maxMaxBody = 64 << 20

// defaultMaxBodyInflight is the least default bound on the bytes held by
// bodies being read: with the default max_body, 64 senders at once may be
// one byte short of the cap. The default is 4 × max_body when that is more.
const defaultMaxBodyInflight = 64 << 20

// maxMaxBodyInflight bounds max_body_inflight, as maxMaxBody bounds max_body.
const maxMaxBodyInflight = 1 << 30

// CaddyModule returns the Caddy module information.
func (*Receiver) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.webhook_receiver",
		New: func() caddy.Module { return new(Receiver) },
	}
}

// Provision sets the defaults, resolves the secrets, loads the targets and
// registers them with the webhook app; Validate checks the result. The
// store is not opened here (`caddy validate` provisions too): the receiver
// reaches it through the app, which opens it when it starts.
func (rc *Receiver) Provision(ctx caddy.Context) error {
	rc.logger = ctx.Logger()
	rc.maxBody = cmp.Or(rc.MaxBody, defaultMaxBody)
	rc.inflight.limit = cmp.Or(rc.MaxBodyInflight, max(defaultMaxBodyInflight, 4*rc.maxBody))
	appVal, err := ctx.App("webhook")
	if err != nil {
		return rc.errf("load webhook app: %w", err)
	}
	rc.app = appVal.(*App)
	// The secrets and the targets' secret-bearing fields resolve into the
	// app's record of this config load's secrets.
	ctx = WithSecrets(ctx, rc.app.secrets)
	if err := rc.resolveSecrets(ctx); err != nil {
		return err
	}
	rc.forward = forwardHeaders(rc.Scheme, rc.EventType)

	targets, err := rc.provisionTargets(ctx)
	if err != nil {
		return rc.errf("%w", err)
	}
	if err := rc.app.registerReceiver(rc, targets); err != nil {
		return err
	}
	for o := range numOutcomes {
		rc.received[o] = receivedCounter(rc.Source, o)
	}
	return nil
}

// errf is an error naming the receiver by its source.
func (rc *Receiver) errf(format string, args ...any) error {
	return fmt.Errorf("webhook_receiver %q: "+format, append([]any{rc.Source}, args...)...)
}

// resolveSecrets resolves the placeholders of the secrets, the public keys
// and the verify token, and reads an issued secret file; Validate checks
// what they hold.
func (rc *Receiver) resolveSecrets(ctx context.Context) error {
	secrets, err := resolveKeys(ctx, rc.Secrets)
	if err != nil {
		return rc.errf("secret %w", err)
	}
	if rc.IssuedSecretFile != "" {
		issued, err := readIssuedSecret(rc.IssuedSecretFile)
		if err != nil {
			return rc.errf("issued_secret_file: %w", err)
		}
		switch {
		case issued != "":
			recordSecret(ctx, issued)
			secrets = append(secrets, issued)
		case len(secrets) == 0:
			// Armed, before the handshake: no event can verify until the
			// issued secret is written and Caddy reloaded.
			secrets = []string{rand.Text() + rand.Text()}
		}
	}
	rc.secrets = secrets
	if rc.verifyToken, err = ResolveSecret(ctx, "verify_token", rc.VerifyToken); err != nil {
		return rc.errf("%w", err)
	}
	if rc.publicKeys, err = resolveKeys(ctx, rc.PublicKeys); err != nil {
		return rc.errf("public_key %w", err)
	}
	return nil
}

// Validate checks the configuration and builds the verifier, the last
// check of the signature options. Each message names the option.
func (rc *Receiver) Validate() error {
	if rc.Source == "" {
		return errors.New("webhook_receiver: source is required")
	}
	if !validName(rc.Source) {
		return fmt.Errorf("webhook_receiver: source %q: use letters, digits, '.', '_' and '-' (at most 64)", rc.Source)
	}
	if reservedSource(rc.Source) {
		return fmt.Errorf("webhook_receiver: source %q: names beginning with '_' are reserved for the app's own events, such as %s", rc.Source, notifySource)
	}
	if rc.Scheme == "" {
		return rc.errf("scheme is required (one of %s)", strings.Join(signature.Schemes(), ", "))
	}
	if len(rc.secrets) == 0 && len(rc.publicKeys) == 0 {
		return rc.errf("at least one secret is required (or public_key, for the schemes that sign with a private key)")
	}
	cfg := signature.Config{
		Scheme:      rc.Scheme,
		Secrets:     rc.secrets,
		PublicKeys:  rc.publicKeys,
		SecretMode:  signature.SecretMode(rc.SecretMode),
		PublicURL:   rc.PublicURL,
		VerifyToken: rc.verifyToken,
	}
	switch rc.Tolerance {
	case "":
	case "off":
		cfg.IgnoreTimestamp = true
	default:
		d, err := caddy.ParseDuration(rc.Tolerance)
		if err != nil || d <= 0 {
			return rc.errf("tolerance %q is not a positive duration or off", rc.Tolerance)
		}
		cfg.Tolerance = d
	}
	if f := rc.DeliveryID; f != nil {
		if (f.Header == "") == (f.JSON == "") {
			return rc.errf("delivery_id: set exactly one of header and json")
		}
		cfg.DeliveryIDHeader, cfg.DeliveryIDField = f.Header, f.JSON
	}
	if f := rc.EventType; f != nil {
		if (f.Header == "") == (f.JSON == "") {
			return rc.errf("event_type: set exactly one of header and json")
		}
		cfg.EventTypeHeader, cfg.EventTypeField = f.Header, f.JSON
	}
	if k := rc.OrderingKey; k != nil {
		if (k.Header == "") == (k.JSON == "") {
			return rc.errf("ordering_key: set exactly one of header and json")
		}
		switch k.OnDead {
		case "", "hold":
			rc.orderingHold = true
		case "release":
			rc.orderingHold = false
		default:
			return rc.errf("ordering_key: on_dead %q is not hold or release", k.OnDead)
		}
		cfg.OrderingKeyHeader, cfg.OrderingKeyField = k.Header, k.JSON
	}
	if h := rc.HMAC; h != nil {
		cfg.SignatureHeader, cfg.SignatureSyntax, cfg.SignatureKey = h.Header, h.Syntax, h.Key
		cfg.Algorithm, cfg.Encoding, cfg.SignaturePrefix = h.Algorithm, h.Encoding, h.Prefix
		cfg.SignedContent, cfg.TimestampHeader, cfg.TimestampKey, cfg.TimestampFormat = h.SignedContent, h.TimestampHeader, h.TimestampKey, h.TimestampFormat
		cfg.TimestampField = h.TimestampField
	}
	if rc.maxBody < 0 || rc.maxBody > maxMaxBody {
		return rc.errf("max_body %d bytes is not between 1B and 64MiB", rc.MaxBody)
	}
	if rc.inflight.limit < rc.maxBody || rc.inflight.limit > maxMaxBodyInflight {
		return rc.errf("max_body_inflight %d bytes is not between max_body (%d) and 1GiB", rc.inflight.limit, rc.maxBody)
	}
	v, err := signature.New(cfg)
	if err != nil {
		return rc.errf("%w", err)
	}
	rc.verifier = v
	rc.needsURL = signature.UsesURL(v)
	rc.handshaker, _ = v.(signature.Handshaker)
	if d, ok := signature.Lookup(rc.Scheme); ok {
		rc.getAllowed = d.GETHandshake
		rc.acceptStatus = d.AcceptStatus
	}
	return nil
}

// provisionTargets names and loads the target modules and prepares the
// events filters.
func (rc *Receiver) provisionTargets(ctx caddy.Context) ([]namedTarget, error) {
	var (
		targets   []namedTarget
		seen      = make(map[string]bool)
		kindCount = make(map[string]int)
		filtered  bool
	)
	for i, tc := range rc.Targets {
		if tc == nil || len(tc.DeliverRaw) == 0 {
			return nil, fmt.Errorf("target #%d: deliver is required", i+1)
		}
		var probe struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(tc.DeliverRaw, &probe); err != nil || probe.Kind == "" {
			return nil, fmt.Errorf("target #%d: deliver needs a kind (http, exec)", i+1)
		}
		kindCount[probe.Kind]++
		name := tc.Name
		if name == "" {
			name = probe.Kind
			if n := kindCount[probe.Kind]; n > 1 {
				name = fmt.Sprintf("%s-%d", probe.Kind, n)
			}
		}
		if !validName(name) {
			return nil, fmt.Errorf("target #%d: name %q: use letters, digits, '.', '_' and '-' (at most 64)", i+1, name)
		}
		if seen[name] {
			return nil, fmt.Errorf("target #%d: name %q is used twice in this receiver; set name", i+1, name)
		}
		seen[name] = true
		for _, e := range tc.Events {
			if e == "" {
				return nil, fmt.Errorf("target %q: empty event type in events", name)
			}
		}
		retry, limits, err := tc.DeliverySettings.check()
		if err != nil {
			return nil, fmt.Errorf("target %q: %w", name, err)
		}
		mod, err := ctx.LoadModule(tc, "DeliverRaw")
		if err != nil {
			return nil, fmt.Errorf("target %q: %w", name, err)
		}
		t, ok := mod.(Target)
		if !ok {
			return nil, fmt.Errorf("target %q: module %T is not a webhook target", name, mod)
		}
		targets = append(targets, namedTarget{
			name: name, target: t,
			retry: retry,
			flow:  limits,
		})
		rc.filters = append(rc.filters, targetFilter{name: name, events: tc.Events})
		rc.allTargets = append(rc.allTargets, name)
		filtered = filtered || len(tc.Events) > 0
	}
	if filtered {
		rc.allTargets = nil
	} else {
		rc.filters = nil
	}
	return targets, nil
}

// resolveKeys resolves the placeholders of secrets or public keys.
func resolveKeys(ctx context.Context, keys []string) ([]string, error) {
	out := make([]string, len(keys))
	for i, s := range keys {
		v, err := ResolveSecret(ctx, fmt.Sprintf("#%d", i+1), s)
		if err != nil {
			return nil, err
		}
		if v == "" {
			return nil, fmt.Errorf("#%d is empty", i+1)
		}
		out[i] = v
	}
	return out, nil
}

// forwardHeaders lists the headers stored with each event for its targets:
// the content type and the scheme's event-type header, never a signature.
func forwardHeaders(scheme string, eventType *FieldSource) []forwardHeader {
	names := []string{"Content-Type"}
	if d, ok := signature.Lookup(scheme); ok {
		names = append(names, d.Forward...)
	}
	if eventType != nil && eventType.Header != "" {
		names = append(names, eventType.Header)
	}
	var out []forwardHeader
	for _, n := range names {
		canon := textproto.CanonicalMIMEHeaderKey(n)
		dup := false
		for _, f := range out {
			dup = dup || f.canon == canon
		}
		if !dup {
			out = append(out, forwardHeader{name: n, canon: canon})
		}
	}
	return out
}

// bodyBuffers recycles request body buffers. Only buffers up to
// maxPooledBuffer go back, so a few large bodies do not pin memory.
var bodyBuffers = sync.Pool{New: func() any { b := make([]byte, 0, minBodyBuffer); return &b }}

const (
	// minBodyBuffer is the capacity a body starts with: most webhooks fit,
	// and a sender that declares more gets more only as it sends it.
	minBodyBuffer   = 4 << 10
	maxPooledBuffer = 256 << 10
)

// Errors of readBody.
var (
	// errTooLarge reports a body over the cap.
	errTooLarge = errors.New("body too large")
	// errBusy reports a body that would take the receiver past its bound
	// on the bytes of bodies being read.
	errBusy = errors.New("too many body bytes in flight")
)

// busyRetryAfter is the Retry-After of a 503 for a receiver at its bound
// on body bytes in flight, in seconds.
const busyRetryAfter = "5"

// ServeHTTP verifies, stores and acknowledges one webhook. It never calls
// next: the receiver answers every request itself.
func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	info := &requestInfo{source: rc.Source}
	if r.Method == http.MethodGet && rc.getAllowed {
		rc.serveGET(w, r, info)
		return nil
	}
	if r.Method != http.MethodPost {
		rc.methodNotAllowed(w, r, info)
		return nil
	}
	if r.ContentLength > rc.maxBody {
		rc.answer(w, r, info, outcomeTooLarge)
		return nil
	}

	// A request whose signature header is missing or malformed cannot
	// verify: refused before its body is read.
	req := signature.Request{Method: r.Method, Header: r.Header}
	if rc.needsURL || (rc.handshaker != nil && r.URL.RawQuery != "") {
		req.URL = requestURL(r)
	}
	if err := signature.CheckHeaders(rc.verifier, req); err != nil {
		rc.refuse(w, r, info, err)
		return nil
	}

	// 1. The body, capped; memory beyond the pooled buffer is charged to
	// the receiver's bound until the signature is checked.
	bp := bodyBuffers.Get().(*[]byte)
	body, held, err := readBody(r.Body, *bp, rc.maxBody, r.ContentLength, &rc.inflight)
	*bp = body[:0]
	if err != nil {
		rc.inflight.release(held)
		putBuffer(bp)
		switch {
		case errors.Is(err, errTooLarge):
			rc.answer(w, r, info, outcomeTooLarge)
		case errors.Is(err, errBusy):
			w.Header().Set("Retry-After", busyRetryAfter)
			rc.answer(w, r, info, outcomeBusy)
		default:
			rc.answer(w, r, info, outcomeBadRequest)
		}
		return nil
	}

	// 2. Verify before anything else looks at the bytes: a handshake
	// first, answered here and never stored, then an event.
	req.Body = body
	if rc.handshaker != nil {
		resp, ok, err := rc.handshaker.Handshake(req)
		if err != nil || ok {
			rc.inflight.release(held)
			putBuffer(bp)
			if err != nil {
				rc.refuse(w, r, info, err)
			} else {
				rc.answerHandshake(w, r, info, resp)
			}
			return nil
		}
	}
	res, err := rc.verifier.Verify(req)
	rc.inflight.release(held)
	if err != nil {
		putBuffer(bp)
		rc.refuse(w, r, info, err)
		return nil
	}

	// 3. The delivery id and event type, from the verifier, checked here
	// so that both backends give the same answer for the same bytes.
	if !validEventText(res.DeliveryID) {
		putBuffer(bp)
		rc.answer(w, r, info, outcomeBadDeliveryID)
		return nil
	}
	info.deliveryID = res.DeliveryID
	if !validEventText(res.EventType) {
		putBuffer(bp)
		rc.answer(w, r, info, outcomeBadEventType)
		return nil
	}
	info.eventType = res.EventType

	// 4. Store, fanned out to the matching targets.
	store, err := rc.app.queueStore()
	if err == nil {
		ev := queue.Event{
			Source:     rc.Source,
			DeliveryID: res.DeliveryID,
			EventType:  res.EventType,
			Headers:    rc.headers(info.headers[:0], r.Header),
			Payload:    body,
			Targets:    rc.targetsFor(res.EventType),
			Trace:      requestTrace(r),
		}
		if res.OrderingKey != "" {
			ev.OrderingKey, ev.OrderingHold = orderingKey(res.OrderingKey), rc.orderingHold
		}
		var out queue.EnqueueResult
		if out, err = store.Enqueue(r.Context(), ev); err == nil {
			putBuffer(bp)
			// 5. Acknowledge what is on disk.
			switch {
			case out.Duplicate:
				rc.answer(w, r, info, outcomeDuplicate)
			case out.Jobs == 0:
				rc.answer(w, r, info, outcomeNoTarget)
			default:
				rc.answer(w, r, info, outcomeAccepted)
			}
			return nil
		}
	}
	// The buffer is not recycled: a store that gave up on the request may
	// still hold it.
	level := zapcore.ErrorLevel
	if r.Context().Err() != nil {
		// The client went away before the commit; it will retry.
		level = zapcore.DebugLevel
	}
	if ce := rc.logger.Check(level, "store webhook event"); ce != nil {
		ce.Write(zap.String("source", rc.Source), zap.String("delivery_id", res.DeliveryID), zap.Error(err))
	}
	rc.answer(w, r, info, outcomeStoreFailed)
	return nil
}

// serveGET answers the GET handshake of the schemes that have one, and 405
// to any other GET.
func (rc *Receiver) serveGET(w http.ResponseWriter, r *http.Request, info *requestInfo) {
	req := signature.Request{Method: r.Method, URL: requestURL(r), Header: r.Header}
	resp, ok, err := rc.handshaker.Handshake(req)
	switch {
	case err != nil:
		rc.refuse(w, r, info, err)
	case ok:
		rc.answerHandshake(w, r, info, resp)
	default:
		rc.methodNotAllowed(w, r, info)
	}
}

func (rc *Receiver) methodNotAllowed(w http.ResponseWriter, r *http.Request, info *requestInfo) {
	allow := http.MethodPost
	if rc.getAllowed {
		allow = "GET, POST"
	}
	w.Header().Set("Allow", allow)
	rc.answer(w, r, info, outcomeMethodNotAllowed)
}

// refuse answers 401 to a request or handshake that did not verify.
func (rc *Receiver) refuse(w http.ResponseWriter, r *http.Request, info *requestInfo, err error) {
	if errors.Is(err, signature.ErrTimestamp) {
		rc.answer(w, r, info, outcomeStaleTimestamp)
	} else {
		rc.answer(w, r, info, outcomeBadSignature)
	}
}

// answerHandshake writes the scheme's answer to a verified handshake. A
// secret the sender issues in it is written to IssuedSecretFile first;
// when it cannot be, the handshake is refused, since confirming it would
// subscribe an endpoint that cannot verify what follows.
func (rc *Receiver) answerHandshake(w http.ResponseWriter, r *http.Request, info *requestInfo, resp signature.HandshakeResponse) {
	if resp.IssuedSecret != "" {
		if rc.IssuedSecretFile == "" {
			rc.answer(w, r, info, outcomeBadSignature)
			return
		}
		if err := writeIssuedSecret(rc.IssuedSecretFile, resp.IssuedSecret); err != nil {
			// The error names the file, never the secret.
			rc.logger.Warn("handshake secret not kept", zap.String("source", rc.Source), zap.Error(err))
			rc.answer(w, r, info, outcomeBadSignature)
			return
		}
		rc.logger.Info("handshake secret written; reload to verify with it",
			zap.String("source", rc.Source), zap.String("file", rc.IssuedSecretFile))
	}
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	if resp.ContentType != "" {
		h.Set("Content-Type", resp.ContentType)
	}
	rc.record(r, info, outcomeHandshake)
	w.WriteHeader(resp.Status)
	w.Write(resp.Body)
}

// readIssuedSecret returns the secret in path, "" when the file does not
// exist. A file that exists without a secret (a crash between its
// creation and its write, a touch) is an error: the endpoint would be
// neither armed, since writeIssuedSecret refuses an existing file, nor
// able to verify an event.
func readIssuedSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read secret: %w", err)
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" {
		return "", fmt.Errorf("%s exists but is empty; remove it to accept the secret of the next handshake", path)
	}
	return secret, nil
}

// writeIssuedSecret creates path, mode 0600, with secret; it fails when
// the file exists.
func writeIssuedSecret(path, secret string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create secret file: %w", err)
	}
	if _, err := f.WriteString(secret + "\n"); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("write secret file: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("sync secret file: %w", err)
	}
	return f.Close()
}

func putBuffer(bp *[]byte) {
	if cap(*bp) <= maxPooledBuffer {
		bodyBuffers.Put(bp)
	}
}

// maxEventText bounds a delivery id and an event type, in bytes: far above
// any provider's (UUIDs, "customer.subscription.updated"), and small enough
// for PostgreSQL's unique index on (source, delivery_id), whose entries
// must stay under 2704 bytes.
const maxEventText = 1024

// validEventText reports whether s may be stored as a delivery id or an
// event type by every backend: valid UTF-8 (PostgreSQL's text refuses
// anything else), no control character (NUL is refused by PostgreSQL too;
// the others have no business in an identifier and would reach terminals
// and headers), at most maxEventText bytes. Empty is valid: no event type,
// and a delivery id is never empty.
func validEventText(s string) bool {
	if len(s) > maxEventText {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c == 0x7f || c >= utf8.RuneSelf {
			return utf8.ValidString(s[i:]) && !strings.ContainsFunc(s[i:], unicode.IsControl)
		}
	}
	return true
}

// orderingKey returns the key an event is ordered by: k itself, or, when
// k is longer than queue.MaxOrderingKeyLen or not text that every backend
// stores (see validEventText), "sha256:" and its hex SHA-256, which keeps
// equal keys equal.
func orderingKey(k string) string {
	if len(k) <= queue.MaxOrderingKeyLen && validEventText(k) {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// bodyBudget bounds the bytes held by the bodies a receiver is reading or
// verifying, beyond their pooled buffers.
type bodyBudget struct {
	limit int64
	used  atomic.Int64
}

// reserve charges n bytes, or charges nothing and reports false when that
// would pass the limit.
func (b *bodyBudget) reserve(n int64) bool {
	if b.used.Add(n) > b.limit {
		b.used.Add(-n)
		return false
	}
	return true
}

// release gives back n bytes charged by reserve.
func (b *bodyBudget) release(n int64) {
	if n != 0 {
		b.used.Add(-n)
	}
}

// readBody reads body into buf (reusing its capacity) and fails with
// errTooLarge as soon as it holds more than limit bytes. hint is the
// request's Content-Length, -1 if unknown; it is at most limit, and it is
// only a promise: the buffer grows as bytes arrive (doubling, so a body
// costs at most about twice its size) and never past hint+1 while the
// promise holds. Each buffer it allocates is charged to budget; held is
// what the caller must release, also on error, once it is done with the
// bytes. errBusy reports a growth the budget refused.
func readBody(body io.Reader, buf []byte, limit, hint int64, budget *bodyBudget) (_ []byte, held int64, _ error) {
	buf = buf[:0]
	if body == nil {
		return buf, 0, nil
	}
	for {
		if len(buf) == cap(buf) {
			next := min(max(2*int64(cap(buf)), minBodyBuffer), limit+1)
			if hint >= int64(len(buf)) {
				// One byte past the hint lets the read end on EOF
				// without growing again.
				next = min(next, hint+1)
			}
			if !budget.reserve(next - held) {
				return buf, held, errBusy
			}
			held = next
			grown := make([]byte, len(buf), next)
			copy(grown, buf)
			buf = grown
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return buf, held, errTooLarge
		}
		if err == io.EOF {
			return buf, held, nil
		}
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				// request_body's own cap, ahead of ours.
				return buf, held, errTooLarge
			}
			return buf, held, err
		}
	}
}

// headers appends to out the forwarded headers present in h; nil if none.
func (rc *Receiver) headers(out []queue.Header, h http.Header) []queue.Header {
	for _, f := range rc.forward {
		if v := h[f.canon]; len(v) > 0 && v[0] != "" {
			out = append(out, queue.Header{Name: f.name, Value: v[0]})
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// targetsFor returns the names of the targets that want eventType. The
// unfiltered list is shared between requests; the store only reads it.
func (rc *Receiver) targetsFor(eventType string) []string {
	if rc.filters == nil {
		return rc.allTargets
	}
	var out []string
	for _, f := range rc.filters {
		if f.wants(eventType) {
			out = append(out, f.name)
		}
	}
	return out
}

// wants reports whether the filter accepts eventType.
func (f targetFilter) wants(eventType string) bool {
	if f.events == nil {
		return true
	}
	for _, e := range f.events {
		if p, ok := strings.CutSuffix(e, "*"); ok {
			if strings.HasPrefix(eventType, p) {
				return true
			}
		} else if e == eventType {
			return true
		}
	}
	return false
}

// answer records the outcome and writes its status with an empty body.
func (rc *Receiver) answer(w http.ResponseWriter, r *http.Request, info *requestInfo, o outcome) {
	rc.record(r, info, o)
	status := outcomeStatus[o]
	switch o {
	case outcomeAccepted, outcomeDuplicate, outcomeNoTarget:
		if rc.acceptStatus != 0 {
			status = rc.acceptStatus
		}
	}
	w.WriteHeader(status)
}

// record records the outcome in the access log, the placeholders and the
// metrics.
func (rc *Receiver) record(r *http.Request, info *requestInfo, o outcome) {
	info.outcome = o
	ctx := r.Context()
	if extra, ok := ctx.Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields); ok {
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
	_ caddy.Provisioner           = (*Receiver)(nil)
	_ caddy.Validator             = (*Receiver)(nil)
	_ caddyhttp.MiddlewareHandler = (*Receiver)(nil)
	_ zapcore.ObjectMarshaler     = (*requestInfo)(nil)
)

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
