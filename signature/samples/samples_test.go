package samples_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/signature"
	"github.com/caddywebhook/caddywebhook/signature/samples"
)

// wanted are the samples the recipes and the seeds' users need: each must
// exist, under the scheme whose receiver verifies it.
var wanted = map[string][]string{
	"github":       {"push", "pull_request", "release", "ping", "workflow_run"},
	"stripe":       {"checkout.session.completed", "invoice.paid", "invoice.payment_failed", "customer.subscription.created", "customer.subscription.updated", "customer.subscription.deleted", "payment_intent.succeeded"},
	"polar":        {"order.paid", "subscription.created", "subscription.canceled"},
	"shopify":      {"orders/create", "orders/paid"},
	"paddle":       {"transaction.completed", "subscription.created"},
	"lemonsqueezy": {"order_created", "subscription_created"},
	"gitlab":       {"Push Hook"},
	"slack":        {"app_mention"},
	"discord":      {"APPLICATION_AUTHORIZED"},
	"twilio":       {"incoming-sms"},
}

func TestList(t *testing.T) {
	for scheme, events := range wanted {
		for _, event := range events {
			t.Run(scheme+"/"+event, func(t *testing.T) {
				info, ok := samples.Lookup(scheme, event)
				if !ok {
					t.Fatalf("no sample of %s %s", scheme, event)
				}
				if info.Scheme != scheme || info.Event != event {
					t.Errorf("Lookup(%s, %s) = %s %s", scheme, event, info.Scheme, info.Event)
				}
			})
		}
	}
	for _, info := range samples.List() {
		t.Run("described/"+info.Scheme+"/"+info.Event, func(t *testing.T) {
			if _, ok := signature.Lookup(info.Scheme); !ok {
				t.Errorf("scheme %q is not a signature scheme", info.Scheme)
			}
			if !strings.HasPrefix(info.Doc, "https://") {
				t.Errorf("Doc = %q, want the provider's page", info.Doc)
			}
			if info.ContentType == "" {
				t.Error("no ContentType")
			}
		})
	}
	if got, want := samples.Schemes(), sortedKeys(wanted); !slices.Equal(got, want) {
		t.Errorf("Schemes() = %v, want %v", got, want)
	}
	list := samples.List()
	if !slices.IsSortedFunc(list, func(a, b samples.Info) int {
		return strings.Compare(a.Scheme+"\x00"+a.Event, b.Scheme+"\x00"+b.Event)
	}) {
		t.Error("List() is not sorted by scheme and event")
	}
}

