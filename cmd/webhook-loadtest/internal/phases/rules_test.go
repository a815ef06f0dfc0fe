package phases

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddywebhook/caddywebhook/caddywebhook/rules"
	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/loadgen"
)

func TestFillStripeBody(t *testing.T) {
	tests := []struct {
		name string
		id   string
	}{
		{name: "short id", id: "r-1-2-3"},
		{name: "long id", id: loadgen.DeliveryID("rules-3", 31, 4_000_000_000)},
	}
	f, err := rules.CompileFilter([]string{rulesFilter}, rules.Options{})
	if err != nil {
		t.Fatalf("the phase's filter: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := make([]byte, rulesBodySize)
			fillStripeBody(b, tt.id)
			var ev struct {
				ID   string `json:"id"`
				Type string `json:"type"`
			}
			if err := json.Unmarshal(b, &ev); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, b)
			}
			if ev.ID != tt.id || ev.Type != "checkout.session.completed" || strings.Contains(string(b), "\x00") {
				t.Errorf("body %s", b)
			}
			if ok, err := f.Match(rules.NewInput(&rules.Event{Body: b})); !ok || err != nil {
				t.Errorf("the phase's filter does not take the body: %v, %v", ok, err)
			}
		})
	}
}

// TestRulesPairConfig: the rules phase's config has the plain receiver on
// pathHook and, on pathHookFiltered, a receiver of its own source whose
// target has the filter, so the two halves differ in the filter alone.
func TestRulesPairConfig(t *testing.T) {
	raw, err := caddyJSON(phaseConfig{db: "/tmp/x.db", upstream: "http://127.0.0.1:1/noop", pairFilter: rulesFilter,
		adminAddr: "127.0.0.1:1", httpAddr: "127.0.0.1:2"})
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Apps struct {
			HTTP struct {
				Servers map[string]struct {
					Routes []struct {
						Match  []struct{ Path []string }
						Handle []map[string]any
					}
				}
			}
		}
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	filters := map[string]any{} // by path: the target's filter
	sources := map[string]any{}
	for _, srv := range cfg.Apps.HTTP.Servers {
		for _, r := range srv.Routes {
			h := r.Handle[0]
			if h["handler"] != "webhook_receiver" {
				continue
			}
			path := r.Match[0].Path[0]
			sources[path] = h["source"]
			filters[path] = h["targets"].([]any)[0].(map[string]any)["filter"]
		}
	}
	if filters[pathHook] != nil || filters[pathHookFiltered] != rulesFilter {
		t.Errorf("filters by path %v, want none on %s and the phase's on %s", filters, pathHook, pathHookFiltered)
	}
	if sources[pathHook] != source || sources[pathHookFiltered] != sourceFiltered {
		t.Errorf("sources by path %v", sources)
	}
}
