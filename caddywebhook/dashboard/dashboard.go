// Package dashboard is the http.handlers.webhook_dashboard module: an
// operator's page of the webhook queue that a site mounts behind Caddy's
// own authentication. Its page and assets are embedded; its /api/ calls
// the webhook admin API's route table in-process, so the page reaches
// every operation without Caddy's admin endpoint being exposed, and the
// two can never disagree.
package dashboard

import (
	"bytes"
	"cmp"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/adminhook"
)

func init() {
	caddy.RegisterModule(Dashboard{})
	httpcaddyfile.RegisterHandlerDirective("webhook_dashboard", parseDashboardDirective)
	// With the handlers that respond, after basic_auth and forward_auth, so
	// that the authentication in the same block always runs first.
	httpcaddyfile.RegisterDirectiveOrder("webhook_dashboard", httpcaddyfile.Before, "respond")
}

// dashboardAssets is the whole page: plain HTML, CSS and JavaScript written
// by hand, embedded so that the plugin builds without a JavaScript toolchain
// and the page works offline, with nothing loaded from elsewhere.
//
//go:embed index.html app.js style.css
var dashboardAssets embed.FS

// Dashboard serves the operators' web page of the webhook queue: an
// overview per source and target, the jobs and events with filters, a job
// in full, and the actions of the admin API (replay, resend, discard, send).
// The user mounts it where they want it, behind Caddy's own authentication:
//
//	handle_path /webhooks/* {
//		basic_auth { … }
//		webhook_dashboard
//	}
//
// The page talks to <mount>/api/…, which the handler dispatches in-process
// to the admin API's endpoints (serveAdmin): the admin port stays on
// loopback, and the page can do exactly what `caddy webhook` can.
//
// A state-changing request (anything but GET and HEAD) is refused with 403
// unless it comes from the page itself: its Sec-Fetch-Site says
// same-origin, or, from a browser without that header, its Origin has the
// request's scheme, host and port; and it carries the token the page got
// in its HTML, in a cookie the page's script sets (Caddy's access log
// redacts Cookie unless log_credentials is on, where a header of its own
// would be logged). A read_only page gets no token at all. Reads need
// neither: another origin cannot read the answers. Nothing the page
// shows can hold a secret, since the store never sees one; the page puts
// every stored value into the document as text, and its Content Security
// Policy allows no script but its own.
type Dashboard struct {
	// ReadOnly hides the page's actions and refuses every state-changing
	// request with 403: for people who may look but not act. Default: false.
	ReadOnly bool `json:"read_only,omitempty"`

	logger *zap.Logger
	index  []byte // index.html with this handler's token and mode
	etags  map[string]string
}

// CaddyModule returns the Caddy module information.
func (Dashboard) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.webhook_dashboard",
		New: func() caddy.Module { return new(Dashboard) },
	}
}

