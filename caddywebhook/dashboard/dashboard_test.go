package dashboard

import (
	"context"
	"crypto/tls"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

// dashboardSite is the origin the dashboard tests' requests come from.
const dashboardSite = "dash.example"

// setupDashboard provisions a dashboard; the caller sets up the queue.
func setupDashboard(t *testing.T, readOnly bool) *Dashboard {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	d := &Dashboard{ReadOnly: readOnly}
	if err := d.Provision(ctx); err != nil {
		t.Fatalf("provision: %v", err)
	}
	return d
}

// serveDashboard sends one request to d and returns the recorder.
func serveDashboard(t *testing.T, d *Dashboard, req *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	if err := d.ServeHTTP(rec, req, nil); err != nil {
		// A handler error: Caddy writes it; the tests see -1 and the text.
		rec.Code = -1
		rec.Body.WriteString(err.Error())
	}
	return rec
}

// TestDashboardAssets checks the page and its files: the token and mode in
// the page, the content types, the headers that keep it from being framed
// or sniffed, and that nothing outside the three files is served.
func TestDashboardAssets(t *testing.T) {
	tests := []struct {
		name     string
		readOnly bool
		path     string
		status   int
		ctype    string
		contains []string
	}{
		{"index at the mount", false, "/ops/", 200, "text/html; charset=utf-8",
			[]string{`content="` + dashboardToken() + `"`, `content="read-write"`, `src="app.js"`}},
		{"index read-only, without a token", true, "/ops/", 200, "text/html; charset=utf-8", []string{`content="read-only"`, `name="webhook-dashboard-token" content=""`}},
		{"index with the prefix stripped", false, "/", 200, "text/html; charset=utf-8", []string{"webhook-dashboard-token"}},
		{"script", false, "/ops/app.js", 200, "text/javascript; charset=utf-8", []string{"webhook_dashboard_token"}},
		{"style", false, "/ops/style.css", 200, "text/css; charset=utf-8", []string{"--dead"}},
		{"unknown file", false, "/ops/secrets.txt", -1, "", []string{"no page at secrets.txt"}},
		{"the embedded directory itself", false, "/ops/dashboard", -1, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := setupDashboard(t, tt.readOnly)
			rec := serveDashboard(t, d, httptest.NewRequest(http.MethodGet, tt.path, nil))
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			if tt.ctype != "" && rec.Header().Get("Content-Type") != tt.ctype {
				t.Errorf("Content-Type %q, want %q", rec.Header().Get("Content-Type"), tt.ctype)
			}
			for _, s := range tt.contains {
				if !strings.Contains(rec.Body.String(), s) {
					t.Errorf("body does not contain %q", s)
				}
			}
			if strings.Contains(rec.Body.String(), "{{") {
				t.Error("body holds an unreplaced {{…}}")
			}
			h := rec.Header()
			if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
				t.Errorf("Content-Security-Policy = %q", csp)
			}
			if h.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("X-Content-Type-Options = %q", h.Get("X-Content-Type-Options"))
			}
		})
	}
}

