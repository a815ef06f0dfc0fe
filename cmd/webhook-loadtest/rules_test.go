package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddywebhook/caddywebhook/caddywebhook/rules"
)

func TestFillStripeBody(t *testing.T) {
	tests := []struct {
		name string
		id   string
	}{
		{name: "short id", id: "r-1-2-3"},
		{name: "long id", id: deliveryID("rules-filter-3", 31, 4_000_000_000)},
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
