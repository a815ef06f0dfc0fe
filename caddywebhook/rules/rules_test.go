package rules

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// stripeBody is a checkout.session.completed event as Stripe sends it
// (https://docs.stripe.com/api/events/object), trimmed to about 2 KB.
const stripeBody = `{
  "id": "evt_1PqXyZ2eZvKYlo2C0a1b2c3d",
  "object": "event",
  "api_version": "2024-06-20",
  "created": 1718900000,
  "data": {
    "object": {
      "id": "cs_test_a1b2c3d4e5f6g7h8i9j0",
      "object": "checkout.session",
      "amount_subtotal": 4200,
      "amount_total": 4200,
      "currency": "eur",
      "customer": "cus_Q1w2e3r4t5y6u7",
      "customer_details": {
        "address": {"city": "Berlin", "country": "DE", "line1": "Unter den Linden 1", "line2": null, "postal_code": "10117", "state": null},
        "email": "jenny@example.com",
        "name": "Jenny Rosen",
        "phone": null,
        "tax_exempt": "none",
        "tax_ids": []
      },
      "livemode": false,
      "metadata": {"order_id": "6735", "channel": "web"},
      "mode": "payment",
      "payment_intent": "pi_3PqXyZ2eZvKYlo2C1a2b3c4d",
      "payment_method_types": ["card", "sepa_debit"],
      "payment_status": "paid",
      "status": "complete",
      "success_url": "https://example.com/success?session_id={CHECKOUT_SESSION_ID}",
      "total_details": {"amount_discount": 0, "amount_shipping": 0, "amount_tax": 0},
      "line_items": [
        {"id": "li_1", "description": "T-shirt", "quantity": 2, "amount_total": 3000},
        {"id": "li_2", "description": "Mug", "quantity": 1, "amount_total": 1200}
      ]
    },
    "previous_attributes": null
  },
  "livemode": false,
  "pending_webhooks": 1,
  "request": {"id": null, "idempotency_key": "8a9b0c1d-2e3f-4a5b-6c7d-8e9f0a1b2c3d"},
  "type": "checkout.session.completed"
}`

func stripeEvent() *Event {
	return &Event{
		Body:       []byte(stripeBody),
		Header:     http.Header{"Content-Type": {"application/json"}, "Stripe-Signature": {"t=1,v1=ab"}, "X-Multi": {"first", "second"}},
		RawQuery:   "tenant=acme&tenant=other",
		EventType:  "checkout.session.completed",
		Source:     "stripe",
		DeliveryID: "evt_1PqXyZ2eZvKYlo2C0a1b2c3d",
	}
}

func mustFilter(t *testing.T, srcs ...string) *Filter {
	t.Helper()
	f, err := CompileFilter(srcs, Options{})
	if err != nil {
		t.Fatalf("CompileFilter(%q): %v", srcs, err)
	}
	return f
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name      string
		src       []string
		line, col int
		msg       string // a substring of the message
		wrapped   string // the prefix CompileFilter adds, if any
	}{
		{name: "undeclared variable", src: []string{`bdy.ref == "x"`}, line: 1, col: 1, msg: "undeclared reference to 'bdy'"},
		{name: "syntax error on the second line", src: []string{"body.ref ==\n  )"}, line: 2, col: 3, msg: "Syntax error"},
		{name: "unclosed string", src: []string{`body.ref == "refs/heads/main`}, line: 1, col: 13, msg: "Syntax error"},
		{name: "not a bool", src: []string{`1 + 1`}, line: 1, col: 1, msg: "yields int; want bool"},
		{name: "unknown function", src: []string{`body.ref.startsWth("x")`}, line: 1, col: 19, msg: "undeclared reference to 'startsWth'"},
		{name: "get with a non-string path", src: []string{`get(body, 1, 2) == 2`}, line: 1, col: 4, msg: "no matching overload"},
		{name: "second of two filters", src: []string{`true`, `event_type == `}, line: 1, col: 15, msg: "Syntax error", wrapped: "filter 2: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := CompileFilter(tt.src, Options{})
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *CompileError", err)
			}
			if ce.Line != tt.line || ce.Column != tt.col || !strings.Contains(ce.Message, tt.msg) {
				t.Errorf("got line %d column %d %q, want line %d column %d containing %q", ce.Line, ce.Column, ce.Message, tt.line, tt.col, tt.msg)
			}
			if !strings.HasPrefix(err.Error(), tt.wrapped+"line ") {
				t.Errorf("err = %q, want it to start %q", err, tt.wrapped+"line ")
			}
		})
	}
	t.Run("empty", func(t *testing.T) {
		if _, err := CompileFilter([]string{"  "}, Options{}); err == nil || err.Error() != "empty expression" {
			t.Errorf("err = %v, want empty expression", err)
		}
	})
	t.Run("in container is not shown", func(t *testing.T) {
		_, err := CompileFilter([]string{`nope`}, Options{})
		if err == nil || strings.Contains(err.Error(), "container") {
			t.Errorf("err = %v", err)
		}
	})
}

