package signature

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"time"
)

// Shopify signs the raw body with HMAC-SHA256 keyed with the app secret's
// bytes, base64-encoded. A new secret can take up to an hour to apply, so
// rotation (several Secrets) matters here.
//
// The delivery id is X-Shopify-Event-Id qualified by the topic,
// "<event id>:<topic>". Shopify's event id stays the same across the
// retries of a delivery, which makes it the key its guide to duplicates
// names (https://shopify.dev/docs/apps/build/webhooks/ignore-duplicates),
// but it is "shared across all deliveries produced by the same merchant
// action" (https://shopify.dev/docs/apps/build/webhooks/delivery-structure#headers):
// a checkout's orders/create and orders/paid carry one event id, and a
// receiver subscribed to both would keep the first and drop the second
// as its duplicate. X-Shopify-Webhook-Id, a key per delivery, is the
// id of last resort, for a sender that sends no event id.
const (
	headerShopifySignature = "X-Shopify-Hmac-Sha256"
	headerShopifyEventID   = "X-Shopify-Event-Id"
	headerShopifyWebhookID = "X-Shopify-Webhook-Id"
	headerShopifyTopic     = "X-Shopify-Topic"
)

func init() {
	register(&scheme{
		Scheme: Scheme{Name: SchemeShopify, Keys: KeySecrets, Forward: []string{headerShopifyTopic,
			"X-Shopify-Shop-Domain", "X-Shopify-API-Version", headerShopifyWebhookID, headerShopifyEventID,
			"X-Shopify-Triggered-At", "X-Shopify-Name"}},
		build:  func(_ Config, b base) (Verifier, error) { return &shopifyVerifier{b}, nil },
		sign:   signShopify,
		id:     []source{headerWith(headerShopifyEventID, headerShopifyTopic), header(headerShopifyWebhookID)},
		typ:    []source{header(headerShopifyTopic)},
		sender: Sender{ID: SenderIDUUID, Headers: shopifyHeaders},
	})
}

// shopifyHeaders are the headers Shopify sends with every webhook, which
// its own SDK requires (https://shopify.dev/docs/api/shopify-app-remix/v4/authenticate/webhook:
// shop, apiVersion, webhookId, topic, triggeredAt and eventId are read
// from them).
func shopifyHeaders(opts SignOptions) http.Header {
	ts := opts.Timestamp
	if ts.IsZero() {
		ts = time.Now()
	}
	return http.Header{
		"X-Shopify-Shop-Domain":  {"example.myshopify.com"},
		"X-Shopify-Api-Version":  {"2025-07"},
		"X-Shopify-Webhook-Id":   {newUUID()},
		"X-Shopify-Topic":        {"orders/create"},
		"X-Shopify-Triggered-At": {ts.UTC().Format(time.RFC3339Nano)},
		"X-Shopify-Event-Id":     {newUUID()},
	}
}

var (
	shopifyErrors  = newHeaderErrors(SchemeShopify, headerShopifySignature)
	shopifyNoMatch = fmt.Errorf("%s: %w", SchemeShopify, ErrNoMatch)
)

// shopifyVerifier verifies X-Shopify-Hmac-Sha256: <base64>. The delivery id
// is X-Shopify-Event-Id and the topic ("<event id>:<topic>"), else
// X-Shopify-Webhook-Id; the event type is X-Shopify-Topic.
type shopifyVerifier struct{ base }

// Verify implements Verifier.
func (v *shopifyVerifier) Verify(req Request) (Result, error) {
	h, body := req.Header, req.Body
	value, err := shopifyErrors.get(h, headerShopifySignature)
	if err != nil {
		return Result{}, err
	}
	var sigs sigSet
	if err := parseShopify(value, &sigs); err != nil {
		return Result{}, err
	}
	index, ok := v.find(&sigs, body)
	if !ok {
		return Result{}, shopifyNoMatch
	}
	return v.meta.result(index, h, body, ""), nil
}

// parseShopify decodes the base64 MAC, padded or not.
func parseShopify(value string, sigs *sigSet) error {
	sigs.size = sha256.Size
	if !decodeBase64(sigs.slot(), value) {
		return shopifyErrors.malformed
	}
	sigs.commit()
	return nil
}

func signShopify(secret string, body []byte, opts SignOptions) (http.Header, error) {
	h := http.Header{}
	h.Set(headerShopifySignature, base64.StdEncoding.EncodeToString(computeMAC(sha256.New, []byte(secret), body)))
	setNonEmpty(h, headerShopifyEventID, opts.ID)
	setNonEmpty(h, headerShopifyTopic, opts.EventType)
	return h, nil
}

var _ Verifier = (*shopifyVerifier)(nil)
