package caddywebhook

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddywebhook/caddywebhook/queue"
)

// The plugin's metrics, in Caddy's registry (served by the admin endpoint's
// /metrics and by the metrics handler):
//
//	caddy_webhook_events_received_total{source,outcome}         requests by outcome word
//	caddy_webhook_deliveries_total{source,target,outcome}       attempts: delivered, retry, dead, lease_lost, handed_back
//	caddy_webhook_delivery_duration_seconds{source,target}      attempt durations
//	caddy_webhook_jobs{source,target,status}                    jobs by status, read at scrape time
//	caddy_webhook_oldest_pending_seconds                        age of the oldest due pending job
//	caddy_webhook_stored_events                                 events in the database
//	caddy_webhook_circuit_state{source,target}                  0 closed, 1 open, 2 half open; routes with a circuit breaker
//	caddy_webhook_delivery_lag_seconds{source,target}           acceptance to the attempt that delivered
//	caddy_webhook_attempts_per_delivery{target}                 the attempt number that delivered
//	caddy_webhook_filter_errors_total{source,target}            filters that failed to evaluate (the target did not take the event)
//
// The counters and histograms are webhookMetrics (process.go); the job
// gauges are a collector bound to one app's store, registered with that app.

// lagBuckets run from 10 ms (a delivery at once, in the same process) to
// a day (a job retried through a long outage, or replayed from dead).
var lagBuckets = []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 1800, 3600, 7200, 14400, 43200, 86400}

const metricsNamespace, metricsSubsystem = "caddy", "webhook"

func initMetrics() {
	webhookMetrics.once.Do(func() {
		webhookMetrics.received = prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace,
			Subsystem: metricsSubsystem,
			Name:      "events_received_total",
			Help:      "Webhook requests by source and outcome (accepted, duplicate, no_target, bad_signature, …).",
		}, []string{"source", "outcome"})
		webhookMetrics.deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace,
			Subsystem: metricsSubsystem,
			Name:      "deliveries_total",
			Help:      "Delivery attempts by source, target and outcome (delivered, retry, dead, lease_lost, handed_back).",
		}, []string{"source", "target", "outcome"})
		webhookMetrics.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace,
			Subsystem: metricsSubsystem,
			Name:      "delivery_duration_seconds",
			Help:      "Duration of delivery attempts by source and target.",
			Buckets:   []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"source", "target"})
		webhookMetrics.lag = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace,
			Subsystem: metricsSubsystem,
			Name:      "delivery_lag_seconds",
			Help:      "Time from a webhook's acceptance (its 202) to the end of the attempt that delivered it, by source and target.",
			Buckets:   lagBuckets,
		}, []string{"source", "target"})
		webhookMetrics.attempts = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace,
			Subsystem: metricsSubsystem,
			Name:      "attempts_per_delivery",
			Help:      "Attempts a delivered job took, its delivering attempt's number, by target.",
			Buckets:   []float64{1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 30, 50},
		}, []string{"target"})
		webhookMetrics.filterErrs = prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace,
			Subsystem: metricsSubsystem,
			Name:      "filter_errors_total",
			Help:      "Target filters that failed to evaluate, by source and target; the target did not take the event.",
		}, []string{"source", "target"})
	})
}

// observeDelivered records the lag and the attempts of a job the attempt c
// delivered. The lag ends with the attempt, before the store recorded it,
// which is when the upstream had it.
func observeDelivered(job *queue.Job, c queue.Completion) {
	lag := c.Started.Add(c.Duration).Sub(job.CreatedAt)
	webhookMetrics.lag.WithLabelValues(job.Source, job.Target).Observe(max(lag, 0).Seconds())
	webhookMetrics.attempts.WithLabelValues(job.Target).Observe(float64(job.Attempt))
	recentLags.add(queue.Route{Source: job.Source, Target: job.Target}, c.Started.Add(c.Duration), lag)
}

// registerMetrics registers the process-wide metrics and app's job
// collector in the registry of app's config load.
func registerMetrics(registry *prometheus.Registry, app *App) error {
	initMetrics()
	if registry == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{
		webhookMetrics.received,
		webhookMetrics.deliveries,
		webhookMetrics.duration,
		webhookMetrics.lag,
		webhookMetrics.attempts,
		webhookMetrics.filterErrs,
		&jobsCollector{app: app},
	} {
		if err := registry.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				continue
			}
			return err
		}
	}
	return nil
}

