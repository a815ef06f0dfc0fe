package phases

import (
	"context"
	"fmt"
)

// The rules phase: ingest of 2 KB Stripe-like bodies on one target,
// paired with itself as the traced phases are: every pairSlice the
// requests switch between a receiver whose target has no filter and one
// whose target has a filter that reads two fields of the body, on the same
// Caddy and database. Both halves see the same machine at almost the same
// moments; two phases run one after the other gave ratios from 0.77 to
// 0.97 on a busy machine. The filter must cost ingest less than 5 %.

// rulesFilter is the rules phase's filter: what a user writes to send
// only large checkout sessions to a target. Every body of the phase
// matches, so both halves store the same jobs.
const rulesFilter = `body.type == "checkout.session.completed" && body.data.object.amount_total > 1000`

// rulesBodySize is the rules phase's body size, whatever -body says.
const rulesBodySize = 2048

// rulesPhase names the rules phase's results.
const rulesPhase = "rules"

// rules runs one round of the rules phase.
func (r *runner) rules(ctx context.Context) error {
	r.stripe, r.pair = true, &pairing{filter: rulesFilter}
	defer func() { r.stripe, r.pair = false, nil }()
	return r.ingest(ctx, rulesPhase, fmt.Sprintf("%s-%d.db", rulesPhase, r.round), 0, nil)
}

// stripeTemplate is a checkout.session.completed event as Stripe sends it
// (https://docs.stripe.com/api/events/object), with %s for the delivery id
// and the padding that makes the body exactly rulesBodySize bytes.
const stripeTemplate = `{"id":"%s","object":"event","api_version":"2024-06-20","created":1718900000,` +
	`"data":{"object":{"id":"cs_test_a1b2c3d4e5f6g7h8i9j0","object":"checkout.session","amount_subtotal":4200,` +
	`"amount_total":4200,"currency":"eur","customer":"cus_Q1w2e3r4t5y6u7","customer_details":{"address":` +
	`{"city":"Berlin","country":"DE","line1":"Unter den Linden 1","line2":null,"postal_code":"10117","state":null},` +
	`"email":"jenny@example.com","name":"Jenny Rosen","phone":null,"tax_exempt":"none","tax_ids":[]},` +
	`"livemode":false,"metadata":{"order_id":"6735","channel":"web"},"mode":"payment",` +
	`"payment_intent":"pi_3PqXyZ2eZvKYlo2C1a2b3c4d","payment_method_types":["card","sepa_debit"],` +
	`"payment_status":"paid","status":"complete","success_url":"https://example.com/success",` +
	`"total_details":{"amount_discount":0,"amount_shipping":0,"amount_tax":0},"line_items":[` +
	`{"id":"li_1","description":"T-shirt","quantity":2,"amount_total":3000},` +
	`{"id":"li_2","description":"Mug","quantity":1,"amount_total":1200}]},"previous_attributes":null},` +
	`"livemode":false,"pending_webhooks":1,"request":{"id":null,"idempotency_key":"8a9b0c1d-2e3f-4a5b"},` +
	`"pad":"%s","type":"checkout.session.completed"}`

// fillStripeBody writes a Stripe-like event of exactly len(b) bytes that
// names id; b must be large enough for the template.
func fillStripeBody(b []byte, id string) {
	fixed := len(stripeTemplate) - 4 + len(id) // the two %s
	pad := make([]byte, max(len(b)-fixed, 0))
	for i := range pad {
		pad[i] = 'x'
	}
	copy(b, fmt.Sprintf(stripeTemplate, id, pad))
}