// TestDashboardAssetRules checks the page's own rules on its source: no
// markup from strings, nothing loaded from elsewhere, and a small size.
func TestDashboardAssetRules(t *testing.T) {
	total := 0
	err := fs.WalkDir(dashboardAssets, ".", func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := dashboardAssets.ReadFile(path)
		if err != nil {
			return err
		}
		total += len(b)
		for _, bad := range []*regexp.Regexp{
			regexp.MustCompile(`\.(inner|outer)HTML\b`),
			regexp.MustCompile(`insertAdjacentHTML|document\.write|\beval\(|new Function\(`),
			regexp.MustCompile(`(src|href)="(https?:)?//`),
			regexp.MustCompile(`@import|url\(\s*["']?(https?:)?//`),
		} {
			if loc := bad.FindIndex(b); loc != nil {
				t.Errorf("%s: %q: stored values must enter the page as text, and nothing may load from elsewhere", path, b[loc[0]:loc[1]])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A page that loads at once on a slow link: well under 200 KB.
	if total > 100_000 {
		t.Errorf("the page's files are %d bytes; keep them under 100 kB", total)
	}
	t.Logf("dashboard assets: %d bytes", total)
}

// TestDashboardCaddyfileErrors checks the directive's parse errors.
func TestDashboardCaddyfileErrors(t *testing.T) {
	tests := []struct {
		name, body string
		want       []string
	}{
		{"argument on the directive line", "webhook_dashboard /a /b", []string{"webhook_dashboard", `unexpected argument "/b"`}},
		{"unknown option", "webhook_dashboard {\n\t\treadonly\n\t}", []string{"webhook_dashboard", `unknown option "readonly"`, "read_only"}},
		{"read_only with a value", "webhook_dashboard {\n\t\tread_only yes\n\t}", []string{"webhook_dashboard", "read_only takes no argument"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := adapt(t, ":8080 {\n\t"+tt.body+"\n}\n")
			if err == nil {
				t.Fatalf("adapt succeeded; want an error containing %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestDashboardOriginMatches: an Origin passes only with the request's
// scheme, host and port (https://host is not http://host); the ports a
// scheme implies count as written (RFC 6454's origin is the triple).
func TestDashboardOriginMatches(t *testing.T) {
	tests := []struct {
		name   string
		origin string
		host   string
		tls    bool
		want   bool
	}{
		{"same http origin", "http://ops.example", "ops.example", false, true},
		{"same https origin", "https://ops.example", "ops.example", true, true},
		{"https origin for an http request", "https://ops.example", "ops.example", false, false},
		{"http origin for an https request", "http://ops.example", "ops.example", true, false},
		{"explicit default port in the origin", "https://ops.example:443", "ops.example", true, true},
		{"explicit default port in the host", "http://ops.example", "ops.example:80", false, true},
		{"other port", "http://ops.example:8080", "ops.example", false, false},
		{"same non-default port", "http://127.0.0.1:8080", "127.0.0.1:8080", false, true},
		{"host case differs", "http://OPS.example", "ops.example", false, true},
		{"other host", "http://evil.example", "ops.example", false, false},
		{"suffix host", "http://ops.example.evil", "ops.example", false, false},
		{"IPv6", "http://[::1]:2020", "[::1]:2020", false, true},
		{"IPv6, other port", "http://[::1]:2021", "[::1]:2020", false, false},
		{"opaque origin", "null", "ops.example", false, false},
		{"scheme only", "http://", "ops.example", false, false},
		{"other scheme", "ftp://ops.example", "ops.example", false, false},
		{"with a path", "http://ops.example/x", "ops.example", false, false},
		{"with user info", "http://u@ops.example", "ops.example", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/ops/api/send", nil)
			r.Host = tt.host
			if tt.tls {
				r.TLS = &tls.ConnectionState{}
			}
			if got := originMatches(tt.origin, r); got != tt.want {
				t.Errorf("originMatches(%q) for %s://%s = %v, want %v", tt.origin, map[bool]string{false: "http", true: "https"}[tt.tls], tt.host, got, tt.want)
			}
		})
	}
}

// TestDashboardReadOnlyHasNoToken: a read_only page carries no token, and
// the token of a read-write page, the only one there is, still changes
// nothing through a read_only mount.
func TestDashboardReadOnlyHasNoToken(t *testing.T) {
	ro := setupDashboard(t, true)
	rec := serveDashboard(t, ro, httptest.NewRequest(http.MethodGet, "/ops/", nil))
	if rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), dashboardToken()) {
		t.Fatalf("read_only page: %d, holds the token: %v", rec.Code, strings.Contains(rec.Body.String(), dashboardToken()))
	}
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/ops/api/send", strings.NewReader(`{"source":"github","body":"{}"}`))
	req.Host = dashboardSite
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.AddCookie(&http.Cookie{Name: dashboardTokenCookie, Value: dashboardToken()})
	if rec := serveDashboard(t, ro, req); rec.Code != http.StatusForbidden {
		t.Errorf("read_only mount with the read-write token: %d %s, want 403", rec.Code, rec.Body)
	}
}

// TestDashboardTokenNotInAHeader: the page sends its token in a cookie,
// which Caddy's access log redacts, and a token in the old header alone
// changes nothing.
func TestDashboardTokenNotInAHeader(t *testing.T) {
	d := setupDashboard(t, false)
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/ops/api/send", strings.NewReader(`{"source":"github","body":"{}"}`))
	req.Host = dashboardSite
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("X-Webhook-Dashboard-Token", dashboardToken())
	if rec := serveDashboard(t, d, req); rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "missing dashboard token") {
		t.Errorf("token in a header: %d %s, want 403 missing dashboard token", rec.Code, rec.Body)
	}
}

// adapt adapts a Caddyfile, as `caddy adapt` does.
func adapt(t *testing.T, input string) ([]byte, error) {
	t.Helper()
	adapter := caddyfile.Adapter{ServerType: httpcaddyfile.ServerType{}}
	out, _, err := adapter.Adapt([]byte(input), map[string]any{"filename": "Caddyfile"})
	return out, err
}
