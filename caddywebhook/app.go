package caddywebhook

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/notify"
	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/pullside"
	"github.com/caddywebhook/caddywebhook/queue"
)

func init() {
	caddy.RegisterModule(new(App))
	pullside.Install(pullSideOf)
	// A config without the webhook app may be the one running when Caddy
	// exits: the pools still draining from earlier configs stop then too.
	caddy.OnExit(func(ctx context.Context) { stopDrains(ctx) })
}

// App is the webhook app: it owns the durable queue the receivers write to
// and the worker pool that delivers its jobs to their targets. It is
// configured by the global option `webhook { … }`; without one, the first
// webhook_receiver loads it with its defaults.
//
// The store is shared across config reloads (one per SQLite file, or per
// PostgreSQL DSN and schema), since Caddy starts the new config before it
// stops the old one. Each config load gets its own pool: for a moment two
// pools share the store, and the leases and fences of the queue, not luck,
// keep every job in one worker at a time. A reload does not wait for the
// old pool: as Caddy's servers drain old connections in the background,
// the old pool stops claiming at once and its running deliveries finish
// in the background, their leases kept, so the new pool never starts
// them again. Only when Caddy exits does a pool wait shutdown_grace and
// hand its unfinished jobs back. With PostgreSQL, pools in other Caddy
// instances share the store too, on the same terms.
type App struct {
	// Storage says where the queue lives: a module of the webhook.storage
	// namespace, chosen by its "backend" key, such as a SQLite file for one
	// Caddy (webhook.storage.sqlite) or a PostgreSQL database that several
	// Caddy instances share (webhook.storage.postgres). Default: sqlite,
	// <caddy data dir>/webhook/queue.db.
	StorageRaw json.RawMessage `json:"storage,omitempty" caddy:"namespace=webhook.storage inline_key=backend"`

	// Workers is the number of deliveries run at once. 0 means receive
	// only: requests are verified and stored, nothing is delivered until a
	// config with workers runs (useful to build a backlog on purpose, e.g.
	// in a load test, or to pause deliveries during an upstream's
	// maintenance). Default: 4.
	Workers *int `json:"workers,omitempty"`

	// Lease is how long a claimed job stays with its worker without news;
	// the pool extends it while the delivery runs, so a delivery may take
	// longer, and a Caddy that dies gives its jobs up after Lease.
	// Default: 1m.
	Lease caddy.Duration `json:"lease,omitempty"`

	// PollInterval bounds how long ready work waits when nothing in this
	// process announced it (a retry coming due, another process's enqueue).
	// Requests accepted by this Caddy wake the workers at once.
	// Default: 1s.
	PollInterval caddy.Duration `json:"poll_interval,omitempty"`

	// MaxAttempts is the number of attempts after which a failing job is
	// parked as dead, waiting for a replay. Default: 12.
	MaxAttempts int `json:"max_attempts,omitempty"`

	// Backoff spaces the attempts of a failing job: the wait after attempt
	// n is drawn between half and all of Base·2^(n-1), capped at Max.
	// Default: base 2s, max 15m.
	Backoff *BackoffConfig `json:"backoff,omitempty"`

	// MaxRetryAfter caps the wait an upstream may ask for with
	// Retry-After. Default: 1h.
	MaxRetryAfter caddy.Duration `json:"max_retry_after,omitempty"`

	// Retention is how long delivered jobs, and with them their events'
	// delivery ids, are kept. It is the dedupe memory: a redelivery that
	// arrives after its event was purged is accepted and delivered again.
	// Stripe retries for up to 3 days, so the default leaves a margin for
	// a sender's own outage. Dead jobs are never purged. Default: 7d.
	Retention caddy.Duration `json:"retention,omitempty"`

	// ShutdownGrace is how long running deliveries may finish when Caddy
	// stops (caddy stop, SIGTERM); after it they are cancelled and their
	// jobs handed back without being charged an attempt. A reload does not
	// wait: the old config's deliveries finish in the background, each
	// bounded by its target's timeout. Default: 10s.
	ShutdownGrace caddy.Duration `json:"shutdown_grace,omitempty"`

	// Notify sends a small JSON notice to a target of its own when a job
	// goes dead, when a circuit opens or closes, and when a route's backlog
	// is stale; see NotifyConfig. Default: none, no notices.
	Notify *NotifyConfig `json:"notify,omitempty"`

	// Tracing exports a span per delivery attempt of an event that arrived
	// in a trace, a child of the span it arrived in (Caddy's `tracing`
	// handler's, or the sender's traceparent). The standard OTEL_*
	// environment variables choose the exporter, as they do for Caddy's
	// `tracing` handler (OTLP by default). The traceparent header sent on
	// each attempt does not depend on it. Default: off.
	Tracing bool `json:"tracing,omitempty"`

	// MaxTails caps the live tails (GET /webhook/tail, the dashboard's
	// live view) open at once; one more is answered 503. Each costs a
	// goroutine and a buffer of lines, and a dashboard mounted without
	// authentication lets anyone open them. Default: 16.
	MaxTails int `json:"max_tails,omitempty"`

	// TailMaxLag is how long a tail's reader may fall behind, its lines
	// unread or its connection not taking what was written, before the
	// tail is closed. Default: 10s.
	TailMaxLag caddy.Duration `json:"tail_max_lag,omitempty"`

	// Encryption encrypts the stored payloads, headers and error texts
	// under keys of the operator's; see EncryptionConfig. Every instance
	// sharing a PostgreSQL queue needs the same keys. Default: none,
	// stored values are plain.
	Encryption *EncryptionConfig `json:"encryption,omitempty"`

	ctx    caddy.Context
	logger *zap.Logger
	// storage is the loaded Storage module, set by Provision; the store
	// opens in Start.
	storage Storage
	// secrets collects the values this config load resolved from
	// secret-bearing fields (see Secrets).
	secrets *Secrets

	// The store, once open: by Start, or by a receiver's first request
	// should Caddy's HTTP app start serving before this app started.
	storeMu  sync.Mutex
	storeKey string // key in stores, once this app holds a reference
	released bool   // Cleanup ran: open nothing more
	opened   atomic.Pointer[sharedStore]
	// setKeys is set once this app gave a store shared with an earlier
	// config its keys; published once Start published its config. An app
	// that set keys and never ran gives the running config's back.
	setKeys, published bool

	mu       sync.Mutex
	routes   map[queue.Route]Target      // registered by receivers during Provision
	rules    map[queue.Route]routeRules  // their compiled rules, for the admin API's test
	policies map[queue.Route]retryPolicy // their retry settings
	limits   map[queue.Route]queue.FlowLimits
	sources  map[string]sourceConfig // by source, registered by receivers
	started  bool
	pool     *queue.Pool
	keeper   *queue.Housekeeper
	notifier *notify.Notifier // nil without Notify
	live     *runningConfig   // what Start published; nil before and after
	traced   bool             // this app holds a spanExport reference (Tracing)
	events   *caddyEvents     // the config's `events` app; nil without one
}

