package caddywebhook

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
)

func init() {
	caddy.RegisterModule(eventRecorder{})
}

// recordedEvents receives every event the test-only handler sees.
var recordedEvents = make(chan caddy.Event, 64)

// eventRecorder is a test-only events handler module, subscribed the way
// another plugin would subscribe to the webhook events.
type eventRecorder struct{}

func (eventRecorder) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "events.handlers.webhook_test_recorder",
		New: func() caddy.Module { return new(eventRecorder) },
	}
}

func (eventRecorder) Handle(_ context.Context, e caddy.Event) error {
	select {
	case recordedEvents <- e:
	default:
	}
	return nil
}

var _ caddyevents.Handler = eventRecorder{}

// TestAppEmitsCaddyEvents runs a real config with an events app and sees
// each webhook event: a permanent failure goes dead, a failing target's
// circuit opens and closes, and a rate-limited route's backlog goes stale.
// Caddy's events app and handlers: https://caddyserver.com/docs/json/apps/events/
func TestAppEmitsCaddyEvents(t *testing.T) {
	var flaky atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/dead":
			w.WriteHeader(http.StatusBadRequest)
		case "/flaky":
			if flaky.Add(1) == 1 {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	t.Cleanup(up.Close)
	for len(recordedEvents) > 0 {
		<-recordedEvents
	}

	h := newHarness(t)
	h.apps = map[string]any{"events": map[string]any{"subscriptions": []any{map[string]any{
		"events":   []string{EventJobDead, EventCircuitOpened, EventCircuitClosed, EventBacklogStale},
		"handlers": []any{map[string]any{"handler": "webhook_test_recorder"}},
	}}}}
	dead := httpTarget("dead", up.URL+"/dead", "dead")
	flakyTarget := httpTarget("flaky", up.URL+"/flaky", "flaky")
	flakyTarget["circuit_breaker"] = map[string]any{"failures": 1, "cooldown": "50ms"}
	flakyTarget["backoff"] = map[string]any{"base": "10ms", "max": "20ms"}
	slow := httpTarget("slow", up.URL+"/slow", "slow")
	slow["rate"] = "1/h"
	h.load(t, map[string]any{
		"workers": 2,
		"notify": map[string]any{"window": "50ms", "pending_age": "100ms",
			"deliver": map[string]any{"kind": "http", "url": up.URL + "/notices"}},
	}, githubReceiver("gh", dead, flakyTarget, slow))

	for i, ev := range []string{"dead", "flaky", "slow", "slow"} {
		if got := h.post(t, "gh", "d-"+ev+string(rune('0'+i)), ev, testBody(i)); got != http.StatusAccepted {
			t.Fatalf("post %s: status %d, want 202", ev, got)
		}
	}

	want := map[string]func(data map[string]any) bool{
		EventJobDead: func(d map[string]any) bool {
			return d["target"] == "dead" && d["job_id"] != nil && strings.Contains(d["error"].(string), "400")
		},
		EventCircuitOpened: func(d map[string]any) bool { return d["target"] == "flaky" },
		EventCircuitClosed: func(d map[string]any) bool { return d["target"] == "flaky" },
		EventBacklogStale:  func(d map[string]any) bool { return d["target"] == "slow" && d["pending"] != nil },
	}
	seen := map[string]bool{}
	deadline := time.After(20 * time.Second)
	for len(seen) < len(want) {
		select {
		case e := <-recordedEvents:
			check, ok := want[e.Name()]
			if !ok {
				t.Fatalf("unexpected event %q", e.Name())
			}
			d := e.Data
			if d["source"] != "gh" || !check(d) {
				t.Errorf("event %s data %v, want source gh and its route's details", e.Name(), d)
			}
			if _, ok := d["payload"]; ok {
				t.Errorf("event %s carries a payload", e.Name())
			}

			seen[e.Name()] = true

		case <-deadline:
			t.Fatalf("saw %v of the four webhook events", seen)
		}
	}
	assertNoCanaries(t, h.rawLogs(t))
}
