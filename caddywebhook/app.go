package caddywebhook

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddywebhook/caddywebhook/queue"
)

func init() {
	caddy.RegisterModule(new(App))
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
// keep every job in one worker at a time. The old pool hands its
// unfinished jobs back when it stops. With PostgreSQL, pools in other
// Caddy instances share it too, on the same terms.
type App struct {
	// Storage says where the queue lives: a SQLite file for one Caddy, or
	// a PostgreSQL database that several Caddy instances share. Default:
	// SQLite at <caddy data dir>/webhook/queue.db with synchronous=full.
	Storage *StorageConfig `json:"storage,omitempty"`

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
	// stops or reloads; after it they are cancelled and their jobs handed
	// back without being charged an attempt. Default: 10s.
	ShutdownGrace caddy.Duration `json:"shutdown_grace,omitempty"`

	ctx      caddy.Context
	logger   *zap.Logger
	storeKey string // key in stores, once this app holds a reference
	store    queue.Store

	mu      sync.Mutex
	routes  map[queue.Route]Target // registered by receivers during Provision
	sources map[string]bool
	started bool
	pool    *queue.Pool
	keeper  *queue.Housekeeper
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

// stores shares open stores across config loads, keyed by backend and
// location: "sqlite:" + absolute path, or "postgres:" + a fingerprint of
// the DSN (never the DSN) + "/" + schema.
var stores = caddy.NewUsagePool()

// sharedStore is a store in the usage pool; it closes when the last app
// holding it is cleaned up.
type sharedStore struct {
	queue.Store
	settings string // the storeSpec settings it was opened with
}

// Destruct implements caddy.Destructor.
func (s *sharedStore) Destruct() error { return s.Close() }

// Provision sets defaults and opens (or shares) the store. Opening only
// creates the file and its schema, so `caddy validate` may run it; workers
// start in Start.
func (a *App) Provision(ctx caddy.Context) error {
	a.ctx = ctx
	a.logger = ctx.Logger()
	a.routes = make(map[queue.Route]Target)
	a.sources = make(map[string]bool)

	if a.Storage == nil {
		a.Storage = new(StorageConfig)
	}
	spec, err := a.Storage.spec()
	if err != nil {
		return err
	}
	if err := a.validate(); err != nil {
		return err
	}

	val, _, err := stores.LoadOrNew(spec.key, func() (caddy.Destructor, error) {
		s, err := spec.open(ctx)
		if err != nil {
			return nil, err
		}
		return &sharedStore{Store: s, settings: spec.settings}, nil
	})
	if err != nil {
		return fmt.Errorf("webhook: open store %s: %w", spec.name, err)
	}
	a.storeKey = spec.key
	shared := val.(*sharedStore)
	a.store = shared.Store
	if shared.settings != spec.settings {
		a.logger.Warn("storage settings change when Caddy restarts: the open store is shared across reloads",
			zap.String("store", spec.name),
			zap.String("configured", spec.settings),
			zap.String("in_effect", shared.settings))
	}

	if err := registerMetrics(ctx.GetMetricsRegistry(), a); err != nil {
		return fmt.Errorf("webhook: register metrics: %w", err)
	}
	return nil
}

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
	case a.Backoff != nil && (a.Backoff.Base < 0 || a.Backoff.Max < 0):
		return errors.New("webhook: backoff durations must not be negative")
	case a.Backoff != nil && a.Backoff.Base > 0 && a.Backoff.Max > 0 && a.Backoff.Max < a.Backoff.Base:
		return errors.New("webhook: backoff max is shorter than its base")
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

// registerReceiver records the targets of one receiver's source, during the
// receiver's Provision. Two receivers with one source would share dedupe
// keys and jobs, so that is a config error.
func (a *App) registerReceiver(source string, targets []namedTarget) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.started {
		return fmt.Errorf("webhook_receiver: source %q: the webhook app has already started", source)
	}
	if a.sources[source] {
		return fmt.Errorf("webhook_receiver: source %q is configured twice; each receiver needs its own source", source)
	}
	a.sources[source] = true
	for _, t := range targets {
		a.routes[queue.Route{Source: source, Target: t.name}] = t.target
	}
	return nil
}

// namedTarget is one provisioned target of a receiver.
type namedTarget struct {
	name   string
	target Target
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
	routes := a.routeList()
	a.mu.Lock()
	a.started = true
	handlers := maps.Clone(a.routes)
	a.mu.Unlock()

	obs := &observer{logger: a.logger}
	keeper, err := queue.NewHousekeeper(queue.HousekeeperConfig{
		Store:     a.store,
		Retention: a.retention(),
		Observer:  obs,
	})
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}

	var pool *queue.Pool
	if n := a.workers(); n > 0 && len(routes) > 0 {
		cfg := queue.PoolConfig{
			Store:         a.store,
			Handler:       router(handlers),
			Workers:       n,
			Lease:         time.Duration(a.Lease),
			PollInterval:  time.Duration(a.PollInterval),
			MaxAttempts:   a.MaxAttempts,
			MaxRetryAfter: time.Duration(a.MaxRetryAfter),
			ShutdownGrace: time.Duration(a.ShutdownGrace),
			Routes:        routes,
			Observer:      obs,
		}
		if a.Storage.Backend == backendSQLite {
			// One Caddy owns its SQLite file, so jobs claimed ahead wait
			// for no one but this pool's workers; with Postgres they would
			// keep jobs from idle instances while these workers are busy.
			cfg.ClaimAhead = n
		}
		if a.Backoff != nil {
			cfg.Retry = queue.Backoff{Base: time.Duration(a.Backoff.Base), Max: time.Duration(a.Backoff.Max)}
		}
		if pool, err = queue.NewPool(cfg); err != nil {
			return fmt.Errorf("webhook: %w", err)
		}
	}

	if err := keeper.Start(a.ctx); err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	if pool != nil {
		if err := pool.Start(a.ctx); err != nil {
			_ = keeper.Stop(context.WithoutCancel(a.ctx))
			return fmt.Errorf("webhook: %w", err)
		}
	}
	a.mu.Lock()
	a.pool, a.keeper = pool, keeper
	a.mu.Unlock()
	setActiveQueue(a, a.store, a.retention(), routes)

	fields := []zap.Field{zap.Int("routes", len(routes)), zap.Int("workers", a.workers())}
	switch {
	case pool != nil:
		fields = append(fields, zap.String("lease_owner", pool.Owner()))
		a.logger.Info("webhook queue started", fields...)
	case len(routes) == 0:
		a.logger.Info("webhook queue started without workers: no receiver has a target", fields...)
	default:
		a.logger.Info("webhook queue started without workers: receiving and storing only", fields...)
	}
	return nil
}

