package caddywebhook

import (
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// gather returns the value of every sample of the registry whose metric name
// starts with caddy_webhook_, keyed like name{label="value",…} with labels
// sorted; histograms report their sample count.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "caddy_webhook_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+`"`+l.GetValue()+`"`)
			}
			sort.Strings(labels)
			key := mf.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// activeRegistry is the metrics registry of the running config.
func activeRegistry() *prometheus.Registry {
	ctx := caddy.ActiveContext()
	return ctx.GetMetricsRegistry()
}

// TestMetrics checks the metrics of a real config: requests by outcome,
// jobs by status read at scrape time (zeros included for routed pairs),
// deliveries and their durations, and that a reload registers everything
// in the new registry with the counters' values kept.
func TestMetrics(t *testing.T) {
	h := newHarness(t)
	up := newUpstream(t)
	// Sources unique to this test: the counters live for the process.
	h.load(t, map[string]any{"workers": 0},
		githubReceiver("m-held", httpTarget("sink", up.url)),
		githubReceiver("m-live", httpTarget("sink", up.url)))

	if got := h.post(t, "m-held", "d-1", "push", testBody(1)); got != http.StatusAccepted {
		t.Fatalf("status %d", got)
	}
	h.post(t, "m-held", "d-1", "push", testBody(1)) // duplicate
	h.do(t, http.MethodPost, "/hooks/m-held", signed(t, "wrong", "d-2", "push", testBody(2)), strings.NewReader(string(testBody(2))))

	m := gather(t, activeRegistry())
	for key, want := range map[string]float64{
		`caddy_webhook_events_received_total{outcome="accepted",source="m-held"}`:      1,
		`caddy_webhook_events_received_total{outcome="duplicate",source="m-held"}`:     1,
		`caddy_webhook_events_received_total{outcome="bad_signature",source="m-held"}`: 1,
		`caddy_webhook_jobs{source="m-held",status="pending",target="sink"}`:           1,
		`caddy_webhook_jobs{source="m-held",status="dead",target="sink"}`:              0,
		`caddy_webhook_jobs{source="m-live",status="dead",target="sink"}`:              0,
		`caddy_webhook_stored_events{}`:                                                1,
	} {
		got, ok := m[key]
		if !ok {
			t.Errorf("no sample %s", key)
		} else if got != want {
			t.Errorf("%s = %v, want %v", key, got, want)
		}
	}
	if _, ok := m[`caddy_webhook_oldest_pending_seconds{}`]; !ok {
		t.Error("no caddy_webhook_oldest_pending_seconds sample")
	}

	// Reload with workers and only m-live: the new registry has the
	// counters (values kept), and a delivery is counted and timed. m-held's
	// job stays pending, unrouted.
	h.load(t, map[string]any{"workers": 1}, githubReceiver("m-live", httpTarget("sink", up.url)))
	if got := h.post(t, "m-live", "d-3", "push", testBody(3)); got != http.StatusAccepted {
		t.Fatalf("status %d", got)
	}
	up.next(t)
	waitStatus(t, h.store(t), jobs(t, h.store(t))[0].ID, "done")
	m = gather(t, activeRegistry())
	for key, want := range map[string]float64{
		`caddy_webhook_events_received_total{outcome="accepted",source="m-held"}`:           1,
		`caddy_webhook_events_received_total{outcome="accepted",source="m-live"}`:           1,
		`caddy_webhook_deliveries_total{outcome="delivered",source="m-live",target="sink"}`: 1,
		`caddy_webhook_delivery_duration_seconds{source="m-live",target="sink"}`:            1,
		`caddy_webhook_jobs{source="m-held",status="pending",target="sink"}`:                1,
		`caddy_webhook_jobs{source="m-live",status="done",target="sink"}`:                   1,
	} {
		if got, ok := m[key]; !ok || got != want {
			t.Errorf("after reload: %s = %v (present %v), want %v", key, got, ok, want)
		}
	}
}

// TestRegisterMetricsTwice checks that registering again in one registry,
// as a second Provision with the same registry would, is not an error.
func TestRegisterMetricsTwice(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	app := &App{}
	for i := range 2 {
		if err := registerMetrics(reg, app); err != nil {
			t.Fatalf("registration %d: %v", i+1, err)
		}
	}
	// A store-less app yields no job samples, and gathering does not fail.
	if _, err := reg.Gather(); err != nil {
		t.Fatalf("gather: %v", err)
	}
}
