package caddywebhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/caddyfileopt"
	"github.com/caddywebhook/caddywebhook/caddywebhook/rules"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("webhook", parseGlobalOption)
	httpcaddyfile.RegisterHandlerDirective("webhook_receiver", parseReceiverDirective)
	// Right after request_body, so that a site block needs no `route` and a
	// catch-all respond, reverse_proxy or file_server in the same site does
	// not shadow the receiver; request_body (a size limit) and header still
	// run before it.
	httpcaddyfile.RegisterDirectiveOrder("webhook_receiver", httpcaddyfile.After, "request_body")
}

// parseGlobalOption turns the global option `webhook { … }` into the webhook
// app's JSON. See App.UnmarshalCaddyfile for the syntax.
func parseGlobalOption(d *caddyfile.Dispenser, existing any) (any, error) {
	if existing != nil {
		return nil, d.Err("webhook: global option given twice")
	}
	app := new(App)
	if err := app.UnmarshalCaddyfile(d); err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: "webhook", Value: caddyconfig.JSON(app, nil)}, nil
}

// UnmarshalCaddyfile sets up the webhook app from the global option:
//
//	webhook {
//		storage sqlite <path>          # default: <caddy data dir>/webhook/queue.db
//		synchronous full|normal        # SQLite durability; default full
//		max_batch <n>                  # writes per commit: SQLite 256, Postgres enqueues 128 (1: benchmarks only)
//		min_free_space <size>          # SQLite: 503 disk_low below this much free; default 64MiB, at least 16MiB
//		store_timeout <duration>       # each call on the queue; past it a request gets 503; default 5s
//		storage postgres <dsn> {       # instead of sqlite: instances share the queue
//			schema <name>              # default caddywebhook
//			max_conns <n>              # per instance, plus one for LISTEN; default 10
//		}
//		workers <n>                    # default 4; 0 = receive and store only, deliver nothing
//		lease <duration>               # default 1m
//		poll_interval <duration>       # default 1s
//		max_attempts <n>               # default 12
//		backoff <base> <max>           # default 2s 15m
//		max_retry_after <duration>     # default 1h
//		retention <duration>           # default 7d (Stripe retries for 3 days)
//		tracing                        # a span per delivery attempt, exporter from OTEL_*; default off
//		shutdown_grace <duration>      # default 10s
//		max_tails <n>                  # live tails open at once; default 16
//		tail_max_lag <duration>        # a tail's reader may lag this long; default 10s
//		encryption {                   # encrypt stored payloads, headers and error texts; default off
//			key <id> <placeholder>     # the first seals, every one opens: key 2026-12 {file./etc/caddy/webhook-key}
//			decrypt_only               # keys open, nothing new is sealed: the way out
//		}
//		notify <kind> <args…> {        # failure notices to a target: http <url> or exec <program> …
//			window <duration>          # aggregation per type and route; default 1m
//			pending_age <duration>     # backlog.stale from this age; default off
//			max_attempts <n>           # default: the global max_attempts
//			backoff <base> <max>       # default: the global backoff
//			transform { … }            # reshape the notice, e.g. for Slack (docs/RULES.md)
//			<target options…>          # e.g. sign <secret> for http
//		}
//	}
//
// The DSN holds a password: write a placeholder, such as
// {env.WEBHOOK_PG_DSN}, resolved when the config loads. Messages never
// quote it. storage is given at most once. The unmarshaler only parses:
// values are checked when the config loads (Provision), where JSON configs
// are checked too. A count of 0 is refused here, since in JSON it would
// read as the default.
func (a *App) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the option name
	if d.NextArg() {
		return d.Errf("webhook: unexpected argument %q; options go in a block", d.Val())
	}
	var storage storageTokens
	for d.NextBlock(0) {
		opt := d.Val()
		switch opt {
		case "storage":
			if err := storage.storageLine(d); err != nil {
				return err
			}
		case "synchronous", "max_batch", "min_free_space", "store_timeout":
			storage.option(d)
		case "workers":
			n, err := caddyfileopt.Int(d, opt)
			if err != nil {
				return err
			}
			a.Workers = &n
		case "max_attempts":
			n, err := caddyfileopt.Int(d, opt)
			if err != nil {
				return err
			}
			if n < 1 {
				return d.Errf("webhook: max_attempts must be at least 1")
			}
			a.MaxAttempts = n
		case "lease":
			if err := durationArg(d, opt, &a.Lease); err != nil {
				return err
			}
		case "poll_interval":
			if err := durationArg(d, opt, &a.PollInterval); err != nil {
				return err
			}
		case "max_retry_after":
			if err := durationArg(d, opt, &a.MaxRetryAfter); err != nil {
				return err
			}
		case "max_tails":
			n, err := caddyfileopt.Int(d, opt)
			if err != nil {
				return err
			}
			if n < 1 {
				return d.Errf("webhook: max_tails must be at least 1")
			}
			a.MaxTails = n
		case "tail_max_lag":
			if err := durationArg(d, opt, &a.TailMaxLag); err != nil {
				return err
			}
		case "retention":
			if err := durationArg(d, opt, &a.Retention); err != nil {
				return err
			}
		case "shutdown_grace":
			if err := durationArg(d, opt, &a.ShutdownGrace); err != nil {
				return err
			}
		case "backoff":
			b, err := backoffArgs(d, "webhook")
			if err != nil {
				return err
			}
			a.Backoff = b
		case "tracing":
			if d.NextArg() {
				return d.ArgErr()
			}
			a.Tracing = true
		case "encryption":
			if a.Encryption != nil {
				return d.Errf("webhook: encryption is given twice; list every key in one block")
			}
			e, err := unmarshalEncryption(d)
			if err != nil {
				return err
			}
			a.Encryption = e
		case "notify":
			if a.Notify != nil {
				return d.Errf("webhook: notify is given twice")
			}
			n, err := unmarshalNotify(d)
			if err != nil {
				return err
			}
			a.Notify = n
		default:
			return d.Errf("webhook: unknown option %q", opt)
		}
	}
	raw, err := storage.json()
	if err != nil {
		return err
	}
	a.StorageRaw = raw
	return nil
}

