package caddywebhook

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/notify"
	"github.com/caddywebhook/caddywebhook/queue"
)

// DeliverySettings are the delivery settings of one target of a receiver
// (TargetConfig embeds them): its retry budget and backoff, which override
// the app's, and the flow control of its deliveries.
type DeliverySettings struct {
	// MaxAttempts is the number of attempts after which this target's
	// failing jobs are parked as dead; it overrides the app's max_attempts
	// for this target only. Default: the app's max_attempts (12).
	MaxAttempts int `json:"max_attempts,omitempty"`

	// Backoff spaces the attempts of this target's failing jobs, overriding
	// the app's backoff; a base or max left unset is the app's. Default:
	// the app's backoff (2s, 15m).
	Backoff *BackoffConfig `json:"backoff,omitempty"`

	// Rate caps how fast deliveries to this target start, as <n>/s, <n>/m
	// or <n>/h (e.g. "50/s"). Jobs beyond it wait, pending, unclaimed and
	// uncharged. The limit is per Caddy instance: several instances
	// sharing a PostgreSQL queue each deliver up to the rate. Default:
	// none.
	Rate string `json:"rate,omitempty"`

	// Concurrency caps the deliveries to this target running at once, in
	// this instance (per instance, as Rate). Default: 0, no cap beyond
	// the app's workers.
	Concurrency int `json:"concurrency,omitempty"`

	// CircuitBreaker stops deliveries to this target after a run of
	// transient failures, for a cool-down that grows while it keeps
	// failing; see CircuitBreakerConfig. The circuit's state is this
	// instance's. Default: none, no circuit breaker.
	CircuitBreaker *CircuitBreakerConfig `json:"circuit_breaker,omitempty"`
}

// flowControlOnPull refuses the flow-control settings on a pull target:
// its consumers claim its jobs, never the app's pool, so a rate, a
// concurrency cap or a circuit breaker would be accepted and then do
// nothing.
func (s DeliverySettings) flowControlOnPull() error {
	var set []string
	if s.Rate != "" {
		set = append(set, "rate")
	}
	if s.Concurrency != 0 {
		set = append(set, "concurrency")
	}
	if s.CircuitBreaker != nil {
		set = append(set, "circuit_breaker")
	}
	if len(set) == 0 {
		return nil
	}
	names, verb, it := set[0], "does", "it"
	if n := len(set); n > 1 {
		names, verb, it = strings.Join(set[:n-1], ", ")+" and "+set[n-1], "do", "them"
	}
	return fmt.Errorf("%s %s not apply to a pull target: its consumers decide how fast they take jobs, and the app delivers nothing a breaker could count (docs/CONSUMER.md); remove %s", names, verb, it)
}

// CircuitBreakerConfig is a target's circuit breaker: after Failures
// transient failures in a row, deliveries to the target stop for Cooldown;
// then one probe goes through, whose success closes the circuit and whose
// failure opens it again for twice as long, up to MaxCooldown. While the
// circuit is open, the target's jobs wait, pending, without being charged
// attempts. A permanent failure (a 4xx) is an answer, not a failure, for
// the breaker.
type CircuitBreakerConfig struct {
	// Failures is the run of transient failures that opens the circuit.
	// Default: 5.
	Failures int `json:"failures,omitempty"`
	// Cooldown is how long the circuit stays open the first time. Default:
	// 30s.
	Cooldown caddy.Duration `json:"cooldown,omitempty"`
	// MaxCooldown caps the cool-down, which doubles each time the probe
	// fails. Default: 10m.
	MaxCooldown caddy.Duration `json:"max_cooldown,omitempty"`
}

// Default circuit breaker settings.
const (
	defaultBreakerFailures    = 5
	defaultBreakerCooldown    = 30 * time.Second
	defaultBreakerMaxCooldown = 10 * time.Minute
)

func (b *CircuitBreakerConfig) validate() error {
	switch {
	case b == nil:
	case b.Failures < 0:
		return errors.New("circuit_breaker failures must not be negative")
	case b.Cooldown < 0 || b.MaxCooldown < 0:
		return errors.New("circuit_breaker durations must not be negative")
	case b.Cooldown > 0 && b.MaxCooldown > 0 && b.MaxCooldown < b.Cooldown:
		return errors.New("circuit_breaker max_cooldown is shorter than its cooldown")
	}
	return nil
}

// breaker returns b with its defaults, or nil for no breaker.
func (b *CircuitBreakerConfig) breaker() *queue.Breaker {
	if b == nil {
		return nil
	}
	cooldown := cmp.Or(time.Duration(b.Cooldown), defaultBreakerCooldown)
	return &queue.Breaker{
		Failures:    cmp.Or(b.Failures, defaultBreakerFailures),
		Cooldown:    cooldown,
		MaxCooldown: max(cmp.Or(time.Duration(b.MaxCooldown), defaultBreakerMaxCooldown), cooldown),
	}
}