// filterErrorCounter is the counter of the filter errors of one route.
func filterErrorCounter(source, target string) prometheus.Counter {
	initMetrics()
	return webhookMetrics.filterErrs.WithLabelValues(source, target)
}

// receivedCounter returns the counter of one (source, outcome) pair, so the
// receiver resolves its labels once at Provision, not per request.
func receivedCounter(source string, o outcome) prometheus.Counter {
	initMetrics()
	return webhookMetrics.received.WithLabelValues(source, o.String())
}

var (
	jobsDesc = prometheus.NewDesc(
		prometheus.BuildFQName(metricsNamespace, metricsSubsystem, "jobs"),
		"Jobs by source, target and status, read from the store at scrape time.",
		[]string{"source", "target", "status"}, nil)
	oldestPendingDesc = prometheus.NewDesc(
		prometheus.BuildFQName(metricsNamespace, metricsSubsystem, "oldest_pending_seconds"),
		"Age of the oldest pending job that is due; 0 when none waits.",
		nil, nil)
	circuitDesc = prometheus.NewDesc(
		prometheus.BuildFQName(metricsNamespace, metricsSubsystem, "circuit_state"),
		"Circuit breaker state of a route in this instance: 0 closed, 1 open, 2 half open (one probe).",
		[]string{"source", "target"}, nil)
	storedEventsDesc = prometheus.NewDesc(
		prometheus.BuildFQName(metricsNamespace, metricsSubsystem, "stored_events"),
		"Events held in the store, delivered ones included until purged.",
		nil, nil)
)

// statsTimeout bounds the store read of one scrape: a scrape must not hang
// on a busy database, and a missing sample is better than a stuck one.
const statsTimeout = 2 * time.Second

// jobsCollector reports the queue's contents from Store.Stats at scrape time.
// A (source, target) pair the config routes always reports its four statuses,
// zeros included, so an alert on status="dead" has a series to watch.
type jobsCollector struct {
	app *App
}

// Describe implements prometheus.Collector.
func (c *jobsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- jobsDesc
	ch <- oldestPendingDesc
	ch <- storedEventsDesc
	ch <- circuitDesc
}

// Collect implements prometheus.Collector.
func (c *jobsCollector) Collect(ch chan<- prometheus.Metric) {
	c.collectCircuits(ch)
	store := c.app.openedStore()
	if store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.app.ctx), statsTimeout)
	defer cancel()
	st, err := store.Stats(ctx, time.Now())
	if err != nil {
		// A failed read leaves the samples out rather than failing the
		// whole scrape, which would hide Caddy's own metrics too.
		c.app.logger.Warn("read queue stats for metrics", zap.Error(err))
		return
	}
	type key struct {
		source, target string
		status         queue.Status
	}
	counts := make(map[key]int64, len(st.Counts))
	for _, n := range st.Counts {
		counts[key{n.Source, n.Target, n.Status}] += n.Jobs
	}
	for _, r := range c.app.routeList() {
		for _, s := range []queue.Status{queue.StatusPending, queue.StatusBlocked, queue.StatusRunning, queue.StatusDone, queue.StatusDead} {
			k := key{r.Source, r.Target, s}
			if _, ok := counts[k]; !ok {
				counts[k] = 0
			}
		}
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(n), k.source, k.target, string(k.status))
	}
	ch <- prometheus.MustNewConstMetric(oldestPendingDesc, prometheus.GaugeValue, st.OldestPending.Seconds())
	ch <- prometheus.MustNewConstMetric(storedEventsDesc, prometheus.GaugeValue, float64(st.Events))
}

// collectCircuits reports the circuit of every route that has a breaker.
func (c *jobsCollector) collectCircuits(ch chan<- prometheus.Metric) {
	c.app.mu.Lock()
	live, limits := c.app.live, c.app.limits
	c.app.mu.Unlock()
	if live == nil || live.Circuits == nil {
		return
	}
	open := live.Circuits()
	for r, l := range limits {
		if l.Breaker != nil {
			ch <- prometheus.MustNewConstMetric(circuitDesc, prometheus.GaugeValue, float64(open[r]), r.Source, r.Target)
		}
	}
}

// Interface guards
var _ prometheus.Collector = (*jobsCollector)(nil)