func TestVariables(t *testing.T) {
	tests := []struct {
		name string
		src  string
	}{
		{name: "body field", src: `body.type == "checkout.session.completed"`},
		{name: "body nested field", src: `body.data.object.customer_details.address.city == "Berlin"`},
		{name: "body number against an int", src: `body.data.object.amount_total > 1000 && body.data.object.amount_total == 4200`},
		{name: "body list", src: `body.data.object.line_items.exists(i, i.description == "Mug")`},
		{name: "body null field", src: `body.data.previous_attributes == null`},
		{name: "raw", src: `raw.size() == ` + itoa(len(stripeBody)) + ` && string(raw).contains("jenny@example.com")`},
		{name: "headers lower-case", src: `headers["content-type"] == "application/json" && headers["stripe-signature"] == "t=1,v1=ab"`},
		{name: "headers first value", src: `headers["x-multi"] == "first"`},
		{name: "headers absent key", src: `!("x-absent" in headers)`},
		{name: "query first value", src: `query.tenant == "acme"`},
		{name: "event_type", src: `event_type == "checkout.session.completed"`},
		{name: "source", src: `source == "stripe"`},
		{name: "delivery_id", src: `delivery_id.startsWith("evt_")`},
		{name: "has", src: `has(body.data.object.metadata.order_id) && !has(body.data.object.refund)`},
		{name: "get present", src: `get(body, "data.object.metadata.order_id", "") == "6735"`},
		{name: "get absent", src: `get(body, "data.object.refund.amount", 0) == 0`},
		{name: "get list index", src: `get(body, "data.object.line_items.1.description", "") == "Mug"`},
		{name: "get list index out of range", src: `get(body, "data.object.line_items.7.description", "none") == "none"`},
		{name: "get through null", src: `get(body, "data.previous_attributes.x", "d") == "d"`},
		{name: "get through a string", src: `get(body, "type.x", "d") == "d"`},
		{name: "optional field", src: `body.?data.?object.?refund.orValue("none") == "none"`},
		{name: "strings extension", src: `body.data.object.currency.upperAscii() == "EUR"`},
		{name: "ANDed filters", src: `event_type == "checkout.session.completed"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := mustFilter(t, tt.src, `source == "stripe"`)
			ok, err := f.Match(NewInput(stripeEvent()))
			if err != nil || !ok {
				t.Errorf("Match = %v, %v; want true", ok, err)
			}
		})
	}
	t.Run("ANDed, one false", func(t *testing.T) {
		f := mustFilter(t, `source == "stripe"`, `event_type == "invoice.paid"`)
		if ok, err := f.Match(NewInput(stripeEvent())); ok || err != nil {
			t.Errorf("Match = %v, %v; want false, nil", ok, err)
		}
	})
	t.Run("nil filter takes everything", func(t *testing.T) {
		var f *Filter
		if ok, err := f.Match(NewInput(stripeEvent())); !ok || err != nil {
			t.Errorf("Match = %v, %v; want true, nil", ok, err)
		}
	})
}

func itoa(n int) string {
	var b []byte
	for n > 0 || len(b) == 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}

func TestEvaluationErrors(t *testing.T) {
	tests := []struct {
		name string
		body string
		src  string
		want string
	}{
		{name: "missing field", body: stripeBody, src: `body.data.object.refund.amount > 0`, want: "no such key: refund"},
		{name: "missing top-level field", body: `{"a":1}`, src: `body.ref == "refs/heads/main"`, want: "no such key: ref"},
		{name: "missing header", body: stripeBody, src: `headers["x-absent"] == "1"`, want: "no such key: x-absent"},
		{name: "field of a non-JSON body", body: `a=1&b=2`, src: `body.a == "1"`, want: ""},
		{name: "not a bool at run time", body: `{"a":"yes"}`, src: `body.a`, want: "filter yields string, not a bool"},
		{name: "list index out of range", body: `{"a":[]}`, src: `body.a[0] == 1`, want: "index out of bounds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := mustFilter(t, tt.src)
			in := NewInput(&Event{Body: []byte(tt.body), Header: http.Header{}})
			ok, err := f.Match(in)
			if ok || err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Match = %v, %v; want false and an error containing %q", ok, err, tt.want)
			}
		})
	}
}

func TestNonJSONBody(t *testing.T) {
	tests := []struct {
		name string
		body string
	}{
		{name: "form", body: "a=1&b=2"},
		{name: "empty", body: ""},
		{name: "truncated", body: `{"a": 1`},
		{name: "two documents", body: `{} {}`},
		{name: "binary", body: "\x00\xff\xfe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := mustFilter(t, `body == null && raw == b"`+escapeBytes(tt.body)+`"`)
			ok, err := f.Match(NewInput(&Event{Body: []byte(tt.body)}))
			if !ok || err != nil {
				t.Errorf("Match = %v, %v; want body null and raw the bytes", ok, err)
			}
		})
	}
	t.Run("JSON scalar is not null", func(t *testing.T) {
		f := mustFilter(t, `body == "just a string"`)
		if ok, err := f.Match(NewInput(&Event{Body: []byte(`"just a string"`)})); !ok || err != nil {
			t.Errorf("Match = %v, %v", ok, err)
		}
	})
}

func escapeBytes(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteString(`\x`)
		b.WriteByte("0123456789abcdef"[s[i]>>4])
		b.WriteByte("0123456789abcdef"[s[i]&15])
	}
	return b.String()
}

func TestBodyParsedOnlyWhenRead(t *testing.T) {
	in := NewInput(stripeEvent())
	f := mustFilter(t, `headers["content-type"] == "application/json" && event_type != ""`)
	if ok, err := f.Match(in); !ok || err != nil {
		t.Fatalf("Match = %v, %v", ok, err)
	}
	if in.BodyParsed() {
		t.Fatal("a filter that does not read body parsed it")
	}
	g := mustFilter(t, `body.type == event_type`)
	if ok, err := g.Match(in); !ok || err != nil {
		t.Fatalf("Match = %v, %v", ok, err)
	}
	if !in.BodyParsed() {
		t.Fatal("a filter that reads body did not parse it")
	}
	// A second rule on the same Input reuses the parse: the cached value
	// is the one returned.
	first, _ := in.ResolveName("body")
	second, _ := in.ResolveName("body")
	if first != second {
		t.Error("body was parsed twice")
	}
}

// largeListBody is a JSON body holding a list of n numbers.
func largeListBody(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"items":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(itoa(i))
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

func TestCostLimit(t *testing.T) {
	// A quadratic comprehension over 20,000 items is 4e8 steps: minutes
	// of CPU if run to the end. The cost limit stops it at the limit.
	body := largeListBody(20000)
	const src = `body.items.map(x, body.items.filter(y, y == x).size()).size() > 0`
	tests := []struct {
		name string
		opts Options
		want string
	}{
		// cel-go's cost tracker slows down inside a long comprehension, so
		// with the default cost limit the time limit is what stops it.
		{name: "defaults", want: "time limit exceeded"},
		{name: "cost limit", opts: Options{CostLimit: 10_000, TimeLimit: time.Hour}, want: "actual cost limit exceeded"},
		{name: "time limit", opts: Options{TimeLimit: time.Millisecond}, want: "time limit exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := CompileFilter([]string{src}, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			ok, err := f.Match(NewInput(&Event{Body: body}))
			if ok || err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Match = %v, %v; want %q to stop it", ok, err, tt.want)
			}
		})
	}
	t.Run("a straight-line rule on a large body", func(t *testing.T) {
		// No loop, so no clock: the cost limit alone bounds it, and a
		// string function's cost grows with its input.
		big := &Event{Body: []byte(strings.Repeat("a", 4<<20))}
		f, err := CompileFilter([]string{`string(raw).contains("b") || string(raw).contains("c") || string(raw).contains("d")`}, Options{CostLimit: 100_000})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := f.Match(NewInput(big)); ok || err == nil || !strings.Contains(err.Error(), "cost limit exceeded") {
			t.Errorf("Match = %v, %v; want the cost limit", ok, err)
		}
	})
	t.Run("a cheap rule on the same body runs", func(t *testing.T) {
		f := mustFilter(t, `body.items.size() == 20000 && body.items[19999] == 19999`)
		if ok, err := f.Match(NewInput(&Event{Body: body})); !ok || err != nil {
			t.Errorf("Match = %v, %v", ok, err)
		}
	})
	t.Run("transform", func(t *testing.T) {
		tr, err := CompileTransform(&TransformConfig{Body: `{"n": body.items.map(x, body.items.filter(y, y == x).size())}`}, Options{CostLimit: 10_000, TimeLimit: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Apply(NewInput(&Event{Body: body})); err == nil || !strings.Contains(err.Error(), "cost limit exceeded") {
			t.Fatalf("Apply err = %v; want the cost limit", err)
		}
	})
}

func TestLazyJSON(t *testing.T) {
	const body = `{"a": {"b": [1, {"c": "d"}], "e\u0066": "escaped key", "s": "q\"uote\\", "u": "\u00e9"},
	  "dup": 1, "dup": 2, "n": -1.5e2, "t": true, "f": false, "z": null, "empty": {}, "x": "}]\"{["}`
	tests := []struct {
		name string
		src  string
	}{
		{name: "nested list in an object", src: `body.a.b[1].c == "d"`},
		{name: "escaped key", src: `body.a.ef == "escaped key"`},
		{name: "escapes in a value", src: `body.a.s == "q\"uote\\"`},
		{name: "unicode escape", src: `body.a.u == "é"`},
		{name: "last duplicate wins", src: `body.dup == 2`},
		{name: "number", src: `body.n == -150`},
		{name: "bools and null", src: `body.t && !body.f && body.z == null`},
		{name: "brackets inside a string", src: `body.x == "}]\"{["`},
		{name: "in", src: `"dup" in body && !("nope" in body) && "b" in body.a`},
		{name: "has", src: `has(body.a.b) && !has(body.a.nope)`},
		{name: "size", src: `size(body) == 8 && size(body.empty) == 0`},
		{name: "type", src: `type(body) == map && type(body.a.b) == list`},
		{name: "equality with a literal", src: `body.a.b[1] == {"c": "d"} && body.empty == {} && body != null`},
		{name: "iteration", src: `body.exists(k, k == "x") && body.a.all(k, k in ["b", "ef", "s", "u"])`},
		{name: "get", src: `get(body, "a.b.1.c", "") == "d" && get(body, "a.b.2", 0) == 0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := mustFilter(t, tt.src)
			if ok, err := f.Match(NewInput(&Event{Body: []byte(body)})); !ok || err != nil {
				t.Errorf("Match = %v, %v; want true", ok, err)
			}
		})
	}
	t.Run("transform output", func(t *testing.T) {
		tr, err := CompileTransform(&TransformConfig{Body: `body.a`}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := tr.Apply(NewInput(&Event{Body: []byte(body)}))
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"b":[1,{"c":"d"}],"ef":"escaped key","s":"q\"uote\\","u":"é"}`; string(r.Body) != want {
			t.Errorf("body = %s, want %s", r.Body, want)
		}
	})
}

// TestLazyObjectGetMissing: Get of a missing key is an error value naming
// the key, not a panic (cel's own paths use Find; traits.Indexer callers
// use Get).
func TestLazyObjectGetMissing(t *testing.T) {
	tests := []struct {
		name string
		key  ref.Val
		want string
	}{
		{"string key", types.String("nope"), "no such key: nope"},
		{"int key", types.Int(3), "no such key: 3"},
	}
	obj := parseBody([]byte(`{"a": 1}`)).(*lazyObject)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := obj.Get(tt.key)
			if err, ok := got.(*types.Err); !ok || err.Error() != tt.want {
				t.Errorf("Get(%v) = %v, want the error %q", tt.key, got, tt.want)
			}
		})
	}
	if got := obj.Get(types.String("a")); got.Equal(types.Int(1)) != types.True {
		t.Errorf("Get(a) = %v, want 1", got)
	}
}
