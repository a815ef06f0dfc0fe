package phases

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/loadgen"
	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/monitor"
)

func TestUpstream(t *testing.T) {
	u, err := startUpstream()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.close() })
	u.reset(2 * time.Millisecond)
	post := func(id string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, u.url(), strings.NewReader("{}"))
		if id != "" {
			req.Header.Set("X-Webhook-Delivery-Id", id)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		id   string
		want int
	}{{"a", 200}, {"b", 200}, {"a", 200}, {"", 400}} {
		if got := post(tc.id); got != tc.want {
			t.Errorf("POST with id %q = %d, want %d", tc.id, got, tc.want)
		}
	}
	ids, repeats := u.snapshot()
	if len(ids) != 2 || ids["a"] != 2 || ids["b"] != 1 || repeats != 1 || u.answered.Load() != 3 {
		t.Errorf("recorded %v, %d repeats, %d answered; want a×2, b×1, 1 repeat, 3 answered", ids, repeats, u.answered.Load())
	}
	u.reset(0)
	if ids, _ := u.snapshot(); len(ids) != 0 || u.answered.Load() != 0 {
		t.Errorf("after reset: %v, %d answered; want nothing", ids, u.answered.Load())
	}
}

func TestPhaseRounds(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	pr := &Phase{Name: "e2e"}
	// Two rounds of unequal length and speed: the figures are totals over
	// totals, not means of the rounds' rates.
	pr.addLoad(&loadgen.Result{Window: 2 * time.Second, Sent: 120, OK: 110, OKWindow: 100,
		Statuses: map[int]int64{202: 110, 503: 10}, Lat: []time.Duration{ms(3), ms(1)}})
	pr.addLoad(&loadgen.Result{Window: time.Second, Sent: 60, OK: 60, OKWindow: 50,
		Statuses: map[int]int64{202: 60}, Lat: []time.Duration{ms(2), ms(9)}})
	pr.Delivered, pr.DeliveredWindow = 90, 3*time.Second
	// The monitor's windows: the first round's start RSS is the phase's,
	// the peak the highest, and the server's counters count only where
	// both ends were read.
	pr.addWindow(monitor.Window{StartRSS: 10, EndRSS: 20, PeakRSS: 30, CPUSeconds: 1, Took: 2 * time.Second,
		Server: monitor.ServerSample{XID: 7}, ServerOK: true})
	pr.addWindow(monitor.Window{StartRSS: 15, EndRSS: 25, PeakRSS: 28, CPUSeconds: 0.5, Took: time.Second,
		Server: monitor.ServerSample{XID: 100}})
	pr.slopes = []float64{10, 30}
	pr.finish()

	tests := []struct {
		name      string
		got, want float64
	}{
		{"rate", pr.Rate, 150.0 / 3},
		{"delivered/s", pr.DeliveredRate, 30},
		{"cores", pr.Cores, 0.5},
		{"slope", pr.BacklogSlope, 20},
		{"p50 ms", float64(pr.P50) / float64(time.Millisecond), 2},
		{"p99 ms", float64(pr.P99) / float64(time.Millisecond), 9},
		{"sent", float64(pr.Load.Sent), 180},
		{"503s", float64(pr.Load.Statuses[503]), 10},
		{"start RSS", float64(pr.StartRSS), 10},
		{"end RSS", float64(pr.EndRSS), 25},
		{"peak RSS", float64(pr.PeakRSS), 30},
		{"server xacts", float64(pr.Server.Xacts), 7},
		{"server window s", pr.Server.Window.Seconds(), 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := tt.got - tt.want; d > 1e-9 || d < -1e-9 {
				t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
			}
		})
	}
	if !pr.Finished {
		t.Error("finish did not mark the phase finished")
	}
}

// TestStorageJSON checks the storage block each backend's configs carry:
// the Postgres one names the DSN by placeholder, never by value, and has
// no synchronous.
func TestStorageJSON(t *testing.T) {
	tests := []struct {
		name string
		pc   phaseConfig
		want string
	}{
		{"sqlite", phaseConfig{db: "/w/ingest-1.db", sync: "full"},
			`{"backend":"sqlite","path":"/w/ingest-1.db","synchronous":"full"}`},
		{"sqlite baseline", phaseConfig{db: "/w/b.db", sync: "normal", maxBatch: 1},
			`{"backend":"sqlite","max_batch":1,"path":"/w/b.db","synchronous":"normal"}`},
		{"postgres", phaseConfig{schema: "lt_e2e_1", sync: "full"},
			`{"backend":"postgres","dsn":"{env.WEBHOOK_LOADTEST_PG_DSN}","schema":"lt_e2e_1"}`},
		{"postgres baseline", phaseConfig{schema: "lt_baseline_1", maxBatch: 1},
			`{"backend":"postgres","dsn":"{env.WEBHOOK_LOADTEST_PG_DSN}","max_batch":1,"schema":"lt_baseline_1"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.pc.storageJSON())
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("storage = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestSchemas: every schema of a run with the longest prefix is one the
// store accepts (postgres.Config.Schema's rule).
func TestSchemas(t *testing.T) {
	storeRule := regexp.MustCompile(`^[a-z_][a-z0-9_]{0,56}$`)
	r := &runner{o: Options{SchemaPrefix: strings.Repeat("p", 32), Rounds: 99}}
	for _, s := range r.schemas() {
		if !storeRule.MatchString(s) {
			t.Errorf("schema %q is too long or malformed for the store", s)
		}
	}
}
