// Package samples holds realistic sample events of the providers whose
// signatures package signature verifies: the body a provider sends for
// an event, in its own envelope and with its own fields, and the headers
// it sends besides the signature. Each rendering has fresh ids in the
// provider's formats and timestamps of now, so a sample can be sent
// twice without being taken for a redelivery.
//
// It imports only the standard library; the samples are data files
// embedded in the package, each citing the provider's documentation it
// follows.
//
// # Use
//
//	ev, err := samples.Render("stripe", "checkout.session.completed", samples.Options{
//		Set: []string{"data.object.customer_details.email=alice@example.com"},
//	})
//	...
//	signed, err := signature.Sign(ev.Scheme, secret, ev.Body, signature.SignOptions{
//		ID: ev.DeliveryID, EventType: ev.EventType, Timestamp: ev.Time, URL: url,
//	})
//	// Send ev.Body with ev.Header and the signed headers.
//
// List and Lookup say which samples exist and where each provider puts
// the event type and the delivery id. Event.Set overrides a field, as
// `stripe trigger --override` does.
//
// # Data files
//
// The samples of a scheme live in data/<scheme>/: scheme.json holds what
// they share, and each other .json file is one event.
//
// scheme.json: "scheme" (the signature scheme), "doc" (the provider's
// page on its deliveries), "content_type", "form" (true for a
// form-encoded body), "headers" (name → value, placeholders allowed),
// "event_type" and "delivery_id" (where the provider puts them:
// {"header": name} or {"field": path}, with "option": true when the
// receiver reads the field only when event_type_field or delivery_id_field
// names it; {} when the provider sends none), and "fragments" (name → JSON
// value, shared pieces of the bodies).
//
// <event>.json: "event" (the event type as the provider names it), "doc"
// (the provider's page on this payload), "aliases" (other names Render
// takes), "headers" (added to the scheme's), and "body": a JSON object,
// or "{{use name}}" for a body that is one fragment. A form body is an
// object of strings, sent as fields in its order.
//
// # Placeholders
//
// A JSON string in a body or a header value may hold placeholders,
// {{generator arguments #label}}. The same placeholder text gets the same
// value everywhere in one rendering (a customer id repeated in a session
// and its invoice stays one customer); a #label names a second value of
// the same generator ("{{uuid #delivery}}", "{{uuid #order}}"). A string
// that is exactly one placeholder of a number generator (int, unix,
// unixms) becomes a JSON number; anywhere else a placeholder is replaced
// by its text.
//
//	{{event}}        the sample's event name
//	{{uuid}}         a random version 4 UUID
//	{{hex N}}        N random lower-case hex digits (a SHA: {{hex 40}})
//	{{alnum N}}      N random letters and digits (Stripe: cus_{{alnum 14}})
//	{{lower N}}, {{upper N}}  N random digits and lower- or upper-case letters
//	{{digits N}}     N random digits, the first not 0, as a string
//	{{int N}}        the same value as {{digits N}} (same N and label), as a number
//	{{ulid}}         a ULID in lower-case Crockford base 32 (Paddle: txn_{{ulid}})
//	{{snowflake}}    a Discord snowflake of the time
//	{{unix}}, {{unixms}}  the time in Unix seconds or milliseconds, a number
//	{{time}}         RFC 3339 in UTC, seconds: 2006-01-02T15:04:05Z
//	{{time.ms}}, {{time.us}}  the same with 3 or 6 fractional digits
//	{{time.local}}   RFC 3339 with a numeric offset, in a fixed UTC−05:00 zone, as
//	                 stores that write their local time do (Shopify, GitLab)
//	{{use name}}     the fragment called name, rendered (a whole string only)
//
// The time generators, ulid and snowflake take an offset from now:
// {{unix+30d}}, {{time.us-2m}}, {{ulid-200d}}; the units are s, m, h and d.
package samples