const (
	// dashboardTokenCookie carries the page's token on state-changing
	// requests; the page's script sets it, scoped to the mount's path.
	dashboardTokenCookie = "webhook_dashboard_token"

	// dashboardMaxBody bounds a request body the page sends (POST /api/send
	// holds an event): the receiver's default max_body, with room for JSON
	// and base64.
	dashboardMaxBody = 2 << 20

	// dashboardCSP allows the page its own script, style and API and nothing
	// else: no inline script, no other origin, no framing. A stored value that
	// slipped into the document as markup still could not run.
	dashboardCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

// dashboardAssetTypes lists the files the handler serves, with their types.
var dashboardAssetTypes = map[string]string{
	"index.html": "text/html; charset=utf-8",
	"app.js":     "text/javascript; charset=utf-8",
	"style.css":  "text/css; charset=utf-8",
}

// dashboardKey is the process's random key for page tokens. It is per
// process, not per config, so that a page stays usable across reloads; a
// restart makes open pages fetch a new token (they reload on a 403 that
// names the token).
var dashboardKey = sync.OnceValue(func() []byte {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // never fails (crypto/rand panics rather)
	return key
})

// dashboardToken is the token the page sends back on state-changing
// requests: it proves the request was built by a script that could read the
// page, which a page of another origin cannot.
func dashboardToken() string {
	m := hmac.New(sha256.New, dashboardKey())
	m.Write([]byte("caddywebhook dashboard token v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Provision renders the page for this handler's token and mode.
func (d *Dashboard) Provision(ctx caddy.Context) error {
	d.logger = ctx.Logger()
	raw, err := dashboardAssets.ReadFile("index.html")
	if err != nil {
		return fmt.Errorf("webhook_dashboard: read embedded page: %w", err)
	}
	mode, token := "read-write", dashboardToken()
	if d.ReadOnly {
		// No write token: one seen on a page that may only look must not
		// let its holder act on a read-write mount.
		mode, token = "read-only", ""
	}
	// Both values are fixed ASCII without quotes or markup, so plain
	// replacement is safe here.
	d.index = bytes.ReplaceAll(bytes.ReplaceAll(raw, []byte("{{TOKEN}}"), []byte(token)),
		[]byte("{{MODE}}"), []byte(mode))
	d.etags = make(map[string]string, len(dashboardAssetTypes))
	for name := range dashboardAssetTypes {
		b, err := d.asset(name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		d.etags[name] = `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`
	}
	return nil
}

func (d *Dashboard) asset(name string) ([]byte, error) {
	if name == "index.html" {
		return d.index, nil
	}
	b, err := dashboardAssets.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("webhook_dashboard: read embedded %s: %w", name, err)
	}
	return b, nil
}

// ServeHTTP serves the page, its assets and its API. It is a terminal
// handler: it answers every request that reaches it.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	h := w.Header()
	h.Set("Content-Security-Policy", dashboardCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	// The admin endpoints never contain /api/, so the last one is the
	// page's, wherever the user mounted it and whether or not the prefix
	// was stripped.
	if i := strings.LastIndex(r.URL.Path, "/api/"); i >= 0 {
		h.Set("Cache-Control", "no-store")
		return d.serveAPI(w, r, r.URL.Path[i+len("/api/"):])
	}
	return d.serveAsset(w, r)
}

func (d *Dashboard) serveAsset(w http.ResponseWriter, r *http.Request) error {
	name := path.Base(r.URL.Path)
	if strings.HasSuffix(r.URL.Path, "/") || r.URL.Path == "" {
		name = "index.html"
	}
	ctype, ok := dashboardAssetTypes[name]
	if !ok {
		return caddyhttp.Error(http.StatusNotFound, fmt.Errorf("webhook_dashboard: no page at %s", path.Base(r.URL.Path)))
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		return caddyhttp.Error(http.StatusMethodNotAllowed, errors.New("webhook_dashboard: the page is read with GET"))
	}
	b, err := d.asset(name)
	if err != nil {
		return caddyhttp.Error(http.StatusInternalServerError, err)
	}
	h := w.Header()
	h.Set("Content-Type", ctype)
	if name == "index.html" {
		// It holds the token; no shared cache may keep it.
		h.Set("Cache-Control", "no-store")
	} else {
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", d.etags[name])
	}
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
	return nil
}

// serveAPI checks a state-changing request and hands the request to the
// admin API's endpoint /webhook/<rest>.
func (d *Dashboard) serveAPI(w http.ResponseWriter, r *http.Request, rest string) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if err := d.allowChange(r); err != nil {
			d.logger.Debug("refused a state-changing request", zap.String("method", r.Method), zap.Error(err))
			adminapi.WriteError(w, http.StatusForbidden, err.Error(), "")
			return nil
		}
		r.Body = http.MaxBytesReader(w, r.Body, dashboardMaxBody)
	}
	adminhook.Serve(w, r, adminapi.BasePath+rest)
	return nil
}

// allowChange says why a state-changing request may not run, or nil.
func (d *Dashboard) allowChange(r *http.Request) error {
	if d.ReadOnly {
		return errors.New("the dashboard is read_only")
	}
	if err := sameOrigin(r); err != nil {
		return fmt.Errorf("cross-origin request refused: %w", err)
	}
	c, err := r.Cookie(dashboardTokenCookie)
	if err != nil || c.Value == "" {
		return errors.New("missing dashboard token: reload the page")
	}
	if subtle.ConstantTimeCompare([]byte(c.Value), []byte(dashboardToken())) != 1 {
		return errors.New("invalid dashboard token: reload the page")
	}
	return nil
}

// sameOrigin accepts a request a browser marks as sent by a page of the
// same origin: Sec-Fetch-Site (all current browsers), or else an Origin
// with the request's scheme, host and port. Unlike http.CrossOriginProtection it refuses a
// request with neither header: the page's own requests always carry one,
// and other clients have the admin API and the CLI.
func sameOrigin(r *http.Request) error {
	// The messages never quote a header: they are logged.
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin":
		return nil
	case "":
	default:
		return errors.New("Sec-Fetch-Site is not same-origin")
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return errors.New("no Sec-Fetch-Site or Origin header")
	}
	if !originMatches(origin, r) {
		return errors.New("Origin does not match the scheme, host and port")
	}
	return nil
}

// originMatches reports whether origin, an Origin header, names the
// origin r was sent to: the same scheme (https when r came over TLS), the
// same host, case aside, and the same port, a missing one being the
// scheme's default. Behind a proxy that terminates TLS, r is http; the
// browsers that send Sec-Fetch-Site never get here.
func originMatches(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if !strings.EqualFold(u.Scheme, scheme) {
		return false
	}
	defaultPort := map[string]string{"http": "80", "https": "443"}[scheme]
	hostPort := func(host string) (string, string) {
		h, p, err := net.SplitHostPort(host)
		if err != nil {
			h, p = host, ""
		}
		return strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")), cmp.Or(p, defaultPort)
	}
	oh, op := hostPort(u.Host)
	rh, rp := hostPort(r.Host)
	return oh != "" && oh == rh && op == rp
}

// parseDashboardDirective parses the webhook_dashboard directive; the
// matcher has already been taken off by httpcaddyfile.
func parseDashboardDirective(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	d := new(Dashboard)
	if err := d.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	return d, nil
}

// UnmarshalCaddyfile sets up the dashboard from the directive:
//
//	webhook_dashboard [<matcher>] {
//		read_only        # no actions: look, do not touch
//	}
func (d *Dashboard) UnmarshalCaddyfile(disp *caddyfile.Dispenser) error {
	disp.Next() // the directive name
	if disp.NextArg() {
		return disp.Errf("webhook_dashboard: unexpected argument %q; options go in a block", disp.Val())
	}
	for disp.NextBlock(0) {
		switch opt := disp.Val(); opt {
		case "read_only":
			if disp.NextArg() {
				return disp.Errf("webhook_dashboard: read_only takes no argument")
			}
			d.ReadOnly = true
		default:
			return disp.Errf("webhook_dashboard: unknown option %q; known: read_only", opt)
		}
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Dashboard)(nil)
	_ caddyhttp.MiddlewareHandler = (*Dashboard)(nil)
	_ caddyfile.Unmarshaler       = (*Dashboard)(nil)
)
