package caddywebhook

import (
	"sync"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddywebhook/caddywebhook/queue"
)

// What outlives a config reload. Caddy provisions and starts a new config
// before it stops the old one, and its admin server, its metrics and the
// process outlive both; this is the state of the package that lives for
// the process rather than for one config, each piece with when it is
// created and released. Everything else belongs to one App and goes with
// its Cleanup.

// current is the running app's config, the one value the admin API, the
// dashboard and the rule test act on (running.go). App.Start publishes its
// own with one atomic store once its pool, pull side and housekeeper run;
// App.Stop clears it only if it is still its own, since during a reload the
// new app has published before the old one stops. Nil while no webhook app
// runs.
var current atomic.Pointer[runningConfig]

// stores shares open stores across config loads, keyed by backend and
// location: "sqlite:" + absolute path, or "postgres:" + a fingerprint of
// the DSN (never the DSN) + "/" + schema. An app takes a reference when it
// first needs the store (Start, or a receiver's first request), a pool
// draining after a reload takes one of its own, and each gives it back
// (Cleanup, the end of the drain); the last one closes the store.
var stores = caddy.NewUsagePool()

// openStores lists the stores open now, by key, for readers that must not
// wait on the usage pool: its Range waits for a store still opening (a
// migration may take minutes) while holding the pool's lock, which every
// config load needs. A store is added when it opens and removed when the
// usage pool destructs it (sharedStore.Destruct).
var openStores sync.Map

// drains holds the pools of replaced configs whose deliveries are still
// finishing (app_drain.go). App.Stop adds its pool on a reload; the drain
// removes it once the pool is done, and stopDrains, when Caddy exits,
// stops every pool still in it.
var drains = struct {
	mu    sync.Mutex
	pools map[*queue.Pool]drainState
}{pools: make(map[*queue.Pool]drainState)}

// tails is the hub of the live tail (tail.go). It lives for the process:
// a tail opened through the admin endpoint stays open across a reload,
// and the deliveries of a draining pool still reach it. A subscriber is
// added when a tail request starts and removed when it ends; the cap and
// the lag a reader is allowed are the running config's.
var tails tailHub

// recentLags holds the lag of each route's last deliveries in this
// process (lag.go), for the stats' p50 and p99, so a reload does not
// empty the dashboard's figures. A route's ring is made on its first
// delivery and kept, bounded, for the process.
var recentLags = &lagRings{routes: make(map[queue.Route]*lagRing)}

// spanExport is the tracer provider of the apps whose config turns
// tracing on (spans.go), shared as Caddy's tracing handler shares its
// own: built when the first such app starts, with the exporter the OTEL_*
// environment variables choose (autoexport: OTLP by default,
// OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_*), flushed and shut down when
// the last one is cleaned up, after its draining pool's spans.
var spanExport sharedTracer

// webhookMetrics are the counters and histograms of metrics.go. They are
// made once, on the first Provision, and live for the process, so their
// values survive config reloads; Caddy makes a new registry for every
// config load, and each App.Provision registers them again in it.
var webhookMetrics = struct {
	once       sync.Once
	received   *prometheus.CounterVec
	deliveries *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	lag        *prometheus.HistogramVec
	attempts   *prometheus.HistogramVec
	filterErrs *prometheus.CounterVec
}{}

// dashboardAdmin is the admin API the dashboard calls in-process
// (serveAdmin), made on the dashboard's first call and kept: it holds no
// config of its own, only the route table, and reads current per request.
var dashboardAdmin = sync.OnceValue(func() *adminAPI {
	a := new(adminAPI)
	a.mux = a.newMux()
	return a
})