// parseRate reads a rate such as 50/s, 600/m or 1000/h (also /sec, /min,
// /hour, /second, /minute).
func parseRate(s string) (queue.Rate, error) {
	n, unit, ok := strings.Cut(s, "/")
	count, err := strconv.Atoi(n)
	if !ok || err != nil || count <= 0 {
		return queue.Rate{}, fmt.Errorf("rate %q: want <n>/s, <n>/m or <n>/h with n at least 1", s)
	}
	per := map[string]time.Duration{
		"s": time.Second, "sec": time.Second, "second": time.Second,
		"m": time.Minute, "min": time.Minute, "minute": time.Minute,
		"h": time.Hour, "hour": time.Hour,
	}[unit]
	if per == 0 {
		return queue.Rate{}, fmt.Errorf("rate %q: the period must be s, m or h", s)
	}
	return queue.Rate{N: count, Per: per}, nil
}

// check checks ds and returns the retry policy and the flow limits of its
// target's route; each message names the option.
func (ds *DeliverySettings) check() (retryPolicy, queue.FlowLimits, error) {
	if ds.MaxAttempts < 0 {
		return retryPolicy{}, queue.FlowLimits{}, errors.New("max_attempts must not be negative")
	}
	if err := ds.Backoff.validate(); err != nil {
		return retryPolicy{}, queue.FlowLimits{}, err
	}
	limits, err := ds.flowLimits()
	if err != nil {
		return retryPolicy{}, queue.FlowLimits{}, err
	}
	return retryPolicy{maxAttempts: ds.MaxAttempts, backoff: ds.Backoff}, limits, nil
}

// flowLimits checks and returns the delivery limits of tc.
func (tc *DeliverySettings) flowLimits() (queue.FlowLimits, error) {
	var l queue.FlowLimits
	if tc.Rate != "" {
		r, err := parseRate(tc.Rate)
		if err != nil {
			return l, err
		}
		l.Rate = r
	}
	if tc.Concurrency < 0 {
		return l, errors.New("concurrency must not be negative")
	}
	l.Concurrency = tc.Concurrency
	if err := tc.CircuitBreaker.validate(); err != nil {
		return l, err
	}
	l.Breaker = tc.CircuitBreaker.breaker()
	return l, nil
}

// retryPolicy is the attempt budget and backoff of one route, where its
// target overrides the app's.
type retryPolicy struct {
	maxAttempts int            // 0: the app's
	backoff     *BackoffConfig // nil: the app's
}

// policyFor returns the pool's PolicyFor over the routes that override the
// app's retry settings, or nil when none does. An unset backoff base or
// max of a route's own backoff is the app's.
func (a *App) policyFor(policies map[queue.Route]retryPolicy) func(*queue.Job) (queue.RetryPolicy, int) {
	type policy struct {
		retry       queue.RetryPolicy
		maxAttempts int
	}
	byRoute := make(map[queue.Route]policy)
	for route, rp := range policies {
		if rp.maxAttempts == 0 && rp.backoff == nil {
			continue
		}
		p := policy{maxAttempts: rp.maxAttempts}
		if b := rp.backoff; b != nil {
			global := cmp.Or(a.Backoff, new(BackoffConfig))
			p.retry = queue.Backoff{
				Base: time.Duration(cmp.Or(b.Base, global.Base)),
				Max:  time.Duration(cmp.Or(b.Max, global.Max)),
			}
		}
		byRoute[route] = p
	}
	if len(byRoute) == 0 {
		return nil
	}
	return func(job *queue.Job) (queue.RetryPolicy, int) {
		p := byRoute[queue.Route{Source: job.Source, Target: job.Target}]
		return p.retry, p.maxAttempts
	}
}

// newFlow returns the pool's flow control over routes, or nil when no route
// has a limit: the pool then claims as it always did. Circuit changes are
// logged once each and passed to notifier, if not nil.
func (a *App) newFlow(routes []queue.Route, limits map[queue.Route]queue.FlowLimits, notifier *notify.Notifier, paused func(queue.Route) bool) *queue.Flow {
	limited := false
	for _, l := range limits {
		limited = limited || l != (queue.FlowLimits{})
	}
	if !limited {
		return nil
	}
	logger, events := a.logger, a.events
	return queue.NewFlow(queue.FlowConfig{
		Routes: routes,
		Limits: limits,
		Paused: paused,
		CircuitChanged: func(r queue.Route, state queue.CircuitState, cooldown time.Duration) {
			fields := []zap.Field{zap.String("source", r.Source), zap.String("target", r.Target), zap.String("circuit", state.String())}
			switch state {
			case queue.CircuitOpen:
				logger.Warn("circuit opened: deliveries to the target paused", append(fields, zap.Duration("cooldown", cooldown))...)
			case queue.CircuitHalfOpen:
				logger.Info("circuit half open: one probe delivery", fields...)
			default:
				logger.Info("circuit closed: deliveries to the target resumed", fields...)
			}
			if state != queue.CircuitHalfOpen {
				if notifier != nil {
					notifier.CircuitChanged(r, state == queue.CircuitOpen)
				}
				events.circuitChanged(r, state == queue.CircuitOpen)
			}
		},
	})
}
