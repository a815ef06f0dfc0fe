package caddywebhook

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// TestRecordAddsTheAccessLogFieldWhereLogged: record gives Caddy's access
// log its webhook field only where the server writes an access line for
// the request, or outside a Caddy server, where it cannot tell. Caddy
// gives every request its ExtraLogFields, and each Add allocates (it
// clears a sync.Map) for a line that a server without an access log never
// writes. That the field reaches a written line is TestReceiver's (a real
// Caddy with an access log).
func TestRecordAddsTheAccessLogFieldWhereLogged(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		server *caddyhttp.Server // nil: not served by Caddy
		want   int               // extra fields after record
	}{
		{"access log", &caddyhttp.Server{Logs: &caddyhttp.ServerLogConfig{}}, 1},
		{"no access log", &caddyhttp.Server{}, 0},
		{"host skipped", &caddyhttp.Server{Logs: &caddyhttp.ServerLogConfig{SkipHosts: []string{"example.com"}}}, 0},
		{"another host skipped", &caddyhttp.Server{Logs: &caddyhttp.ServerLogConfig{SkipHosts: []string{"other.example"}}}, 1},
		{"outside Caddy", nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			extra := new(caddyhttp.ExtraLogFields)
			r := httptest.NewRequest(http.MethodPost, "http://example.com/hook", nil)
			ctx := context.WithValue(r.Context(), caddyhttp.ExtraLogFieldsCtxKey, extra)
			if tt.server != nil {
				ctx = context.WithValue(ctx, caddyhttp.ServerCtxKey, tt.server)
			}
			rc := &Receiver{Source: "gh"}
			rc.record(r.WithContext(ctx), &requestInfo{source: "gh", deliveryID: "d-1"}, outcomeAccepted, http.StatusAccepted)
			// Caddy keeps the fields unexported; reflect reads their number.
			fields := reflect.ValueOf(extra).Elem().FieldByName("fields")
			if !fields.IsValid() || fields.Kind() != reflect.Slice {
				t.Fatal("caddyhttp.ExtraLogFields has no fields slice: this test must learn Caddy's new layout")
			}
			if got := fields.Len(); got != tt.want {
				t.Errorf("access log extra fields = %d, want %d", got, tt.want)
			}
		})
	}
}

// BenchmarkRecord is record for one request on a Caddy server without an
// access log, Caddy's ExtraLogFields and all, as every request pays it.
func BenchmarkRecord(b *testing.B) {
	srv := &caddyhttp.Server{}
	rc := &Receiver{Source: "gh"}
	info := &requestInfo{source: "gh", deliveryID: "d-1"}
	r := httptest.NewRequest(http.MethodPost, "http://example.com/hook", nil)
	b.ReportAllocs()
	for b.Loop() {
		// A request's own ExtraLogFields, as Caddy's server makes one per request.
		ctx := context.WithValue(context.WithValue(r.Context(), caddyhttp.ServerCtxKey, srv),
			caddyhttp.ExtraLogFieldsCtxKey, new(caddyhttp.ExtraLogFields))
		rc.record(r.WithContext(ctx), info, outcomeAccepted, http.StatusAccepted)
	}
}
