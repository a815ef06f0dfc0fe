package caddywebhook

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/caddywebhook/caddywebhook/signature"
)

// TestShopifyTopicsOfOneAction: Shopify sends the topics one merchant
// action causes (a checkout's orders/create and orders/paid) with one
// X-Shopify-Event-Id; a receiver subscribed to both stores each, and takes
// a retry of either for the duplicate it is.
func TestShopifyTopicsOfOneAction(t *testing.T) {
	h := newHarness(t)
	rc := githubReceiver("shop", httpTarget("", "http://127.0.0.1:9/"))
	rc["scheme"] = "shopify"
	h.load(t, map[string]any{"workers": 0}, rc)
	send := func(topic, webhookID string) response {
		t.Helper()
		body := []byte(`{"id":820982911946154508}`)
		hdr, err := signature.Sign(signature.SchemeShopify, testSecret, body, signature.SignOptions{ID: "e-checkout-1", EventType: topic})
		if err != nil {
			t.Fatal(err)
		}
		hdr.Set("X-Shopify-Webhook-Id", webhookID)
		hdr.Set("Content-Type", "application/json")
		return h.do(t, http.MethodPost, "/hooks/shop", hdr, bytes.NewReader(body))
	}
	tests := []struct {
		name, topic, webhookID string
		wantEvents             int
	}{
		{name: "orders/create", topic: "orders/create", webhookID: "w-1", wantEvents: 1},
		{name: "orders/paid of the same action", topic: "orders/paid", webhookID: "w-2", wantEvents: 2},
		{name: "a retry of orders/create", topic: "orders/create", webhookID: "w-1", wantEvents: 2},
	}
	for _, tt := range tests {
		if r := send(tt.topic, tt.webhookID); r.status != http.StatusAccepted {
			t.Fatalf("%s: status %d", tt.name, r.status)
		}
		if got := len(jobs(t, h.store(t))); got != tt.wantEvents {
			t.Errorf("%s: %d jobs, want %d", tt.name, got, tt.wantEvents)
		}
	}
	for _, j := range jobs(t, h.store(t)) {
		if j.DeliveryID != "e-checkout-1:"+j.EventType {
			t.Errorf("job %d: delivery id %q, want the event id and its topic", j.ID, j.DeliveryID)
		}
	}
}