// unmarshalNotify parses `notify <kind> <args…> { … }`. It keeps window,
// pending_age, max_attempts and backoff, and hands the rest to the target
// module, as a receiver's `to` does.
func unmarshalNotify(d *caddyfile.Dispenser) (*NotifyConfig, error) {
	n := new(NotifyConfig)
	const where = "webhook: notify"
	raw, err := unmarshalTargetModule(d, where, func(_, opt string) (bool, error) {
		switch opt {
		case "window":
			return true, durationArg(d, "notify: window", &n.Window)
		case "pending_age":
			return true, durationArg(d, "notify: pending_age", &n.PendingAge)
		case "max_attempts":
			v, err := maxAttemptsArg(d, where)
			n.MaxAttempts = v
			return true, err
		case "backoff":
			b, err := backoffArgs(d, where)
			n.Backoff = b
			return true, err
		case "transform":
			if n.Transform != nil {
				return true, d.Errf("%s: transform is given twice; put its rules in one block", where)
			}
			c, crs, err := unmarshalTransform(d, where)
			if err == nil {
				err = checkCaddyfileRules(crs, where)
			}
			n.Transform = c
			return true, err
		}
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	n.DeliverRaw = raw
	return n, nil
}

// durationArg reads the one positive duration argument of option opt.
func durationArg(d *caddyfile.Dispenser, opt string, dst *caddy.Duration) error {
	var s string
	if !d.AllArgs(&s) {
		return d.Errf("webhook: %s needs one duration", opt)
	}
	v, err := parseDuration(d, opt, s)
	if err != nil {
		return err
	}
	*dst = v
	return nil
}

func parseDuration(d *caddyfile.Dispenser, opt, s string) (caddy.Duration, error) {
	v, err := caddy.ParseDuration(s)
	if err != nil || v <= 0 {
		return 0, d.Errf("webhook: %s: %q is not a positive duration", opt, s)
	}
	return caddy.Duration(v), nil
}

// fieldSourceArgs reads `header <name> | json <field>`, where a delivery
// id, an event type or an ordering key comes from; opt names the option
// in the messages.
func fieldSourceArgs(d *caddyfile.Dispenser, opt string) (FieldSource, error) {
	var from, name string
	if !d.AllArgs(&from, &name) {
		return FieldSource{}, d.Errf("webhook_receiver: %s needs a source and a name: %s header <name> | %s json <field>", opt, opt, opt)
	}
	switch from {
	case "header":
		return FieldSource{Header: name}, nil
	case "json":
		return FieldSource{JSON: name}, nil
	}
	return FieldSource{}, d.Errf("webhook_receiver: %s: %q is not header or json", opt, from)
}

// parseReceiverDirective parses the webhook_receiver directive; the matcher
// has already been taken off by httpcaddyfile.
func parseReceiverDirective(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	rc := new(Receiver)
	if err := rc.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	return rc, nil
}

// UnmarshalCaddyfile sets up the receiver from the directive:
//
//	webhook_receiver [<matcher>] {
//		source <name>                        # required; scopes dedupe, names metrics
//		scheme <name>                        # github, stripe, standard, slack, paddle, hmac…
//		secret <secret>                      # repeatable (rotation); {env.X}, {file.X}
//		public_key <key>                     # repeatable; discord, sendgrid, telnyx, standard v1a
//		public_url <url>                     # the URL the sender signs, behind a proxy
//		verify_token <token>                 # meta's GET handshake; {env.X}, {file.X}
//		issued_secret_file <path>            # asana: where its handshake secret is kept
//		secret_mode <mode>                   # scheme-specific, e.g. raw for Polar
//		tolerance <duration>|off             # timestamped schemes; default 5m
//		max_body <size>                      # e.g. 1MB, 64KiB; default 1MB
//		max_body_inflight <size>             # bodies being read, together; default max(64MiB, 4×max_body)
//		max_body_inflight_per_client <size>  # of that, one client address; default a quarter, at least max_body
//		min_body_rate <size>                 # per second, past 256KiB of a body; default 64KiB
//		delivery_id header <name> | json <field>
//		event_type  header <name> | json <field>
//		ordering_key header <name> | json <field> {   # FIFO per key and target
//			on_dead hold|release           # default hold
//		}
//		signature_header <name>              # the signed-content engine (hmac, presets):
//		signature_syntax plain|list|pairs    #   see engineOptions
//		signature_key    <key>               #   pairs: e.g. v1
//		signature_prefix <text>              #   e.g. sha256=
//		algorithm        sha256|sha1|sha512
//		encoding         hex|base64|base64url
//		signed_content   <template>          #   e.g. "{timestamp}.{body}"
//		timestamp_header <name>
//		timestamp_key    <key>               #   pairs: e.g. t
//		timestamp_field  <field>             #   in the JSON body, e.g. webhookTimestamp
//		timestamp_format unix|unix_ms|rfc3339
//		to <kind> <args…> {                  # repeatable: one job per target
//			name <name>                    # default: the kind, then <kind>-2, <kind>-3…
//			events <type…>                 # only these event types; default all
//			filter <CEL…>                  # repeatable, ANDed: the target takes the event only when true
//			transform {                    # reshape what the target receives (docs/RULES.md)
//				body <CEL…>              # map/list → JSON, string → text, bytes as they are
//				header <name> <CEL…>     # repeatable
//				remove_header <name…>
//			}
//			max_attempts <n>               # default: the global max_attempts
//			backoff <base> <max>           # default: the global backoff
//			rate <n>/s|m|h                 # per instance; default none
//			concurrency <n>                # per instance; default none
//			circuit_breaker {              # default: no breaker
//				failures <n>             # default 5
//				cooldown <duration>      # default 30s
//				max_cooldown <duration>  # default 10m
//			}
//			<target options…>              # see webhook.targets.<kind>
//		}
//	}
func (rc *Receiver) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.Errf("webhook_receiver: unexpected argument %q; options go in a block", d.Val())
	}
	for d.NextBlock(0) {
		opt := d.Val()
		switch opt {
		case "source":
			if !d.AllArgs(&rc.Source) {
				return d.Errf("webhook_receiver: source needs one name")
			}
		case "scheme":
			if !d.AllArgs(&rc.Scheme) {
				return d.Errf("webhook_receiver: scheme needs one name")
			}
		case "secret":
			var s string
			if !d.AllArgs(&s) {
				// Never echo what was given: it may be a secret.
				return d.Errf("webhook_receiver: secret needs exactly one value (quote it if it has spaces)")
			}
			rc.Secrets = append(rc.Secrets, s)
		case "public_key":
			var s string
			if !d.AllArgs(&s) {
				// Never echo what was given, like a secret.
				return d.Errf("webhook_receiver: public_key needs exactly one value")
			}
			rc.PublicKeys = append(rc.PublicKeys, s)
		case "verify_token":
			if !d.AllArgs(&rc.VerifyToken) {
				// Never echo what was given: it is a secret.
				return d.Errf("webhook_receiver: verify_token needs exactly one value")
			}
		case "issued_secret_file":
			if !d.AllArgs(&rc.IssuedSecretFile) {
				return d.Errf("webhook_receiver: issued_secret_file needs one path")
			}
		case "public_url":
			if !d.AllArgs(&rc.PublicURL) {
				return d.Errf("webhook_receiver: public_url needs one URL")
			}
		case "secret_mode":
			if !d.AllArgs(&rc.SecretMode) {
				return d.Errf("webhook_receiver: secret_mode needs one value")
			}
		case "tolerance":
			var s string
			if !d.AllArgs(&s) {
				return d.Errf("webhook_receiver: tolerance needs a duration or off")
			}
			rc.Tolerance = s
		case "max_body", "max_body_inflight", "max_body_inflight_per_client", "min_body_rate":
			// The upper bound is checked by Validate.
			n, err := caddyfileopt.Size(d, "webhook_receiver", opt, "1MB", math.MaxInt64)
			if err != nil {
				return err
			}
			switch opt {
			case "max_body":
				rc.MaxBody = int64(n)
			case "max_body_inflight":
				rc.MaxBodyInflight = int64(n)
			case "max_body_inflight_per_client":
				rc.MaxBodyInflightPerClient = int64(n)
			default:
				rc.MinBodyRate = int64(n)
			}
		case "delivery_id", "event_type":
			f, err := fieldSourceArgs(d, opt)
			if err != nil {
				return err
			}
			if opt == "delivery_id" {
				rc.DeliveryID = &f
			} else {
				rc.EventType = &f
			}
		case "ordering_key":
			f, err := fieldSourceArgs(d, opt)
			if err != nil {
				return err
			}
			k := &OrderingKey{Header: f.Header, JSON: f.JSON}
			for nesting := d.Nesting(); d.NextBlock(nesting); {
				switch d.Val() {
				case "on_dead":
					if !d.AllArgs(&k.OnDead) {
						return d.Errf("webhook_receiver: ordering_key: on_dead needs hold or release")
					}
				default:
					return d.Errf("webhook_receiver: ordering_key: unknown option %q", d.Val())
				}
			}
			rc.OrderingKey = k
		case "hmac":
			return d.Errf("webhook_receiver: the hmac block is not supported; write its options as lines of webhook_receiver, " +
				"header, syntax, key and prefix as signature_header, signature_syntax, signature_key and signature_prefix")
		case "to":
			t, err := unmarshalTarget(d)
			if err != nil {
				return err
			}
			rc.Targets = append(rc.Targets, t)
		default:
			field, ok := engineOptions[opt]
			if !ok {
				return d.Errf("webhook_receiver: unknown option %q", opt)
			}
			var v string
			if !d.AllArgs(&v) {
				return d.Errf("webhook_receiver: %s needs one value (quote it if it has spaces)", opt)
			}
			if rc.HMAC == nil {
				rc.HMAC = new(HMACOptions)
			}
			*field(rc.HMAC) = v
		}
	}
	return rc.checkCaddyfileRules()
}

