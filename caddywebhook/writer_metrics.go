package caddywebhook

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddywebhook/caddywebhook/queue"
)

// The store's write counters as metrics, read from the store at scrape
// time: how many transactions it committed and what they carried, so an
// operator (and the load test's cost table) can see how well group
// commit groups. The counters start from zero when the store opens, as
// Prometheus counters may.
var (
	storeCommitsDesc = prometheus.NewDesc(
		prometheus.BuildFQName(metricsNamespace, metricsSubsystem, "store_commits_total"),
		"Write transactions the store committed since it opened: the SQLite writer's batches, or the PostgreSQL store's grouped enqueues.",
		nil, nil)
	storeWritesDesc = prometheus.NewDesc(
		prometheus.BuildFQName(metricsNamespace, metricsSubsystem, "store_writes_total"),
		"Writes those transactions carried: on SQLite every write (enqueues, claims, finishes, …), on PostgreSQL the events enqueued.",
		nil, nil)
	storeWALFramesDesc = prometheus.NewDesc(
		prometheus.BuildFQName(metricsNamespace, metricsSubsystem, "store_wal_frames_total"),
		"Pages the SQLite write connection wrote to the WAL, one frame each, since it opened; 0 on PostgreSQL, whose server reports its own WAL.",
		nil, nil)
)

// writerStatser is a store that reports its write counters.
type writerStatser interface {
	WriterStats(ctx context.Context) (queue.WriterStats, error)
}

// writerCollector reports the app's store's write counters, which the
// stores publish as their writers commit: a scrape waits for no write.
type writerCollector struct {
	app *App
}

// Describe implements prometheus.Collector.
func (c *writerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- storeCommitsDesc
	ch <- storeWritesDesc
	ch <- storeWALFramesDesc
}

// Collect implements prometheus.Collector.
func (c *writerCollector) Collect(ch chan<- prometheus.Metric) {
	ws, ok := c.app.openedStore().(writerStatser)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.app.ctx), statsTimeout)
	defer cancel()
	st, err := ws.WriterStats(ctx)
	if err != nil {
		// As the job gauges: the samples are left out, the scrape goes on.
		c.app.logger.Warn("read store write counters for metrics", zap.Error(err))
		return
	}
	ch <- prometheus.MustNewConstMetric(storeCommitsDesc, prometheus.CounterValue, float64(st.Commits))
	ch <- prometheus.MustNewConstMetric(storeWritesDesc, prometheus.CounterValue, float64(st.Requests))
	ch <- prometheus.MustNewConstMetric(storeWALFramesDesc, prometheus.CounterValue, float64(st.WALPages))
}

// Interface guards
var _ prometheus.Collector = (*writerCollector)(nil)
