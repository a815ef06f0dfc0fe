package caddywebhook

import (
	"math"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"
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
//		shutdown_grace <duration>      # default 10s
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
	for d.NextBlock(0) {
		opt := d.Val()
		switch opt {
		case "storage":
			if err := a.unmarshalStorage(d); err != nil {
				return err
			}
		case "synchronous":
			var mode string
			if !d.AllArgs(&mode) {
				return d.Errf("webhook: synchronous needs one argument: full or normal")
			}
			if a.Storage == nil {
				a.Storage = new(StorageConfig)
			}
			a.Storage.Synchronous = mode
		case "max_batch":
			n, err := intArg(d, opt)
			if err != nil {
				return err
			}
			if n < 1 {
				return d.Errf("webhook: max_batch must be at least 1")
			}
			if a.Storage == nil {
				a.Storage = new(StorageConfig)
			}
			a.Storage.MaxBatch = n
		case "workers":
			n, err := intArg(d, opt)
			if err != nil {
				return err
			}
			a.Workers = &n
		case "max_attempts":
			n, err := intArg(d, opt)
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
		case "retention":
			if err := durationArg(d, opt, &a.Retention); err != nil {
				return err
			}
		case "shutdown_grace":
			if err := durationArg(d, opt, &a.ShutdownGrace); err != nil {
				return err
			}
		case "backoff":
			var base, maxWait string
			if !d.AllArgs(&base, &maxWait) {
				return d.Errf("webhook: backoff needs two durations: backoff <base> <max>")
			}
			b := new(BackoffConfig)
			var err error
			if b.Base, err = parseDuration(d, opt, base); err != nil {
				return err
			}
			if b.Max, err = parseDuration(d, opt, maxWait); err != nil {
				return err
			}
			a.Backoff = b
		default:
			return d.Errf("webhook: unknown option %q", opt)
		}
	}
	return nil
}

// unmarshalStorage parses one storage line (the dispenser is on its
// option name) and, for postgres, its block. It never quotes the DSN.
func (a *App) unmarshalStorage(d *caddyfile.Dispenser) error {
	if a.Storage != nil && a.Storage.Backend != "" {
		return d.Errf("webhook: storage is given twice")
	}
	var backend, location string
	if !d.AllArgs(&backend, &location) {
		return d.Errf("webhook: storage needs a backend and its location: storage sqlite <path> or storage postgres <dsn>")
	}
	if a.Storage == nil {
		a.Storage = new(StorageConfig)
	}
	st := a.Storage
	switch backend {
	case backendSQLite:
		st.Backend, st.Path = backendSQLite, location
		if d.NextBlock(d.Nesting()) {
			return d.Errf("webhook: storage sqlite takes no block")
		}
	case backendPostgres:
		st.Backend, st.DSN = backendPostgres, location
		for nesting := d.Nesting(); d.NextBlock(nesting); {
			switch opt := d.Val(); opt {
			case "schema":
				if !d.AllArgs(&st.Schema) {
					return d.Errf("webhook: storage postgres: schema needs one name")
				}
			case "max_conns":
				n, err := intArg(d, "storage postgres: max_conns")
				if err != nil {
					return err
				}
				if n < 1 {
					return d.Errf("webhook: storage postgres: max_conns must be at least 1")
				}
				st.MaxConns = n
			default:
				return d.Errf("webhook: storage postgres: unknown option %q", opt)
			}
		}
	default:
		return d.Errf("webhook: storage: unknown backend %q (want sqlite or postgres)", backend)
	}
	return nil
}