// checkCaddyfileRules compiles the targets' rules once the whole receiver
// is read, so that an error names the receiver and the target (by its
// name, or the default Provision will give it) besides the line.
func (rc *Receiver) checkCaddyfileRules() error {
	kindCount := make(map[string]int)
	for _, t := range rc.Targets {
		var probe struct {
			Kind string `json:"kind"`
		}
		_ = json.Unmarshal(t.DeliverRaw, &probe)
		kindCount[probe.Kind]++
		name := t.Name
		if name == "" {
			name = probe.Kind
			if n := kindCount[probe.Kind]; n > 1 {
				name = fmt.Sprintf("%s-%d", probe.Kind, n)
			}
		}
		where := fmt.Sprintf("webhook_receiver %q: target %q", rc.Source, name)
		if err := checkCaddyfileRules(t.caddyfileRules, where); err != nil {
			return err
		}
	}
	return nil
}

// engineOptions are the Caddyfile options of the signed-content engine
// (scheme hmac and the presets built on it), each a line of the
// webhook_receiver block, and the HMACOptions field each one sets.
var engineOptions = map[string]func(*HMACOptions) *string{
	"signature_header": func(h *HMACOptions) *string { return &h.Header },
	"signature_syntax": func(h *HMACOptions) *string { return &h.Syntax },
	"signature_key":    func(h *HMACOptions) *string { return &h.Key },
	"signature_prefix": func(h *HMACOptions) *string { return &h.Prefix },
	"algorithm":        func(h *HMACOptions) *string { return &h.Algorithm },
	"encoding":         func(h *HMACOptions) *string { return &h.Encoding },
	"signed_content":   func(h *HMACOptions) *string { return &h.SignedContent },
	"timestamp_header": func(h *HMACOptions) *string { return &h.TimestampHeader },
	"timestamp_key":    func(h *HMACOptions) *string { return &h.TimestampKey },
	"timestamp_field":  func(h *HMACOptions) *string { return &h.TimestampField },
	"timestamp_format": func(h *HMACOptions) *string { return &h.TimestampFormat },
}

