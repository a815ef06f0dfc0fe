package rules

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestTransform(t *testing.T) {
	tests := []struct {
		name     string
		cfg      TransformConfig
		body     string // want
		bodySet  bool
		ctype    string
		headers  http.Header
		remove   []string
		wantFail string // a substring of Apply's error
	}{
		{
			name:    "map to JSON",
			cfg:     TransformConfig{Body: `{"text": "New sale: " + body.data.object.id + " for " + string(int(body.data.object.amount_total)) + " " + body.data.object.currency}`},
			body:    `{"text":"New sale: cs_test_a1b2c3d4e5f6g7h8i9j0 for 4200 eur"}`,
			bodySet: true, ctype: "application/json",
		},
		{
			name:    "list to JSON, doubles and nulls kept",
			cfg:     TransformConfig{Body: `[body.data.object.amount_total, body.data.previous_attributes, true, b"hi", 1.5]`},
			body:    `[4200,null,true,"aGk=",1.5]`,
			bodySet: true, ctype: "application/json",
		},
		{
			name:    "nested map with sorted keys",
			cfg:     TransformConfig{Body: `{"z": {"b": 1, "a": [1u, "x"]}, "a": body.data.object.metadata}`},
			body:    `{"a":{"channel":"web","order_id":"6735"},"z":{"a":[1,"x"],"b":1}}`,
			bodySet: true, ctype: "application/json",
		},
		{
			name:    "string to text",
			cfg:     TransformConfig{Body: `"sale " + body.data.object.id`},
			body:    "sale cs_test_a1b2c3d4e5f6g7h8i9j0",
			bodySet: true, ctype: "text/plain; charset=utf-8",
		},
		{
			name:    "bytes as they are",
			cfg:     TransformConfig{Body: `raw`},
			body:    stripeBody,
			bodySet: true, ctype: "",
		},
		{
			name:    "headers set, in canonical form",
			cfg:     TransformConfig{Headers: map[string]string{"x-order": `body.data.object.metadata.order_id`, "Content-Type": `"application/vnd.sale+json"`}},
			headers: http.Header{"X-Order": {"6735"}, "Content-Type": {"application/vnd.sale+json"}},
		},
		{
			name:   "remove headers",
			cfg:    TransformConfig{RemoveHeaders: []string{"stripe-signature", "X-GitHub-Event"}},
			remove: []string{"Stripe-Signature", "X-Github-Event"},
		},
		{name: "missing field in the body", cfg: TransformConfig{Body: `{"text": body.data.object.refund}`}, wantFail: "transform body: no such key: refund"},
		{name: "int at run time", cfg: TransformConfig{Body: `body.data.object.amount_total`}, wantFail: "transform body: yields double; want a map"},
		{name: "header not a string at run time", cfg: TransformConfig{Headers: map[string]string{"X-N": `body.data.object.amount_total`}}, wantFail: "transform header X-N: yields double, not a string"},
		{name: "header with a line break", cfg: TransformConfig{Headers: map[string]string{"X-N": `"a\r\nInjected: 1"`}}, wantFail: "transform header X-N: the value holds a line break"},
		{name: "map with an int key", cfg: TransformConfig{Body: `{1: "a"}`}, wantFail: "json keys are strings"},
		{name: "NaN", cfg: TransformConfig{Body: `[0.0/0.0]`}, wantFail: "has no json form"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := CompileTransform(&tt.cfg, Options{})
			if err != nil {
				t.Fatalf("CompileTransform: %v", err)
			}
			r, err := tr.Apply(NewInput(stripeEvent()))
			if tt.wantFail != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantFail) {
					t.Fatalf("Apply err = %v, want %q", err, tt.wantFail)
				}
				return
			}
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if string(r.Body) != tt.body || r.BodySet != tt.bodySet || r.ContentType != tt.ctype {
				t.Errorf("body %q set %v type %q; want %q %v %q", r.Body, r.BodySet, r.ContentType, tt.body, tt.bodySet, tt.ctype)
			}
			if len(r.Headers) != len(tt.headers) {
				t.Errorf("headers = %v, want %v", r.Headers, tt.headers)
			}
			for k, v := range tt.headers {
				if r.Headers.Get(k) != v[0] {
					t.Errorf("header %s = %q, want %q", k, r.Headers.Get(k), v[0])
				}
			}
			if strings.Join(r.Remove, ",") != strings.Join(tt.remove, ",") {
				t.Errorf("remove = %v, want %v", r.Remove, tt.remove)
			}
		})
	}
	t.Run("nil transform", func(t *testing.T) {
		tr, err := CompileTransform(&TransformConfig{}, Options{})
		if tr != nil || err != nil {
			t.Fatalf("CompileTransform(zero) = %v, %v", tr, err)
		}
		if r, err := tr.Apply(NewInput(stripeEvent())); r != nil || err != nil {
			t.Fatalf("Apply = %v, %v", r, err)
		}
	})
	t.Run("output cap", func(t *testing.T) {
		tr, err := CompileTransform(&TransformConfig{Body: `string(raw) + string(raw)`}, Options{MaxOutput: len(stripeBody)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Apply(NewInput(stripeEvent())); err == nil || !strings.Contains(err.Error(), "over the cap of") {
			t.Fatalf("Apply err = %v, want the output cap", err)
		}
	})
}

func TestCompileTransformRefuses(t *testing.T) {
	tests := []struct {
		name  string
		cfg   TransformConfig
		field string
		msg   string
	}{
		{name: "host", cfg: TransformConfig{Headers: map[string]string{"host": `"x"`}}, field: "header host", msg: "header Host is set by the transport"},
		{name: "content-length", cfg: TransformConfig{Headers: map[string]string{"Content-Length": `"1"`}}, field: "header Content-Length", msg: "header Content-Length is set by the transport"},
		{name: "hop-by-hop", cfg: TransformConfig{Headers: map[string]string{"Transfer-Encoding": `"chunked"`}}, field: "header Transfer-Encoding", msg: "hop-by-hop"},
		{name: "connection removed", cfg: TransformConfig{RemoveHeaders: []string{"Connection"}}, field: "remove_header Connection", msg: "header Connection is hop-by-hop"},
		{name: "x-webhook", cfg: TransformConfig{Headers: map[string]string{"X-Webhook-Delivery": `"x"`}}, field: "header X-Webhook-Delivery", msg: "header X-Webhook-Delivery is reserved"},
		{name: "x-webhook removed", cfg: TransformConfig{RemoveHeaders: []string{"x-webhook-attempt"}}, field: "remove_header x-webhook-attempt", msg: "header X-Webhook-Attempt is reserved"},
		{name: "bad name", cfg: TransformConfig{Headers: map[string]string{"X Bad": `"x"`}}, field: "header X Bad", msg: "not a valid header name"},
		{name: "body syntax", cfg: TransformConfig{Body: `{"text": body.id`}, field: "body", msg: "line 1, column 17: Syntax error"},
		{name: "body of the wrong type", cfg: TransformConfig{Body: `1 + 2`}, field: "body", msg: "yields int; want a map, a list, a string or bytes"},
		{name: "header of the wrong type", cfg: TransformConfig{Headers: map[string]string{"X-N": `1`}}, field: "header X-N", msg: "yields int; want a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := CompileTransform(&tt.cfg, Options{})
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v; want field %q and %q", err, tt.field, tt.msg)
			}
		})
	}
}
