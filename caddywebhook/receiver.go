package caddywebhook

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/textproto"
	"strings"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/notify"
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
//     While the SQLite file's filesystem has less than min_free_space free,
//     it answers 503 disk_low with Retry-After and stores nothing, keeping
//     the rest of the disk for the deliveries that drain the queue.
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
// store_failed, disk_low, bad_request, bad_delivery_id, bad_event_type, busy, too_slow — in Caddy's access log (the "webhook" object
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

	// MaxBodyInflightPerClient bounds the part of MaxBodyInflight that the
	// requests of one client address hold together, so that a sender
	// opening many slow requests cannot take the whole budget from the
	// others: past it, that client's request gets 503 with Retry-After
	// (outcome busy) while other clients still get in. The client address
	// is Caddy's client IP: the connection's remote address, or the one a
	// proxy listed in the server's trusted_proxies reported (behind a proxy
	// that is not listed, every sender shares the proxy's share). An IPv6
	// address counts as its /64. Between max_body and max_body_inflight.
	// Default: a quarter of max_body_inflight, at least max_body.
	MaxBodyInflightPerClient int64 `json:"max_body_inflight_per_client,omitempty"`

	// MinBodyRate is the least average rate, in bytes per second, at which
	// a body must keep arriving once the receiver holds more than 256 KiB
	// of it, counted from that point with 2 s of slack (as Caddy's
	// read_body_idle min_rate and Apache's mod_reqtimeout MinRate count).
	// A slower body is cut: 408 (outcome too_slow) and the connection
	// closed, so that a sender cannot hold the in-flight budget by sending
	// a byte now and then. Smaller bodies are bounded by the server's
	// timeouts alone. Default: 64 KiB/s.
	MinBodyRate int64 `json:"min_body_rate,omitempty"`

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
	secrets      []string // resolved; the verifier is built from them
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
	minBodyRate  int64
	orderingHold bool            // OrderingKey.OnDead is hold
	forward      []forwardHeader // headers stored with the event
	allTargets   []string        // every target name, when no target filters events
	filters      []targetFilter  // per target, when some filter
	filterLog    onceAMinute     // filter errors already logged this minute
	keptSecret   receiverSecrets // what stays out of the store and the access log
	logger       *zap.Logger
	received     [numOutcomes]prometheus.Counter
	// diskLow is set from the first disk_low refusal to the next event
	// stored that was sent to the store after it was set, so each episode
	// is logged once, not per request (serve.go, store).
	diskLow atomic.Bool
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

// forwardHeader is a header stored with each event for the targets.
type forwardHeader struct {
	name  string // as stored and forwarded
	canon string // key in http.Header
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

// Provision sets the defaults, resolves the secrets, builds the verifier,
// loads the targets and registers them with the webhook app; Validate
// checks the result. The store is not opened here (`caddy validate`
// provisions too): the receiver reaches it through the app, which opens
// it when it starts.
func (rc *Receiver) Provision(ctx caddy.Context) error {
	rc.logger = ctx.Logger()
	rc.provisionLimits()
	appVal, err := ctx.App("webhook")
	if err != nil {
		return rc.errf("load webhook app: %w", err)
	}
	rc.app = appVal.(*App)
	// The secrets and the targets' secret-bearing fields resolve into the
	// app's record of this config load's secrets.
	ctx = withSecrets(ctx, rc.app.secrets)
	if err := rc.resolveSecrets(ctx); err != nil {
		return err
	}
	if err := rc.provisionVerifier(); err != nil {
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

// provisionLimits sets the body limits' defaults.
func (rc *Receiver) provisionLimits() {
	rc.maxBody = cmp.Or(rc.MaxBody, defaultMaxBody)
	rc.inflight.limit = cmp.Or(rc.MaxBodyInflight, max(defaultMaxBodyInflight, 4*rc.maxBody))
	rc.inflight.perClient = cmp.Or(rc.MaxBodyInflightPerClient, max(rc.inflight.limit/4, rc.maxBody))
	rc.minBodyRate = cmp.Or(rc.MinBodyRate, defaultMinBodyRate)
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

// Validate checks what Provision set. Each message names the option.
func (rc *Receiver) Validate() error {
	if rc.Source == "" {
		return errors.New("webhook_receiver: source is required")
	}
	if !adminapi.ValidName(rc.Source) {
		return fmt.Errorf("webhook_receiver: source %q: use letters, digits, '.', '_' and '-' (at most 64)", rc.Source)
	}
	if reservedSource(rc.Source) {
		return fmt.Errorf("webhook_receiver: source %q: names beginning with '_' are reserved for the app's own events, such as %s", rc.Source, notify.Source)
	}
	if rc.Scheme == "" {
		return rc.errf("scheme is required (one of %s)", strings.Join(signature.Schemes(), ", "))
	}
	if len(rc.secrets) == 0 && len(rc.publicKeys) == 0 {
		return rc.errf("at least one secret is required (or public_key, for the schemes that sign with a private key)")
	}
	if rc.verifier == nil {
		return rc.errf("no verifier: the receiver was not provisioned")
	}
	if rc.maxBody < 0 || rc.maxBody > maxMaxBody {
		return rc.errf("max_body %d bytes is not between 1B and 64MiB", rc.MaxBody)
	}
	if rc.inflight.limit < rc.maxBody || rc.inflight.limit > maxMaxBodyInflight {
		return rc.errf("max_body_inflight %d bytes is not between max_body (%d) and 1GiB", rc.inflight.limit, rc.maxBody)
	}
	if rc.inflight.perClient < rc.maxBody || rc.inflight.perClient > rc.inflight.limit {
		return rc.errf("max_body_inflight_per_client %d bytes is not between max_body (%d) and max_body_inflight (%d)", rc.inflight.perClient, rc.maxBody, rc.inflight.limit)
	}
	if rc.minBodyRate <= 0 {
		return rc.errf("min_body_rate %d bytes/s is not positive", rc.MinBodyRate)
	}
	return nil
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

// Interface guards
var (
	_ caddy.Provisioner           = (*Receiver)(nil)
	_ caddy.Validator             = (*Receiver)(nil)
	_ caddyhttp.MiddlewareHandler = (*Receiver)(nil)
)