// stopMargin is how long Stop waits past the grace for handlers that ignore
// their cancelled context before it hands their jobs back regardless.
const stopMargin = 5 * time.Second

// Stop stops claiming, gives running deliveries the shutdown grace, hands
// the rest back without charging an attempt, and stops housekeeping. The
// store stays open for the config that replaces this one; Cleanup releases
// it.
func (a *App) Stop() error {
	a.mu.Lock()
	pool, keeper := a.pool, a.keeper
	a.pool, a.keeper = nil, nil
	a.mu.Unlock()
	clearActiveQueue(a)

	grace := cmp.Or(time.Duration(a.ShutdownGrace), queue.DefaultShutdownGrace)
	// Caddy has not cancelled a.ctx yet; WithoutCancel keeps it so should
	// it ever, the hand-back writes still happen.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), grace+stopMargin)
	defer cancel()
	var errs []error
	if pool != nil {
		if err := pool.Stop(ctx); err != nil {
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
	if a.storeKey == "" {
		return nil
	}
	key := a.storeKey
	a.storeKey = ""
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

// Outcome words of a delivery attempt, in logs and metrics.
const (
	deliveryDelivered  = "delivered"
	deliveryRetry      = "retry"
	deliveryDead       = "dead"
	deliveryLeaseLost  = "lease_lost"
	deliveryHandedBack = "handed_back"
)

// maxLoggedError bounds the error text of a delivery in logs. The text comes
// from the target (an HTTP status, an exit code and the tail of a program's
// output), which targets keep free of secrets and headers.
const maxLoggedError = 512

// observer turns the pool's and the housekeeper's events into logs and
// metrics. It logs identifiers and outcome words, never payloads, headers
// or secrets.
type observer struct {
	queue.NopObserver
	logger *zap.Logger
}

func jobFields(job *queue.Job, extra ...zap.Field) []zap.Field {
	return append([]zap.Field{
		zap.String("source", job.Source),
		zap.String("target", job.Target),
		zap.Int64("job_id", job.ID),
		zap.String("delivery_id", job.DeliveryID),
		zap.String("event_type", job.EventType),
		zap.Int("attempt", job.Attempt),
	}, extra...)
}

// JobFinished implements queue.Observer.
func (o *observer) JobFinished(job *queue.Job, c queue.Completion, recorded bool, err error) {
	word, level := deliveryDelivered, zapcore.InfoLevel
	switch {
	case !recorded:
		word, level = deliveryLeaseLost, zapcore.WarnLevel
	case c.Status == queue.StatusPending:
		word, level = deliveryRetry, zapcore.WarnLevel
	case c.Status == queue.StatusDead:
		word, level = deliveryDead, zapcore.ErrorLevel
	}
	webhookMetrics.deliveries.WithLabelValues(job.Source, job.Target, word).Inc()
	if recorded {
		webhookMetrics.duration.WithLabelValues(job.Source, job.Target).Observe(c.Duration.Seconds())
	}
	ce := o.logger.Check(level, word)
	if ce == nil {
		return
	}
	fields := jobFields(job, zap.String("outcome", word), zap.Duration("duration", c.Duration))
	if c.Status == queue.StatusPending && recorded {
		fields = append(fields, zap.Time("next_attempt", c.RunAt))
	}
	if c.Error != "" {
		fields = append(fields, zap.String("error", truncate(c.Error, maxLoggedError)))
	}
	if !recorded && err == nil {
		fields = append(fields, zap.String("note", "delivered, but the job was no longer ours to record; it may be delivered again"))
	}
	ce.Write(fields...)
}

// JobHandedBack implements queue.Observer.
func (o *observer) JobHandedBack(job *queue.Job) {
	webhookMetrics.deliveries.WithLabelValues(job.Source, job.Target, deliveryHandedBack).Inc()
	o.logger.Info(deliveryHandedBack, jobFields(job, zap.String("outcome", deliveryHandedBack))...)
}

// LeaseLost implements queue.Observer. For a job whose delivery started,
// the attempt's JobFinished follows and counts it; a job claimed ahead and
// lost before it started was never delivered, and is only logged.
func (o *observer) LeaseLost(job *queue.Job) {
	o.logger.Warn("lease lost; delivery cancelled", jobFields(job, zap.String("outcome", deliveryLeaseLost))...)
}

// StoreError implements queue.Observer and queue.HousekeeperObserver.
func (o *observer) StoreError(op string, err error) {
	o.logger.Error("queue store error", zap.String("op", op), zap.Error(err))
}

// Purged implements queue.HousekeeperObserver.
func (o *observer) Purged(jobs int, cutoff time.Time) {
	if jobs > 0 {
		o.logger.Info("purged delivered jobs", zap.Int("jobs", jobs), zap.Time("finished_before", cutoff))
	}
}

// truncate cuts s to at most n bytes, on a UTF-8 boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// Interface guards
var (
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
	_ queue.Handler      = router(nil)
	_ queue.Observer     = (*observer)(nil)

	_ queue.HousekeeperObserver = (*observer)(nil)
)
