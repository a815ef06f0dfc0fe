package caddywebhook

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddywebhook/caddywebhook/caddywebhook/dashboard"
	"github.com/caddywebhook/caddywebhook/queue"
)

// dashboardSite is the origin the dashboard tests' requests come from.
const dashboardSite = "dash.example"

// setupDashboard provisions a dashboard; the caller sets up the queue.
func setupDashboard(t *testing.T, readOnly bool) *dashboard.Dashboard {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	d := &dashboard.Dashboard{ReadOnly: readOnly}
	if err := d.Provision(ctx); err != nil {
		t.Fatalf("provision: %v", err)
	}
	return d
}

// serveDashboard sends one request to d and returns the recorder.
func serveDashboard(t *testing.T, d *dashboard.Dashboard, req *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	if err := d.ServeHTTP(rec, req, nil); err != nil {
		// A handler error: Caddy writes it; the tests see -1 and the text.
		rec.Code = -1
		rec.Body.WriteString(err.Error())
	}
	return rec
}

// TestDashboardAPI checks the dispatch to the admin API and the guard on
// state-changing requests: same origin and the page's token, and nothing
// at all when read_only.
func TestDashboardAPI(t *testing.T) {
	// The token, as the page hands it to its script; the page's own
	// tests check that it is the only place it appears.
	token := pageToken(t, setupDashboard(t, false))
	good := func(r *http.Request) {
		r.Header.Set("Sec-Fetch-Site", "same-origin")
		r.Header.Set("Origin", "https://"+dashboardSite)
		r.AddCookie(&http.Cookie{Name: "webhook_dashboard_token", Value: token})
	}
	tests := []struct {
		name     string
		readOnly bool
		method   string
		path     string // {dead} is a dead job's id
		header   func(r *http.Request)
		status   int
		body     string // a piece of the body
		replayed bool   // the dead job is pending afterwards
	}{
		{name: "read/stats", method: "GET", path: "/ops/api/stats", status: 200, body: `"counts":[`},
		{name: "read/stats with the prefix stripped", method: "GET", path: "/api/stats", status: 200, body: `"counts":[`},
		{name: "read/job list with a filter", method: "GET", path: "/ops/api/jobs?status=dead", status: 200, body: `"status":"dead"`},
		{name: "read/one job", method: "GET", path: "/ops/api/jobs/{dead}", status: 200, body: `"payload_text"`},
		{name: "read/read-only may read", readOnly: true, method: "GET", path: "/ops/api/stats", status: 200, body: `"counts"`},
		{name: "read/unknown endpoint says so", method: "GET", path: "/ops/api/nope", status: 404, body: `no webhook admin endpoint at /webhook/nope`},
		{name: "read/unknown filter says so", method: "GET", path: "/ops/api/jobs?colour=red", status: 400, body: `invalid parameter colour`},

		{name: "change/same origin with the token", method: "POST", path: "/ops/api/jobs/{dead}/replay", header: good, status: 200, body: `"replayed":1`, replayed: true},
		{name: "change/Origin alone, matching", method: "POST", path: "/ops/api/jobs/{dead}/replay", header: func(r *http.Request) {
			r.Header.Set("Origin", "http://"+dashboardSite)
			r.AddCookie(&http.Cookie{Name: "webhook_dashboard_token", Value: token})
		}, status: 200, replayed: true},
		{name: "change/cross-site", method: "POST", path: "/ops/api/jobs/{dead}/replay", header: func(r *http.Request) {
			good(r)
			r.Header.Set("Sec-Fetch-Site", "cross-site")
			r.Header.Set("Origin", "https://evil.example")
		}, status: 403, body: "cross-origin request refused"},
		{name: "change/same-site is not same-origin", method: "POST", path: "/ops/api/jobs/{dead}/replay", header: func(r *http.Request) {
			good(r)
			r.Header.Set("Sec-Fetch-Site", "same-site")
		}, status: 403, body: "cross-origin request refused"},
		{name: "change/Origin of another host", method: "POST", path: "/ops/api/jobs/{dead}/replay", header: func(r *http.Request) {
			r.Header.Set("Origin", "https://evil.example")
			r.AddCookie(&http.Cookie{Name: "webhook_dashboard_token", Value: token})
		}, status: 403, body: "Origin does not match"},
		{name: "change/no origin headers at all", method: "POST", path: "/ops/api/jobs/{dead}/replay", header: func(r *http.Request) {
			r.AddCookie(&http.Cookie{Name: "webhook_dashboard_token", Value: token})
		}, status: 403, body: "no Sec-Fetch-Site or Origin"},
		{name: "change/no token", method: "POST", path: "/ops/api/jobs/{dead}/replay", header: func(r *http.Request) {
			good(r)
			r.Header.Del("Cookie")
		}, status: 403, body: "missing dashboard token"},
		{name: "change/wrong token", method: "POST", path: "/ops/api/jobs/{dead}/replay", header: func(r *http.Request) {
			good(r)
			r.Header.Del("Cookie")
			r.AddCookie(&http.Cookie{Name: "webhook_dashboard_token", Value: token[1:] + "x"})
		}, status: 403, body: "invalid dashboard token"},
		{name: "change/DELETE is guarded too", method: "DELETE", path: "/ops/api/jobs/{dead}", status: 403},
		{name: "change/read_only refuses everything", readOnly: true, method: "POST", path: "/ops/api/jobs/{dead}/replay", header: good, status: 403, body: "read_only"},
		{name: "change/errors come back as JSON", method: "POST", path: "/ops/api/jobs/999999/replay", header: good, status: 404, body: `{"error":"job 999999 not found"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setupAdmin(t)
			f.publish(t)
			dead := f.addJob(t, jobSpec{source: "github", target: "http", status: queue.StatusDead, eventType: "push",
				lastError: "upstream answered 500: boom"})
			d := setupDashboard(t, tt.readOnly)
			path := strings.ReplaceAll(tt.path, "{dead}", jsonNumber(dead))
			req := httptest.NewRequestWithContext(t.Context(), tt.method, path, nil)
			req.Host = dashboardSite
			if tt.header != nil {
				tt.header(req)
			}
			rec := serveDashboard(t, d, req)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			if !strings.Contains(rec.Body.String(), tt.body) {
				t.Errorf("body %s does not contain %s", rec.Body, tt.body)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			if rec.Header().Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control %q, want no-store", rec.Header().Get("Cache-Control"))
			}
			want := queue.StatusDead
			if tt.replayed {
				want = queue.StatusPending
			}
			if got := f.getJob(t, dead).Status; got != want {
				t.Errorf("dead job is %s afterwards, want %s", got, want)
			}
		})
	}
}

func jsonNumber(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestDashboardNoApp checks the answer when no webhook app runs.
func TestDashboardNoApp(t *testing.T) {
	d := setupDashboard(t, false)
	rec := serveDashboard(t, d, httptest.NewRequest(http.MethodGet, "/api/stats", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "no webhook app is running") {
		t.Errorf("got %d %s, want 503 naming the missing app", rec.Code, rec.Body)
	}
}

// pageToken reads the token a read-write dashboard's page gives its script.
func pageToken(t *testing.T, d *dashboard.Dashboard) string {
	t.Helper()
	rec := serveDashboard(t, d, httptest.NewRequest(http.MethodGet, "/ops/", nil))
	m := regexp.MustCompile(`<meta name="webhook-dashboard-token" content="([^"]+)">`).FindStringSubmatch(rec.Body.String())
	if m == nil {
		t.Fatalf("no token in the page: %d %s", rec.Code, rec.Body)
	}
	return m[1]
}