// unmarshalTarget parses one `to <kind> <args…> { … }` line. It keeps
// `name`, `events`, `max_attempts` and `backoff` and hands every other token
// to the target module (see unmarshalTargetModule).
func unmarshalTarget(d *caddyfile.Dispenser) (*TargetConfig, error) {
	t := new(TargetConfig)
	var filters []string // ANDed
	where := "webhook_receiver: to"
	raw, err := unmarshalTargetModule(d, where, func(kind, opt string) (bool, error) {
		where := where + " " + kind
		switch opt {
		case "name":
			if !d.AllArgs(&t.Name) {
				return true, d.Errf("%s: name needs one value", where)
			}
		case "events":
			ev := d.RemainingArgs()
			if len(ev) == 0 {
				return true, d.Errf("%s: events needs at least one event type", where)
			}
			t.Events = append(t.Events, ev...)
		case "max_attempts":
			n, err := maxAttemptsArg(d, where)
			t.MaxAttempts = n
			return true, err
		case "backoff":
			b, err := backoffArgs(d, where)
			t.Backoff = b
			return true, err
		case "rate":
			if !d.AllArgs(&t.Rate) {
				return true, d.Errf("%s: rate needs one value, e.g. rate 50/s", where)
			}
			if _, err := parseRate(t.Rate); err != nil {
				return true, d.Errf("%s: %v", where, err)
			}
		case "concurrency":
			var s string
			if !d.AllArgs(&s) {
				return true, d.Errf("%s: concurrency needs one number", where)
			}
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				return true, d.Errf("%s: concurrency: %q is not a number of at least 1", where, s)
			}
			t.Concurrency = n
		case "circuit_breaker":
			b, err := circuitBreakerBlock(d, where)
			t.CircuitBreaker = b
			return true, err
		case "filter":
			cr := newCaddyfileRule(d, "filter")
			src, ok := ruleArgs(d)
			if !ok {
				return true, d.Errf("%s: filter needs a CEL expression, e.g. filter body.ref == \"refs/heads/main\"", where)
			}
			cr.filter = src
			filters = append(filters, src)
			t.caddyfileRules = append(t.caddyfileRules, cr)
		case "transform":
			if t.Transform != nil {
				return true, d.Errf("%s: transform is given twice; put its rules in one block", where)
			}
			c, crs, err := unmarshalTransform(d, where)
			t.Transform = c
			t.caddyfileRules = append(t.caddyfileRules, crs...)
			return true, err
		default:
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	if len(filters) > 0 {
		t.Filter = joinFilters(filters)
	}
	t.DeliverRaw = raw
	return t, nil
}

// unmarshalTargetModule parses `<kind> <args…> { … }`, the dispenser on the
// token before the kind. keep sees each block option first, with the
// cursor on it, and consumes those that belong to the caller (it returns
// true); every other token — the kind, its arguments and the rest of the
// block — goes to the Caddyfile unmarshaler of module
// webhook.targets.<kind>. where starts the error messages.
func unmarshalTargetModule(d *caddyfile.Dispenser, where string, keep func(kind, opt string) (bool, error)) (json.RawMessage, error) {
	if !d.NextArg() {
		return nil, d.Errf("%s needs a target kind, e.g. %s http <url>", where, where[strings.LastIndexByte(where, ' ')+1:])
	}
	kind := d.Val()
	tokens := []caddyfile.Token{d.Token()}
	for d.NextArg() {
		tokens = append(tokens, d.Token())
	}
	var block []caddyfile.Token
	opened := false
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if !opened {
			// NextBlock consumed the opening brace; keep it (with its
			// line number) for the target's own dispenser.
			d.Prev()
			block = append(block, d.Token())
			d.Next()
			opened = true
		}
		kept, err := keep(kind, d.Val())
		if err != nil {
			return nil, err
		}
		if !kept {
			block = append(block, d.NextSegment()...)
		}
	}
	if opened && len(block) > 1 {
		// The cursor sits on the closing brace.
		tokens = append(tokens, block...)
		tokens = append(tokens, d.Token())
	}
	td := caddyfile.NewDispenser(tokens)
	td.Next() // UnmarshalModule starts its segment at the current token
	unm, err := caddyfile.UnmarshalModule(td, "webhook.targets."+kind)
	if err != nil {
		if _, lookup := caddy.GetModule("webhook.targets." + kind); lookup != nil {
			return nil, d.Errf("%s: unknown target kind %q (known: %s)", where, kind, knownTargetKinds())
		}
		return nil, err
	}
	return caddyconfig.JSONModuleObject(unm, "kind", kind, nil), nil
}

// maxAttemptsArg reads the one argument of a target's max_attempts, at
// least 1; where names the target in the messages.
func maxAttemptsArg(d *caddyfile.Dispenser, where string) (int, error) {
	var s string
	if !d.AllArgs(&s) {
		return 0, d.Errf("%s: max_attempts needs one number", where)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, d.Errf("%s: max_attempts: %q is not a number of at least 1", where, s)
	}
	return n, nil
}

// circuitBreakerBlock reads `circuit_breaker { failures <n> cooldown <d>
// max_cooldown <d> }`, the block optional; where starts the messages.
func circuitBreakerBlock(d *caddyfile.Dispenser, where string) (*CircuitBreakerConfig, error) {
	where += ": circuit_breaker"
	if d.NextArg() {
		return nil, d.Errf("%s: unexpected argument %q; options go in a block", where, d.Val())
	}
	b := new(CircuitBreakerConfig)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		var v string
		if !d.AllArgs(&v) {
			return nil, d.Errf("%s: %s needs one value", where, opt)
		}
		switch opt {
		case "failures":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return nil, d.Errf("%s: failures: %q is not a number of at least 1", where, v)
			}
			b.Failures = n
		case "cooldown", "max_cooldown":
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur <= 0 {
				return nil, d.Errf("%s: %s: %q is not a positive duration", where, opt, v)
			}
			if opt == "cooldown" {
				b.Cooldown = caddy.Duration(dur)
			} else {
				b.MaxCooldown = caddy.Duration(dur)
			}
		default:
			return nil, d.Errf("%s: unknown option %q (failures, cooldown, max_cooldown)", where, opt)
		}
	}
	if err := b.validate(); err != nil {
		return nil, d.Errf("%s: %v", where, err)
	}
	return b, nil
}

