package caddywebhook

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
)

func TestParseRate(t *testing.T) {
	tests := []struct {
		in      string
		want    queue.Rate
		errWant string
	}{
		{"50/s", queue.Rate{N: 50, Per: time.Second}, ""},
		{"600/m", queue.Rate{N: 600, Per: time.Minute}, ""},
		{"1000/hour", queue.Rate{N: 1000, Per: time.Hour}, ""},
		{"5/sec", queue.Rate{N: 5, Per: time.Second}, ""},
		{"50", queue.Rate{}, "<n>/s"},
		{"0/s", queue.Rate{}, "at least 1"},
		{"x/s", queue.Rate{}, "at least 1"},
		{"5/d", queue.Rate{}, "s, m or h"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseRate(tt.in)
			if tt.errWant != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errWant) {
					t.Fatalf("parseRate(%q) = %v, %v; want an error with %q", tt.in, got, err, tt.errWant)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("parseRate(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

// TestAppCircuitBreaker runs a config whose target fails: the circuit opens
// after the configured run of failures, the jobs behind it are not charged
// attempts, stats, metrics and the CLI show the open circuit, and after
// the target recovers the probe closes it and everything is delivered.
func TestAppCircuitBreaker(t *testing.T) {
	h := newHarness(t)
	var failing atomic.Bool
	var requests atomic.Int64
	failing.Store(true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	target := httpTarget("sink", "http://"+ln.Addr().String()+"/")
	target["backoff"] = map[string]any{"base": "20ms", "max": "20ms"}
	target["circuit_breaker"] = map[string]any{"failures": 2, "cooldown": "1s"}
	// One worker: the two first jobs fail one after the other and open
	// the circuit before a third is claimed.
	h.load(t, map[string]any{"workers": 1, "poll_interval": "50ms"}, githubReceiver("cb", target))
	route := queue.Route{Source: "cb", Target: "sink"}
	for i := range 4 {
		if got := h.post(t, "cb", fmt.Sprint("d", i), "push", testBody(i)); got != http.StatusAccepted {
			t.Fatalf("post %d: status %d", i, got)
		}
	}

	q := current.Load()
	testutil.Eventually(t, func() bool { return q.Circuits()[route] == queue.CircuitOpen },
		func() string { return fmt.Sprintf("circuits %v, want %v open", q.Circuits(), route) })
	if n := requests.Load(); n != 2 {
		t.Errorf("%d requests before the circuit opened, want 2", n)
	}
	var charged int
	for _, j := range jobs(t, h.store(t)) {
		if j.Attempts > 0 {
			charged++
		}
	}
	if charged != 2 {
		t.Errorf("%d jobs charged an attempt, want 2: the rest wait uncharged", charged)
	}
	m := gather(t, activeRegistry())
	if got := m[`caddy_webhook_circuit_state{source="cb",target="sink"}`]; got != float64(queue.CircuitOpen) {
		t.Errorf("circuit_state gauge = %v, want %d (open)", got, queue.CircuitOpen)
	}
	admin := httptest.NewServer(adminMux(&adminAPI{}))
	t.Cleanup(admin.Close)
	// The cool-down is long enough for these reads: the circuit is open,
	// or at most half open if the machine stalled.
	res := runCLI(t, time.Now(), "stats", "--json", "--address", admin.Listener.Addr().String())
	var st adminapi.StatsResponse
	if err := json.Unmarshal([]byte(res.stdout), &st); err != nil {
		t.Fatalf("stats --json: %v: %s%s", err, res.stdout, res.stderr)
	}
	for _, c := range st.Counts {
		if c.Source == "cb" && c.Circuit != "open" && c.Circuit != "half_open" {
			t.Errorf("stats count %s/%s/%s: circuit %q, want open", c.Source, c.Target, c.Status, c.Circuit)
		}
	}
	res = runCLI(t, time.Now(), "stats", "--address", admin.Listener.Addr().String())
	if !strings.Contains(res.stdout, "sink (circuit open)") && !strings.Contains(res.stdout, "sink (circuit half-open)") {
		t.Errorf("stats output does not mark the open circuit:\n%s%s", res.stdout, res.stderr)
	}

	failing.Store(false)
	testutil.Eventually(t, func() bool {
		st, err := h.store(t).Stats(t.Context(), time.Now())
		return err == nil && countJobs(st, "cb", "sink", queue.StatusDone) == 4
	}, func() string { return "the 4 jobs not all delivered after the target recovered" })
	if s, ok := q.Circuits()[route]; ok {
		t.Errorf("circuit %s after recovery, want closed", s)
	}

	var opened, closed int
	for _, l := range h.logs(t) {
		switch l["msg"] {
		case "circuit opened: deliveries to the target paused":
			opened++
		case "circuit closed: deliveries to the target resumed":
			closed++
		}
	}
	if opened < 1 || closed != 1 {
		t.Errorf("logged %d openings and %d closings, want at least 1 and exactly 1", opened, closed)
	}
}

// TestAppPauseWithFlow runs a config with flow control (a target with a
// rate) and pauses one target through the admin API: the pool's claims
// then come from the flow's plan, which must leave the paused route out
// whether or not that route has limits of its own, while the other
// target keeps delivering; after the resume the paused jobs go out.
func TestAppPauseWithFlow(t *testing.T) {
	tests := []struct {
		name        string
		pausedRate  string // rate of the paused target
		deliverRate string // rate of the target that keeps delivering
	}{
		{"paused target has the rate", "1000/s", ""},
		{"other target has the rate", "", "1000/s"},
		{"both have a rate", "1000/s", "1000/s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			var pausedHits atomic.Int64
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/held" {
					pausedHits.Add(1)
				}
				w.WriteHeader(http.StatusNoContent)
			})}
			go srv.Serve(ln)
			t.Cleanup(func() { srv.Close() })
			base := "http://" + ln.Addr().String()

			held := httpTarget("held", base+"/held")
			if tt.pausedRate != "" {
				held["rate"] = tt.pausedRate
			}
			flowing := httpTarget("flowing", base+"/flowing")
			if tt.deliverRate != "" {
				flowing["rate"] = tt.deliverRate
			}
			h.load(t, map[string]any{"workers": 2, "poll_interval": "50ms"}, githubReceiver("pf", held, flowing))
			q := current.Load()
			if q.Circuits == nil {
				t.Fatal("no flow control in the running config: the test needs one")
			}

			admin := httptest.NewServer(adminMux(&adminAPI{}))
			t.Cleanup(admin.Close)
			adminPost := func(path string) {
				t.Helper()
				resp, err := http.Post(admin.URL+path, "", nil)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("POST %s: status %d", path, resp.StatusCode)
				}
			}
			adminPost("/webhook/pause?source=pf&target=held")

			const events = 5
			for i := range events {
				if got := h.post(t, "pf", fmt.Sprint("d", i), "push", testBody(i)); got != http.StatusAccepted {
					t.Fatalf("post %d: status %d", i, got)
				}
			}
			s := h.store(t)
			testutil.Eventually(t, func() bool {
				st, err := s.Stats(t.Context(), time.Now())
				return err == nil && countJobs(st, "pf", "flowing", queue.StatusDone) == events
			}, func() string { return "the unpaused target's jobs not all delivered" })
			// The claims that took the flowing target's jobs would have
			// taken the paused target's too.
			if n := pausedHits.Load(); n != 0 {
				t.Errorf("the paused target got %d deliveries", n)
			}
			for _, j := range jobs(t, s) {
				if j.Target == "held" && (j.Status != queue.StatusPending || j.Attempts != 0) {
					t.Errorf("paused job %d: status %s, %d attempts; want pending, uncharged", j.ID, j.Status, j.Attempts)
				}
			}

			adminPost("/webhook/resume?source=pf&target=held")
			testutil.Eventually(t, func() bool {
				st, err := s.Stats(t.Context(), time.Now())
				return err == nil && countJobs(st, "pf", "held", queue.StatusDone) == events
			}, func() string { return "the resumed target's jobs not all delivered" })
		})
	}
}