func sortedKeys(m map[string][]string) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestLookupAlias(t *testing.T) {
	info, ok := samples.Lookup("gitlab", "push")
	if !ok || info.Event != "Push Hook" {
		t.Fatalf("Lookup(gitlab, push) = %+v, %v; want the Push Hook sample", info, ok)
	}
	ev, err := samples.Render("gitlab", "push", samples.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Name != "Push Hook" || ev.EventType != "Push Hook" {
		t.Errorf("rendered %q with event type %q, want Push Hook (the header GitLab sends)", ev.Name, ev.EventType)
	}
}

func TestRenderUnknown(t *testing.T) {
	tests := []struct {
		name, scheme, event, want string
	}{
		{"unknown scheme", "nosuch", "push", `no samples for scheme "nosuch": samples exist for discord, github`},
		{"unknown event", "github", "nosuch", `no github sample of event "nosuch": there are ping, pull_request, push, release, workflow_run`},
		{"event of another scheme", "stripe", "push", `no stripe sample of event "push"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := samples.Render(tt.scheme, tt.event, samples.Options{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Render(%s, %s) error = %v, want %q", tt.scheme, tt.event, err, tt.want)
			}
			if _, ok := samples.Lookup(tt.scheme, tt.event); ok {
				t.Error("Lookup found it")
			}
		})
	}
}

// render renders a sample and fails the test on an error.
func render(t *testing.T, scheme, event string, opts samples.Options) *samples.Event {
	t.Helper()
	ev, err := samples.Render(scheme, event, opts)
	if err != nil {
		t.Fatalf("Render(%s, %s): %v", scheme, event, err)
	}
	return ev
}

// field reads the value at a dotted path of a JSON body as text: a
// string's contents or a number's digits.
func field(t *testing.T, body []byte, path string) string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("body is not JSON: %v", err)
	}
	for step := range strings.SplitSeq(path, ".") {
		switch c := v.(type) {
		case map[string]any:
			v = c[step]
		case []any:
			i, err := strconv.Atoi(step)
			if err != nil || i >= len(c) {
				t.Fatalf("%s: no element %s", path, step)
			}
			v = c[i]
		default:
			t.Fatalf("%s: %s crosses %T", path, step, v)
		}
	}
	switch v := v.(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	case nil:
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// at reads what a sample carries at loc.
func at(t *testing.T, ev *samples.Event, info samples.Info, loc samples.Location) string {
	t.Helper()
	switch {
	case loc.Header != "":
		return ev.Header.Get(loc.Header)
	case loc.Field != "" && strings.HasPrefix(info.ContentType, "application/x-www-form-urlencoded"):
		q, err := url.ParseQuery(string(ev.Body))
		if err != nil {
			t.Fatal(err)
		}
		return q.Get(loc.Field)
	case loc.Field != "":
		return field(t, ev.Body, loc.Field)
	}
	return ""
}

// TestRender renders every sample: its body is valid JSON (or a form), its
// headers are the provider's, the event type and delivery id are where the
// provider puts them, and ids and times are fresh.
func TestRender(t *testing.T) {
	now := time.Date(2031, 1, 2, 3, 4, 5, 678901000, time.UTC)
	for _, info := range samples.List() {
		t.Run(info.Scheme+"/"+info.Event, func(t *testing.T) {
			t.Parallel()
			ev := render(t, info.Scheme, info.Event, samples.Options{Now: now})
			form := strings.HasPrefix(info.ContentType, "application/x-www-form-urlencoded")
			if form {
				q, err := url.ParseQuery(string(ev.Body))
				if err != nil || len(q) == 0 {
					t.Fatalf("body %q is not a form: %v", ev.Body, err)
				}
			} else if !json.Valid(ev.Body) || ev.Body[0] != '{' {
				t.Fatalf("body is not a JSON object: %.200s", ev.Body)
			}
			if got := ev.Header.Get("Content-Type"); got != info.ContentType {
				t.Errorf("Content-Type = %q, want %q", got, info.ContentType)
			}
			if ev.Scheme != info.Scheme || ev.Name != info.Event || !ev.Time.Equal(now) {
				t.Errorf("rendered %s %s at %v, want %s %s at %v", ev.Scheme, ev.Name, ev.Time, info.Scheme, info.Event, now)
			}
			for name, values := range ev.Header {
				if strings.Contains(values[0], "{{") {
					t.Errorf("header %s = %q keeps a placeholder", name, values[0])
				}
			}
			if strings.Contains(string(ev.Body), "{{") || strings.Contains(string(ev.Body), "%7B%7B") {
				t.Errorf("body keeps a placeholder: %.300s", ev.Body)
			}

			// The event type where the provider puts it: the requested event.
			if info.EventType.IsZero() {
				if ev.EventType != "" {
					t.Errorf("EventType = %q, but %s sends none", ev.EventType, info.Scheme)
				}
			} else {
				if ev.EventType != info.Event {
					t.Errorf("EventType = %q, want %q", ev.EventType, info.Event)
				}
				if got := at(t, ev, info, info.EventType); got != info.Event {
					t.Errorf("%s = %q, want %q", info.EventType, got, info.Event)
				}
			}

			// The delivery id where the provider puts it, fresh per render;
			// without one, the body itself differs, so that its hash does.
			again := render(t, info.Scheme, info.Event, samples.Options{Now: now})
			if info.DeliveryID.IsZero() {
				if ev.DeliveryID != "" {
					t.Errorf("DeliveryID = %q, but %s sends none", ev.DeliveryID, info.Scheme)
				}
				if string(ev.Body) == string(again.Body) {
					t.Error("two renderings have the same body, so the same body hash: a redelivery to the receiver")
				}
			} else {
				if ev.DeliveryID == "" || at(t, ev, info, info.DeliveryID) != ev.DeliveryID {
					t.Errorf("DeliveryID = %q, %s = %q", ev.DeliveryID, info.DeliveryID, at(t, ev, info, info.DeliveryID))
				}
				if again.DeliveryID == ev.DeliveryID {
					t.Errorf("two renderings share the delivery id %s", ev.DeliveryID)
				}
			}

			// Timestamps of now, in the provider's format. Twilio's
			// parameters carry no time.
			if info.Scheme != "twilio" {
				formats := []string{
					strconv.FormatInt(now.Unix(), 10),
					now.Format("2006-01-02T15:04:05Z"),
					now.Format("2006-01-02T15:04:05.000000Z"),
					now.In(time.FixedZone("", -5*3600)).Format("2006-01-02T15:04:05-07:00"),
				}
				if !slices.ContainsFunc(formats, func(f string) bool { return strings.Contains(string(ev.Body), f) }) {
					t.Errorf("the body has no timestamp of now in any of %v", formats)
				}
			}
		})
	}
}

// TestSigned signs every sample as its provider does, with
// signature.Sign, and checks that the scheme's verifier accepts it with
// the sample's event type and delivery id: what our receiver reads of
// the sample is what the sample says it is.
func TestSigned(t *testing.T) {
	const secret = "whsec_c2FtcGxlLXNpZ25pbmctc2VjcmV0LWZvci10ZXN0cw=="
	const publicURL = "https://hooks.example.com/twilio/sms?tenant=42"
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range samples.List() {
		t.Run(info.Scheme+"/"+info.Event, func(t *testing.T) {
			t.Parallel()
			ev := render(t, info.Scheme, info.Event, samples.Options{})
			d, _ := signature.Lookup(info.Scheme)
			cfg := signature.Config{Scheme: info.Scheme}
			key := secret
			if d.Keys == signature.KeyPublic {
				key = hex.EncodeToString(priv.Seed())
				cfg.PublicKeys = []string{hex.EncodeToString(pub)}
			} else {
				cfg.Secrets = []string{secret}
			}
			// Where the receiver reads a value only when configured to
			// (Slack's event.type), configure it as the docs say.
			if info.EventType.Option {
				cfg.EventTypeField = info.EventType.Field
			}
			if info.DeliveryID.Option {
				cfg.DeliveryIDField = info.DeliveryID.Field
			}
			v, err := signature.New(cfg)
			if err != nil {
				t.Fatal(err)
			}

			signed, err := signature.Sign(info.Scheme, key, ev.Body, signature.SignOptions{
				ID: ev.DeliveryID, EventType: ev.EventType, Timestamp: ev.Time, URL: publicURL,
			})
			if err != nil {
				t.Fatal(err)
			}
			h := ev.Header.Clone()
			for name, values := range signed {
				// A header both set must agree: the sample's delivery id
				// and event type are the ones Sign writes.
				if have := h.Get(name); have != "" && have != values[0] {
					t.Errorf("header %s: sample %q, Sign %q", name, have, values[0])
				}
				h[name] = values
			}
			req := signature.Request{Method: http.MethodPost, URL: publicURL, Header: h, Body: ev.Body}
			if err := signature.CheckHeaders(v, req); err != nil {
				t.Fatalf("CheckHeaders: %v", err)
			}
			if hs, ok := v.(signature.Handshaker); ok {
				if _, isHandshake, err := hs.Handshake(req); err != nil || isHandshake {
					t.Fatalf("the sample is taken for a handshake (%v, %v)", isHandshake, err)
				}
			}
			res, err := v.Verify(req)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if res.EventType != ev.EventType {
				t.Errorf("receiver's event type %q, sample's %q", res.EventType, ev.EventType)
			}
			wantID := ev.DeliveryID
			if info.Scheme == signature.SchemeShopify {
				// The receiver qualifies Shopify's event id, which every
				// topic of one merchant action shares, with the topic.
				wantID += ":" + ev.EventType
			}
			if wantID == "" {
				sum := sha256.Sum256(ev.Body)
				wantID = "sha256:" + hex.EncodeToString(sum[:])
			}
			if res.DeliveryID != wantID {
				t.Errorf("receiver's delivery id %q, want %q", res.DeliveryID, wantID)
			}
		})
	}
}

// TestDeliveryIDOption: Options.DeliveryID replaces the fresh id where
// the provider carries it, and the receiver deduplicates on it.
func TestDeliveryIDOption(t *testing.T) {
	tests := []struct {
		name, scheme, event string
		wantErr             string
	}{
		{"header", "github", "push", ""},
		{"body field", "stripe", "invoice.paid", ""},
		{"signed header", "polar", "order.paid", ""},
		{"none sent", "twilio", "incoming-sms", "twilio sends no delivery id"},
		{"none sent, JSON", "lemonsqueezy", "order_created", "lemonsqueezy sends no delivery id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := samples.Render(tt.scheme, tt.event, samples.Options{DeliveryID: "redelivery-7"})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			info, _ := samples.Lookup(tt.scheme, tt.event)
			if ev.DeliveryID != "redelivery-7" || at(t, ev, info, info.DeliveryID) != "redelivery-7" {
				t.Errorf("DeliveryID = %q, %s = %q", ev.DeliveryID, info.DeliveryID, at(t, ev, info, info.DeliveryID))
			}
		})
	}
}

// TestSet: an override changes what a JSON field reader sees: the test's
// own decoder, and the receiver's reader (signature's, through the
// ordering key field, which reads any path of the verified body).
func TestSet(t *testing.T) {
	tests := []struct {
		name, scheme, event string
		set                 []string
		path, want          string // a JSON path and the text read there
		// array: the path indexes an array, which the receiver's reader
		// (members joined with dots) does not.
		array bool
	}{
		{"string", "stripe", "checkout.session.completed",
			[]string{"data.object.customer_details.email=alice@example.com"},
			"data.object.customer_details.email", "alice@example.com", false},
		{"number", "stripe", "checkout.session.completed",
			[]string{"data.object.amount_total=2000"},
			"data.object.amount_total", "2000", false},
		{"JSON string of digits", "stripe", "payment_intent.succeeded",
			[]string{`data.object.metadata.order_id="1043"`},
			"data.object.metadata.order_id", "1043", false},
		{"object replaces a member's value", "stripe", "checkout.session.completed",
			[]string{`data.object.metadata={"plan":"pro","seats":3}`},
			"data.object.metadata", `{"plan":"pro","seats":3}`, false},
		{"index in brackets", "stripe", "invoice.paid",
			[]string{"data.object.lines.data[0].amount=1500"},
			"data.object.lines.data.0.amount", "1500", true},
		{"index as a segment", "github", "push",
			[]string{"commits.0.message=Release v2"},
			"commits.0.message", "Release v2", true},
		{"later override wins", "polar", "order.paid",
			[]string{"data.customer.email=a@example.com", "data.customer.email=b@example.com"},
			"data.customer.email", "b@example.com", false},
		{"null", "github", "pull_request",
			[]string{"pull_request.body=null"},
			"pull_request.body", "", false},
		{"a value with =", "shopify", "orders/create",
			[]string{"note=a=b"},
			"note", "a=b", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := render(t, tt.scheme, tt.event, samples.Options{Set: tt.set})
			if got := field(t, ev.Body, tt.path); got != tt.want {
				t.Errorf("%s = %q, want %q", tt.path, got, tt.want)
			}
			// The receiver's own reader, on the signed request.
			v, err := signature.New(signature.Config{Scheme: tt.scheme, Secrets: []string{"s3cret-s3cret"}, OrderingKeyField: tt.path})
			if err != nil {
				t.Fatal(err)
			}
			h, err := signature.Sign(tt.scheme, "s3cret-s3cret", ev.Body, signature.SignOptions{ID: ev.DeliveryID, EventType: ev.EventType, Timestamp: ev.Time})
			if err != nil {
				t.Fatal(err)
			}
			res, err := v.Verify(signature.Request{Method: http.MethodPost, Header: h, Body: ev.Body})
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(tt.want, "{") || tt.array {
				return // the reader reads scalars, through members only
			}
			if res.OrderingKey != tt.want {
				t.Errorf("the receiver reads %s = %q, want %q", tt.path, res.OrderingKey, tt.want)
			}
		})
	}
}

// TestSetFollows: an override of the field that holds the event type or
// the delivery id changes them, and the receiver reads the new ones.
func TestSetFollows(t *testing.T) {
	ev := render(t, "stripe", "invoice.paid", samples.Options{Set: []string{"type=invoice.finalized", "id=evt_fixed"}})
	if ev.EventType != "invoice.finalized" || ev.DeliveryID != "evt_fixed" {
		t.Fatalf("EventType %q, DeliveryID %q after set", ev.EventType, ev.DeliveryID)
	}
	v, err := signature.New(signature.Config{Scheme: "stripe", Secrets: []string{"whsec_x"}})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := signature.Sign("stripe", "whsec_x", ev.Body, signature.SignOptions{Timestamp: ev.Time})
	res, err := v.Verify(signature.Request{Method: http.MethodPost, Header: h, Body: ev.Body})
	if err != nil {
		t.Fatal(err)
	}
	if res.EventType != "invoice.finalized" || res.DeliveryID != "evt_fixed" {
		t.Errorf("receiver: %q %q", res.EventType, res.DeliveryID)
	}

	// Set on a rendered event, as a library caller does.
	ev = render(t, "paddle", "transaction.completed", samples.Options{})
	if err := ev.Set("event_id", "evt_01hv8x2acma2gz5w4ht6ms9ymj"); err != nil {
		t.Fatal(err)
	}
	if ev.DeliveryID != "evt_01hv8x2acma2gz5w4ht6ms9ymj" || field(t, ev.Body, "event_id") != ev.DeliveryID {
		t.Errorf("DeliveryID %q, body event_id %q", ev.DeliveryID, field(t, ev.Body, "event_id"))
	}
}

func TestSetForm(t *testing.T) {
	ev := render(t, "twilio", "incoming-sms", samples.Options{Set: []string{
		"Body=Hi & bye", "NumMedia=1", "MediaUrl0=https://api.twilio.com/media/ME1",
	}})
	q, err := url.ParseQuery(string(ev.Body))
	if err != nil {
		t.Fatal(err)
	}
	if q.Get("Body") != "Hi & bye" || q.Get("NumMedia") != "1" || q.Get("MediaUrl0") != "https://api.twilio.com/media/ME1" {
		t.Errorf("form after set: %v", q)
	}
	if len(q["Body"]) != 1 {
		t.Errorf("Body appears %d times", len(q["Body"]))
	}
	// The field the body lacked comes last, as the provider appends it.
	if !strings.HasSuffix(string(ev.Body), "&MediaUrl0=https%3A%2F%2Fapi.twilio.com%2Fmedia%2FME1") {
		t.Errorf("body %s", ev.Body)
	}
}

func TestSetErrors(t *testing.T) {
	tests := []struct {
		name, scheme, event, set, want string
	}{
		{"missing member", "stripe", "checkout.session.completed", "data.object.customer_detail.email=x",
			`set data.object.customer_detail.email: data.object has no member "customer_detail" (it has id, object, `},
		{"crosses a string", "stripe", "checkout.session.completed", "data.object.customer.email=x",
			"set data.object.customer.email: data.object.customer is a string, not an object"},
		{"crosses null", "stripe", "checkout.session.completed", "data.object.invoice.id=x",
			"set data.object.invoice.id: data.object.invoice is null, not an object"},
		{"crosses a number", "github", "push", "repository.id.x=1",
			"repository.id is a number, not an object"},
		{"index out of range", "stripe", "invoice.paid", "data.object.lines.data[3].amount=1",
			"data.object.lines.data has 1 elements: [3] does not exist"},
		{"index on an object", "stripe", "invoice.paid", "data[0]=1",
			"set data[0]: data is an object, not an array"},
		{"member of an array", "stripe", "invoice.paid", "data.object.lines.data.amount=1",
			"data.object.lines.data is an array, not an object"},
		{"top-level missing", "github", "ping", "zen2=x", `the body has no member "zen2"`},
		{"empty segment", "github", "ping", "hook..id=1", `path "hook..id" has an empty segment`},
		{"bad index", "github", "ping", "hook.events[x]=1", "an index is written [n]"},
		{"empty path", "github", "ping", "=1", "the path is empty"},
		{"no equals sign", "github", "ping", "zen", `set "zen": write it as path=value`},
		{"empty form field", "twilio", "incoming-sms", "=x", "set: the field name is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := samples.Render(tt.scheme, tt.event, samples.Options{Set: []string{tt.set}})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want %q", err, tt.want)
			}
		})
	}
}

// Example shows what `caddy webhook sign` does without --body: a sample,
// signed as its provider signs it, with the provider's other headers.
func Example() {
	ev, err := samples.Render("github", "push", samples.Options{
		Set: []string{"ref=refs/heads/release"},
	})
	if err != nil {
		panic(err)
	}
	signed, err := signature.Sign(ev.Scheme, "It's a Secret to Everybody", ev.Body, signature.SignOptions{
		ID: ev.DeliveryID, EventType: ev.EventType, Timestamp: ev.Time,
	})
	if err != nil {
		panic(err)
	}
	h := ev.Header.Clone()
	for name, values := range signed {
		h[name] = values
	}
	fmt.Println(h.Get("X-GitHub-Event"), h.Get("X-GitHub-Delivery") == ev.DeliveryID, strings.HasPrefix(h.Get("X-Hub-Signature-256"), "sha256="))
	// Output: push true true
}

// TestRenderConcurrent: renderings share the loaded templates, never
// their memory; -race holds the proof.
func TestRenderConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	bodies := make([]string, 8)
	for i := range bodies {
		wg.Go(func() {
			ev, err := samples.Render("twilio", "incoming-sms", samples.Options{Set: []string{fmt.Sprintf("MediaUrl%d=https://example.com/%d", i, i)}})
			if err != nil {
				t.Error(err)
				return
			}
			bodies[i] = string(ev.Body)
		})
	}
	wg.Wait()
	for i, b := range bodies {
		if !strings.HasSuffix(b, fmt.Sprintf("&MediaUrl%d=https%%3A%%2F%%2Fexample.com%%2F%d", i, i)) {
			t.Errorf("rendering %d: %s", i, b)
		}
		if strings.Count(b, "MediaUrl") != 1 {
			t.Errorf("rendering %d has another's field: %s", i, b)
		}
	}
}

// TestSetLeavesTheTemplate: an override changes its own rendering only;
// the next rendering of the sample has the sample's value. A number, a
// boolean and null are literals of the template, which a rendering must
// not share.
func TestSetLeavesTheTemplate(t *testing.T) {
	t.Parallel()
	for _, set := range []string{"data.object.amount_due=990000", "data.object.livemode=true", "data.object.customer_email=null"} {
		path, _, _ := strings.Cut(set, "=")
		first, err := samples.Render("stripe", "invoice.payment_failed", samples.Options{})
		if err != nil {
			t.Fatal(err)
		}
		want := lookupText(t, first.Body, path)
		if _, err := samples.Render("stripe", "invoice.payment_failed", samples.Options{Set: []string{set}}); err != nil {
			t.Fatal(err)
		}
		again, err := samples.Render("stripe", "invoice.payment_failed", samples.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := lookupText(t, again.Body, path); got != want {
			t.Errorf("after --set %s, a new rendering has %s = %s, want the sample's %s", set, path, got, want)
		}
	}
}

// lookupText is the JSON text of the value at the dotted path of body.
func lookupText(t *testing.T, body []byte, path string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	for _, k := range strings.Split(path, ".") {
		v = v.(map[string]any)[k]
	}
	b, _ := json.Marshal(v)
	return string(b)
}
