package consumer

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestClientPaths: the endpoint goes after the --url's path, with or
// without a trailing slash, and a query in --url stays a query.
func TestClientPaths(t *testing.T) {
	tests := []struct {
		name, base, wantPath, wantQuery string
	}{
		{"no trailing slash", "/consume", "/consume/claim", ""},
		{"trailing slash", "/consume/", "/consume/claim", ""},
		{"query", "/consume?tenant=a", "/consume/claim", "tenant=a"},
		{"slash and query", "/consume/?tenant=a", "/consume/claim", "tenant=a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotPath, gotQuery string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotPath, gotQuery = r.URL.Path, r.URL.RawQuery
				w.Write([]byte(`{"jobs":[]}`))
			}))
			defer srv.Close()
			base, err := url.Parse(srv.URL + tt.base)
			if err != nil {
				t.Fatal(err)
			}
			c := &client{base: base, token: "t", http: srv.Client()}
			if _, err := c.claim(t.Context(), "laptop", 1, time.Second); err != nil {
				t.Fatal(err)
			}
			if gotPath != tt.wantPath || gotQuery != tt.wantQuery {
				t.Errorf("request to %q ? %q, want %q ? %q", gotPath, gotQuery, tt.wantPath, tt.wantQuery)
			}
		})
	}
}

// TestClientNotTheAPI: a 200 that is not the API's JSON (a site's
// catch-all answered) says to check --url.
func TestClientNotTheAPI(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	base, _ := url.Parse(srv.URL + "/wrong")
	c := &client{base: base, token: "t", http: srv.Client()}
	_, err := c.claim(t.Context(), "laptop", 1, time.Second)
	if err == nil || !strings.Contains(err.Error(), "--url must be the address where webhook_consumer is mounted") {
		t.Errorf("claim: %v, want it to ask about --url", err)
	}
}