// backoffArgs reads the two durations of a backoff option (the global one
// and a target's); where starts the messages.
func backoffArgs(d *caddyfile.Dispenser, where string) (*BackoffConfig, error) {
	var base, maxWait string
	if !d.AllArgs(&base, &maxWait) {
		return nil, d.Errf("%s: backoff needs two durations: backoff <base> <max>", where)
	}
	b := new(BackoffConfig)
	for _, v := range []struct {
		s   string
		dst *caddy.Duration
	}{{base, &b.Base}, {maxWait, &b.Max}} {
		dur, err := caddy.ParseDuration(v.s)
		if err != nil || dur <= 0 {
			return nil, d.Errf("%s: backoff: %q is not a positive duration", where, v.s)
		}
		*v.dst = caddy.Duration(dur)
	}
	return b, nil
}

// knownTargetKinds lists the registered webhook.targets modules, for errors.
func knownTargetKinds() string {
	var kinds []string
	for _, m := range caddy.GetModules("webhook.targets") {
		kinds = append(kinds, m.ID.Name())
	}
	if len(kinds) == 0 {
		return "none: " + buildHint
	}
	return strings.Join(kinds, ", ")
}

// Interface guards
var (
	_ caddyfile.Unmarshaler = (*App)(nil)
	_ caddyfile.Unmarshaler = (*Receiver)(nil)
)

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