// intArg reads the one non-negative integer argument of option opt.
func intArg(d *caddyfile.Dispenser, opt string) (int, error) {
	var s string
	if !d.AllArgs(&s) {
		return 0, d.Errf("webhook: %s needs one number", opt)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, d.Errf("webhook: %s: %q is not a non-negative number", opt, s)
	}
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
//		scheme github|stripe|standard|slack|shopify|gitlab|hmac
//		secret <secret>                      # repeatable (rotation); {env.X}, {file.X}
//		secret_mode <mode>                   # scheme-specific, e.g. raw for Polar
//		tolerance <duration>|off             # timestamped schemes; default 5m
//		max_body <size>                      # e.g. 1MB, 64KiB; default 1MB
//		max_body_inflight <size>             # bodies being read, together; default max(64MiB, 4×max_body)
//		delivery_id header <name> | json <field>
//		event_type  header <name> | json <field>
//		hmac {                               # the generic hmac scheme
//			header    <name>               # e.g. X-Signature
//			algorithm sha256|sha1|sha512   # default sha256
//			encoding  hex|base64           # default hex
//			prefix    <text>               # e.g. sha256=
//		}
//		to <kind> <args…> {                  # repeatable: one job per target
//			name <name>                    # default: the kind, then <kind>-2, <kind>-3…
//			events <type…>                 # only these event types; default all
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
		case "max_body", "max_body_inflight":
			var s string
			if !d.AllArgs(&s) {
				return d.Errf("webhook_receiver: %s needs one size, e.g. 1MB", opt)
			}
			n, err := humanize.ParseBytes(s)
			if err != nil || n == 0 || n > math.MaxInt64 {
				// 0 would read as the default in JSON; the upper
				// bound is checked by Validate.
				return d.Errf("webhook_receiver: %s: %q is not a size such as 1MB", opt, s)
			}
			if opt == "max_body" {
				rc.MaxBody = int64(n)
			} else {
				rc.MaxBodyInflight = int64(n)
			}
		case "delivery_id", "event_type":
			var from, name string
			if !d.AllArgs(&from, &name) {
				return d.Errf("webhook_receiver: %s needs a source and a name: %s header <name> | %s json <field>", opt, opt, opt)
			}
			f := new(FieldSource)
			switch from {
			case "header":
				f.Header = name
			case "json":
				f.JSON = name
			default:
				return d.Errf("webhook_receiver: %s: %q is not header or json", opt, from)
			}
			if opt == "delivery_id" {
				rc.DeliveryID = f
			} else {
				rc.EventType = f
			}
		case "hmac":
			if err := rc.unmarshalHMAC(d); err != nil {
				return err
			}
		case "to":
			t, err := unmarshalTarget(d)
			if err != nil {
				return err
			}
			rc.Targets = append(rc.Targets, t)
		default:
			return d.Errf("webhook_receiver: unknown option %q", opt)
		}
	}
	return nil
}

func (rc *Receiver) unmarshalHMAC(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.Errf("webhook_receiver: hmac takes a block, not %q", d.Val())
	}
	if rc.HMAC == nil {
		rc.HMAC = new(HMACOptions)
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		var v string
		if !d.AllArgs(&v) {
			return d.Errf("webhook_receiver: hmac: %s needs one value", opt)
		}
		switch opt {
		case "header":
			rc.HMAC.Header = v
		case "algorithm":
			rc.HMAC.Algorithm = v
		case "encoding":
			rc.HMAC.Encoding = v
		case "prefix":
			rc.HMAC.Prefix = v
		default:
			return d.Errf("webhook_receiver: hmac: unknown option %q", opt)
		}
	}
	return nil
}

// unmarshalTarget parses one `to <kind> <args…> { … }` line. It keeps `name`
// and `events` and hands every other token — the kind, its arguments and the
// rest of the block — to the Caddyfile unmarshaler of module
// webhook.targets.<kind>.
func unmarshalTarget(d *caddyfile.Dispenser) (*TargetConfig, error) {
	if !d.NextArg() {
		return nil, d.Errf("webhook_receiver: to needs a target kind, e.g. to http <url>")
	}
	kind := d.Val()
	tokens := []caddyfile.Token{d.Token()}
	for d.NextArg() {
		tokens = append(tokens, d.Token())
	}
	t := new(TargetConfig)
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
		switch d.Val() {
		case "name":
			if !d.AllArgs(&t.Name) {
				return nil, d.Errf("webhook_receiver: to %s: name needs one value", kind)
			}
		case "events":
			ev := d.RemainingArgs()
			if len(ev) == 0 {
				return nil, d.Errf("webhook_receiver: to %s: events needs at least one event type", kind)
			}
			t.Events = append(t.Events, ev...)
		default:
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
			return nil, d.Errf("webhook_receiver: to: unknown target kind %q (known: %s)", kind, knownTargetKinds())
		}
		return nil, err
	}
	t.DeliverRaw = caddyconfig.JSONModuleObject(unm, "kind", kind, nil)
	return t, nil
}

// knownTargetKinds lists the registered webhook.targets modules, for errors.
func knownTargetKinds() string {
	var kinds []string
	for _, m := range caddy.GetModules("webhook.targets") {
		kinds = append(kinds, m.ID.Name())
	}
	if len(kinds) == 0 {
		return "none"
	}
	return strings.Join(kinds, ", ")
}

// Interface guards
var (
	_ caddyfile.Unmarshaler = (*App)(nil)
	_ caddyfile.Unmarshaler = (*Receiver)(nil)
)