// BackoffConfig is the retry backoff of failing jobs.
type BackoffConfig struct {
	// Base is the longest wait after the first failed attempt; it doubles
	// with each attempt. Default: 2s.
	Base caddy.Duration `json:"base,omitempty"`
	// Max caps the wait. Default: 15m.
	Max caddy.Duration `json:"max,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (*App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "webhook",
		New: func() caddy.Module { return new(App) },
	}
}

// Provision sets defaults and registers the metrics. It opens nothing:
// `caddy validate` provisions too and must change nothing on disk or in a
// database, so the store opens when the app starts.
func (a *App) Provision(ctx caddy.Context) error {
	a.ctx = ctx
	a.logger = ctx.Logger()
	a.routes = make(map[queue.Route]Target)
	a.rules = make(map[queue.Route]routeRules)
	a.policies = make(map[queue.Route]retryPolicy)
	a.limits = make(map[queue.Route]queue.FlowLimits)
	a.sources = make(map[string]sourceConfig)
	a.secrets = new(Secrets)
	if err := registerMetrics(ctx.GetMetricsRegistry(), a); err != nil {
		return fmt.Errorf("webhook: register metrics: %w", err)
	}
	events, err := loadCaddyEvents(ctx)
	if err != nil {
		return fmt.Errorf("webhook: load events app: %w", err)
	}
	a.events = events
	sctx := withSecrets(ctx, a.secrets)
	raw, err := withBackend(a.StorageRaw)
	if err != nil {
		return err
	}
	a.StorageRaw = raw
	mod, err := sctx.LoadModule(a, "StorageRaw")
	if err != nil {
		return fmt.Errorf("webhook: storage: %w", err)
	}
	st, ok := mod.(Storage)
	if !ok {
		return fmt.Errorf("webhook: storage: module %T is not a webhook storage", mod)
	}
	a.storage = st
	if err := a.Encryption.provision(sctx); err != nil {
		return err
	}
	return a.provisionNotify(sctx)
}

// Validate checks the options; the storage module checks its own. It
// connects to nothing.
func (a *App) Validate() error {
	return a.validate()
}

// Secrets returns the values this config load resolved from
// secret-bearing fields: the receivers', the targets' and the storage's.
// It is complete once every module of the config is provisioned, before
// the app starts.
func (a *App) Secrets() *Secrets { return a.secrets }

// validate checks the numbers; each message names the option.
func (a *App) validate() error {
	switch {
	case a.Workers != nil && *a.Workers < 0:
		return fmt.Errorf("webhook: workers is %d, must not be negative", *a.Workers)
	case a.Lease < 0:
		return errors.New("webhook: lease must not be negative")
	case a.Lease > 0 && time.Duration(a.Lease) < time.Second:
		return fmt.Errorf("webhook: lease %s is shorter than 1s", time.Duration(a.Lease))
	case a.PollInterval < 0:
		return errors.New("webhook: poll_interval must not be negative")
	case a.MaxAttempts < 0:
		return errors.New("webhook: max_attempts must not be negative")
	case a.MaxRetryAfter < 0:
		return errors.New("webhook: max_retry_after must not be negative")
	case a.Retention < 0:
		return errors.New("webhook: retention must not be negative")
	case a.ShutdownGrace < 0:
		return errors.New("webhook: shutdown_grace must not be negative")
	case a.MaxTails < 0:
		return errors.New("webhook: max_tails must not be negative")
	case a.TailMaxLag < 0:
		return errors.New("webhook: tail_max_lag must not be negative")
	}
	if err := a.Backoff.validate(); err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	return nil
}

// validate checks a backoff; nil is the default. The message names the
// option, for the caller to say where it is.
func (b *BackoffConfig) validate() error {
	switch {
	case b == nil:
	case b.Base < 0 || b.Max < 0:
		return errors.New("backoff durations must not be negative")
	case b.Base > 0 && b.Max > 0 && b.Max < b.Base:
		return errors.New("backoff max is shorter than its base")
	}
	return nil
}

// workers returns the configured worker count; 0 means receive only.
func (a *App) workers() int {
	if a.Workers == nil {
		return queue.DefaultWorkers
	}
	return *a.Workers
}

// retention returns the configured retention of done jobs.
func (a *App) retention() time.Duration {
	return cmp.Or(time.Duration(a.Retention), queue.DefaultRetention)
}

// registerReceiver records a receiver's source and its targets, once,
// during the receiver's Provision: the routes and their delivery settings
// for the pool, and what the admin API needs of the source. Two receivers
// with one source would share dedupe keys and jobs, so that is a config
// error.
func (a *App) registerReceiver(rc *Receiver, targets []namedTarget) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	source := rc.Source
	if a.started {
		return fmt.Errorf("webhook_receiver: source %q: the webhook app has already started", source)
	}
	if _, ok := a.sources[source]; ok {
		return fmt.Errorf("webhook_receiver: source %q is configured twice; each receiver needs its own source", source)
	}
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.name
		route := queue.Route{Source: source, Target: t.name}
		a.routes[route] = t.target
		a.policies[route] = t.retry
		a.limits[route] = t.flow
		a.rules[route] = t.rules
	}
	a.sources[source] = sourceConfig{receiver: rc, targets: names, targetsFor: rc.targetsForEvent, maxBody: rc.maxBody}
	return nil
}

// namedTarget is one provisioned target of a receiver.
type namedTarget struct {
	name   string
	target Target
	retry  retryPolicy
	flow   queue.FlowLimits
	rules  routeRules
}

// routeList returns the registered (source, target) pairs, sorted.
func (a *App) routeList() []queue.Route {
	a.mu.Lock()
	defer a.mu.Unlock()
	routes := make([]queue.Route, 0, len(a.routes))
	for r := range a.routes {
		routes = append(routes, r)
	}
	slices.SortFunc(routes, func(x, y queue.Route) int {
		return cmp.Or(strings.Compare(x.Source, y.Source), strings.Compare(x.Target, y.Target))
	})
	return routes
}

// Start starts the housekeeping loop and, unless workers is 0 or no
// receiver names a target, the worker pool. The pool claims only jobs of
// the routes this config has; a job whose source or target is gone waits,
// counted in stats and metrics, until a config names it again or someone
// discards it.
func (a *App) Start() error {
	store, err := a.queueStore()
	if err != nil {
		return err
	}
	a.warnKeys(a.ctx, store)
	routes := a.routeList()
	a.mu.Lock()
	a.started = true
	handlers := maps.Clone(a.routes)
	redact := a.redactorLocked()
	policyFor := a.policyFor(a.policies)
	limits := maps.Clone(a.limits)
	rules := maps.Clone(a.rules)
	sources := maps.Clone(a.sources)
	a.mu.Unlock()

	var notifier *notify.Notifier
	if a.Notify != nil {
		notifier = notify.New(notify.Config{
			Store:        store,
			Window:       time.Duration(a.Notify.Window),
			PendingAge:   time.Duration(a.Notify.PendingAge),
			Logger:       a.logger,
			BacklogStale: a.events.backlogStale,
		})
	}
	obs := &observer{logger: a.logger, notifier: notifier, events: a.events}
	keeper, err := queue.NewHousekeeper(queue.HousekeeperConfig{
		Store:     store,
		Retention: a.retention(),
		Observer:  obs,
	})
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}

	d := &delivery{store: store, targets: handlers, policyFor: policyFor, limits: limits, redact: redact, notifier: notifier, obs: obs}
	handler := attemptHandler{next: redactingHandler{next: router(handlers), r: redact}, last: a.lastAttempt(policyFor)}
	if a.Tracing {
		if handler.tracer, err = a.acquireTracer(); err != nil {
			return err
		}
	}
	// The pool never claims a pull target's jobs: its consumers do.
	pulled, pooled := pullRoutes(routes, handlers)
	side, err := a.newPool(d, pooled, handler)
	if err != nil {
		return err
	}
	pool, pauses, flow := side.pool, side.pauses, side.flow
	var pull *pullSide
	if len(pulled) > 0 {
		if pauses == nil {
			// Read before the first claim, as the pool's are.
			if pauses, err = a.newPauses(store); err != nil {
				return err
			}
		}
		pull = a.newPull(d, pulled, pauses.paused)
	}

	if err := keeper.Start(a.ctx); err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	if pool != nil {
		// The pool ends by Stop or Drain only: the context of a config
		// that a reload replaced is cancelled while its pool may still
		// drain.
		if err := pool.Start(context.WithoutCancel(a.ctx)); err != nil {
			_ = keeper.Stop(context.WithoutCancel(a.ctx))
			return fmt.Errorf("webhook: %w", err)
		}
	}
	if notifier != nil {
		notifier.Start(a.ctx)
	}
	if pauses != nil {
		pauses.Start(a.ctx)
	}
	live := &runningConfig{
		Store:      store,
		keys:       a.storeKeys(),
		Retention:  a.retention(),
		Routes:     routes,
		pauses:     pauses,
		rules:      rules,
		sources:    sources,
		pull:       pull,
		events:     a.events,
		maxTails:   a.MaxTails,
		tailMaxLag: time.Duration(a.TailMaxLag),
	}
	if flow != nil {
		live.Circuits = flow.Circuits
	}
	a.mu.Lock()
	a.pool, a.keeper, a.notifier, a.live = pool, keeper, notifier, live
	a.mu.Unlock()
	a.storeMu.Lock()
	a.published = true
	a.storeMu.Unlock()
	current.Store(live)

	a.logStarted(pool, pull, routes)
	return nil
}

// lastAttempt reports whether a job is on the last attempt its route's
// budget allows, as queue.Decider counts it (from the last replay on).
func (a *App) lastAttempt(policyFor func(*queue.Job) (queue.RetryPolicy, int)) func(*queue.Job) bool {
	return func(job *queue.Job) bool {
		budget := cmp.Or(a.MaxAttempts, queue.DefaultMaxAttempts)
		if policyFor != nil {
			if _, n := policyFor(job); n != 0 {
				budget = n
			}
		}
		return job.Attempt-job.ReplayBase >= budget
	}
}

// delivery is what Start hands the builders of the pool and the pull
// side: the store, each route's target (its transform included), retry
// policy and flow limits, and where attempts are reported.
type delivery struct {
	store     *sharedStore
	targets   map[queue.Route]Target
	policyFor func(*queue.Job) (queue.RetryPolicy, int)
	limits    map[queue.Route]queue.FlowLimits
	redact    *redactor        // takes the config's secrets out of attempts' errors
	notifier  *notify.Notifier // nil without Notify
	obs       queue.Observer
}

// poolSide is the worker pool with its pause set and flow control (nil
// when no target has a limit); all nil when no pool runs.
type poolSide struct {
	pool   *queue.Pool
	pauses *pauseSet
	flow   *queue.Flow
}

// newPauses reads the store's pauses into a pause set, before the first
// claim, so a paused route stays paused across a restart from the first
// moment.
func (a *App) newPauses(store queue.Store) (*pauseSet, error) {
	pauses := newPauseSet(store, a.logger)
	if err := pauses.refresh(a.ctx); err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	return pauses, nil
}

// newPool builds the worker pool over routes with handler, or none when
// workers is 0 or no receiver names a target.
func (a *App) newPool(d *delivery, routes []queue.Route, handler queue.Handler) (poolSide, error) {
	n := a.workers()
	if n == 0 || len(routes) == 0 {
		return poolSide{}, nil
	}
	pauses, err := a.newPauses(d.store)
	if err != nil {
		return poolSide{}, err
	}
	// With flow control the flow answers for pauses too (its plan
	// names the routes a claim reads).
	flow := a.newFlow(routes, d.limits, d.notifier, pauses.paused)
	cfg := queue.PoolConfig{
		Store:         d.store,
		Handler:       handler,
		Workers:       n,
		Lease:         time.Duration(a.Lease),
		PollInterval:  time.Duration(a.PollInterval),
		MaxAttempts:   a.MaxAttempts,
		PolicyFor:     d.policyFor,
		MaxRetryAfter: time.Duration(a.MaxRetryAfter),
		ShutdownGrace: time.Duration(a.ShutdownGrace),
		Routes:        routes,
		Paused:        pauses.paused,
		Observer:      d.obs,
	}
	if flow != nil {
		cfg.Flow = flow
	}
	if a.storage.ClaimAhead() {
		cfg.ClaimAhead = n
	}
	if a.Backoff != nil {
		cfg.Retry = queue.Backoff{Base: time.Duration(a.Backoff.Base), Max: time.Duration(a.Backoff.Max)}
	}
	pool, err := queue.NewPool(cfg)
	if err != nil {
		return poolSide{}, fmt.Errorf("webhook: %w", err)
	}
	return poolSide{pool: pool, pauses: pauses, flow: flow}, nil
}

// logStarted logs how the queue started: with a pool, with pull targets
// only, or receiving only.
func (a *App) logStarted(pool *queue.Pool, pull *pullSide, routes []queue.Route) {
	fields := []zap.Field{zap.Int("routes", len(routes)), zap.Int("workers", a.workers())}
	if pull != nil {
		fields = append(fields, zap.Strings("pull_targets", pull.Targets()))
	}
	switch {
	case pool == nil && pull != nil:
		a.logger.Info("webhook queue started: pull targets only, for their consumers", fields...)
	case pool != nil:
		fields = append(fields, zap.String("lease_owner", pool.Owner()))
		a.logger.Info("webhook queue started", fields...)
	case len(routes) == 0:
		a.logger.Info("webhook queue started without workers: no receiver has a target", fields...)
	default:
		a.logger.Info("webhook queue started without workers: receiving and storing only", fields...)
	}
}

// Stop stops housekeeping and the pool's claims. When Caddy exits, it
// gives running deliveries (this pool's and those still draining from
// earlier configs) the shutdown grace and hands the rest back without
// charging an attempt. On a reload it returns at once: the pool drains in
// the background (see drain). The store stays open for the config that
// replaces this one; Cleanup releases it.
func (a *App) Stop() error {
	a.mu.Lock()
	pool, keeper, notifier, live := a.pool, a.keeper, a.notifier, a.live
	a.pool, a.keeper, a.notifier, a.live = nil, nil, nil, nil
	a.mu.Unlock()
	if live != nil {
		// Unless a reload's new app has published its own already.
		current.CompareAndSwap(live, nil)
		if live.pull != nil {
			live.pull.stop()
		}
		// A draining pool claims nothing more, so its pauses need no
		// refresh.
		if live.pauses != nil {
			live.pauses.Stop()
		}
	}

	grace := cmp.Or(time.Duration(a.ShutdownGrace), queue.DefaultShutdownGrace)
	// Caddy has not cancelled a.ctx yet; WithoutCancel keeps it so should
	// it ever, the hand-back writes still happen.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), grace+stopMargin)
	defer cancel()
	var errs []error
	if pool != nil {
		if caddy.Exiting() {
			// This pool and the draining ones stop together, so exiting
			// takes one grace, not one per reload still draining.
			drained := make(chan struct{})
			go func() {
				defer close(drained)
				stopDrains(ctx)
			}()
			if err := pool.Stop(ctx); err != nil {
				errs = append(errs, err)
			}
			<-drained
		} else {
			a.drain(pool, grace, notifier)
			notifier = nil // the drain stops it once the pool is done
		}
	}
	// After the pool: the dead jobs of its last attempts are in the
	// notices it stores.
	if notifier != nil {
		if err := notifier.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if keeper != nil {
		if err := keeper.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("webhook: stop: %w", err)
	}
	return nil
}

// Cleanup releases this app's reference to the store; the last reference
// closes it. It is safe after a failed Provision.
func (a *App) Cleanup() error {
	a.mu.Lock()
	traced := a.traced
	a.traced = false
	a.mu.Unlock()
	if traced {
		// The spans of this config's last deliveries are flushed here, after
		// Stop, so a reload's draining pool keeps exporting until then.
		if err := spanExport.release(context.WithoutCancel(a.ctx)); err != nil {
			a.logger.Warn("flushing delivery spans", zap.Error(err))
		}
	}
	a.storeMu.Lock()
	key := a.storeKey
	a.storeKey, a.released = "", true
	restore := a.setKeys && !a.published
	a.storeMu.Unlock()
	if key == "" {
		return nil
	}
	if s := a.opened.Load(); restore && s != nil {
		a.restoreKeys(s)
	}
	if _, err := stores.Delete(key); err != nil {
		return fmt.Errorf("webhook: close store: %w", err)
	}
	return nil
}

// router is the pool's handler: it sends each job to the Target module of
// its (source, target) route.
type router map[queue.Route]Target

// Handle implements queue.Handler.
func (rt router) Handle(ctx context.Context, job *queue.Job) error {
	t, ok := rt[queue.Route{Source: job.Source, Target: job.Target}]
	if !ok {
		// The pool claims only routed jobs, so this is a bug, not config.
		return fmt.Errorf("no target %q for source %q in this config", job.Target, job.Source)
	}
	return t.Deliver(ctx, job)
}

// Interface guards
var (
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.Validator    = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
	_ queue.Handler      = router(nil)
)
