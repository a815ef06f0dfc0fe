package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
)

// The CLI's requests to the admin API. It makes them itself, as any client
// of the API would: an answer's status and its {error, param} body are read
// as fields, so a message names the flag the user typed, and no wording of
// another program's errors is matched.

// client is one run of a `caddy webhook` subcommand: the admin endpoint it
// talks to, how it prints, and its clock.
type client struct {
	addr string
	json bool
	out  io.Writer
	now  func() time.Time
	// endpointFlags are the --address, --config and --adapter flags the
	// user gave, for the commands the CLI suggests.
	endpointFlags []string

	http   *http.Client
	origin string // the scheme and host of the requests, and their Origin
	local  bool   // a unix socket or a file descriptor: no Origin header
}

// newClient finds the admin address as `caddy reload` does: --address if
// given; else the admin listener of the config loaded by caddycmd.LoadConfig
// (--config with --adapter, or a Caddyfile in the working directory); else
// the default.
func newClient(cmd *cobra.Command, now func() time.Time) (*client, error) {
	fl := caddycmd.Flags{FlagSet: cmd.Flags()}
	address, configFile, adapter := fl.String("address"), fl.String("config"), fl.String("adapter")
	var config []byte
	if address == "" {
		var err error
		config, configFile, _, err = caddycmd.LoadConfig(configFile, adapter)
		if err != nil {
			return nil, fmt.Errorf("load config to find the admin address (or give --address): %w", err)
		}
	}
	addr, err := caddycmd.DetermineAdminAPIAddress(address, config, configFile, adapter)
	if err != nil {
		return nil, fmt.Errorf("determine admin API address: %w", err)
	}
	c := &client{addr: addr, json: fl.Bool("json"), out: cmd.OutOrStdout(), now: now}
	if err := c.dialer(); err != nil {
		return nil, err
	}
	for _, name := range []string{"address", "config", "adapter"} {
		if cmd.Flags().Changed(name) {
			c.endpointFlags = append(c.endpointFlags, "--"+name, fl.String(name))
		}
	}
	return c, nil
}

// dialer sets up the HTTP client for the admin address, which Caddy lets
// be a TCP address, a unix socket (unix//path, with optional permission
// bits after a |) or a file descriptor. Caddy's admin endpoint refuses a
// request over TCP whose Origin it does not expect; over a socket the
// request has no Origin, and its Host is a loopback address.
func (c *client) dialer() error {
	na, err := caddy.ParseNetworkAddress(c.addr)
	if err != nil || na.PortRangeSize() > 1 {
		return fmt.Errorf("invalid admin address %s: the address must be one host and port, or a socket", c.addr)
	}
	c.origin = "http://" + na.JoinHostPort(0)
	if _, err := url.Parse(c.origin); err != nil {
		// ParseNetworkAddress takes some hosts no URL can hold
		// ("nonsense::"): say so here, not in a request's parse error.
		return fmt.Errorf("invalid admin address %s: the address must be one host and port, or a socket", c.addr)
	}
	if na.IsUnixNetwork() || na.IsFdNetwork() {
		c.origin, c.local = "http://127.0.0.1", true
		if i := strings.LastIndexByte(na.Host, '|'); i >= 0 && na.IsUnixNetwork() {
			na.Host = na.Host[:i]
		}
	}
	network, target := na.Network, na.JoinHostPort(0)
	c.http = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, target)
		},
	}}
	return nil
}

// do sends one request to the admin API and returns the answer of a
// status below 400; for any other it returns the error a person reads:
// the API's own message (naming the flag of its parameter), or what the
// status says when the body is not the API's.
func (c *client) do(method, uri string, headers http.Header, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequest(method, c.origin+uri, body)
	if err != nil {
		return nil, fmt.Errorf("make request: %w", err)
	}
	if !c.local {
		req.Header.Set("Origin", c.origin)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for name, values := range headers {
		req.Header[name] = values
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reach the admin API at %s: %w (is Caddy running? see --address and --config)", c.addr, err)
	}
	if resp.StatusCode < 400 {
		return resp, nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 2<<20))
	if err != nil {
		return nil, fmt.Errorf("admin API at %s: HTTP %d: read the error: %w", c.addr, resp.StatusCode, err)
	}
	return nil, c.statusError(resp.StatusCode, b)
}

// statusError is the error of an answer with status and body b.
func (c *client) statusError(status int, b []byte) error {
	var e adminapi.Error
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		return fmt.Errorf("%s (HTTP %d)", flagMessage(e), status)
	}
	text := strings.TrimSpace(string(b))
	if status == http.StatusNotFound || status == http.StatusMethodNotAllowed {
		// A site's port given to --address answers so too: tell the
		// two apart before blaming the build.
		if err := c.notAdminAPI(fmt.Sprintf("HTTP %d", status)); err != nil {
			return err
		}
		return fmt.Errorf("the admin API at %s has no webhook endpoints: is this Caddy built with the webhook plugin? (HTTP %d: %s)", c.addr, status, text)
	}
	return fmt.Errorf("admin API at %s: HTTP %d: %s", c.addr, status, text)
}

// notAdminAPI returns the error for an address that does not answer as
// Caddy's admin API, whose GET /config/ is JSON; nil when it does. answered
// says what the first request got, for the message.
func (c *client) notAdminAPI(answered string) error {
	req, err := http.NewRequest(http.MethodGet, c.origin+"/config/", nil)
	if err != nil {
		return nil
	}
	if !c.local {
		req.Header.Set("Origin", c.origin)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil // the first request's error tells more
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK && isJSON(resp.Header) {
		return nil
	}
	return fmt.Errorf("%s is not Caddy's admin API (it answered %s, and GET /config/ HTTP %d): "+
		"--address takes the admin endpoint (the `admin` global option, default localhost:2019), not a site's address",
		c.addr, answered, resp.StatusCode)
}

// isJSON reports whether an answer's Content-Type is JSON, as the admin
// API's always is.
func isJSON(h http.Header) bool {
	ct, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	return strings.TrimSpace(ct) == "application/json"
}

// call makes one admin API request. With --json it copies the response body
// to the output and leaves v alone; otherwise it decodes the body into v.
// It reports whether v was filled.
func (c *client) call(method, uri string, v any) (bool, error) {
	return c.request(method, uri, nil, nil, v)
}

// request is call with request headers and a body (nil for none).
func (c *client) request(method, uri string, headers http.Header, body io.Reader, v any) (bool, error) {
	resp, err := c.do(method, uri, headers, body)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if !isJSON(resp.Header) {
		if err := c.notAdminAPI(fmt.Sprintf("HTTP %d with %q", resp.StatusCode, resp.Header.Get("Content-Type"))); err != nil {
			return false, err
		}
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return false, fmt.Errorf("read response from %s: %w", c.addr, err)
	}
	if c.json {
		_, err := c.out.Write(data)
		return false, err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("decode response from %s: %w", c.addr, err)
	}
	return true, nil
}

// flagMessage is the API's error message, naming the flag the user typed
// ("invalid --delivery: …" for the parameter delivery_id) when the error
// is about a query parameter; the path's id is no flag and keeps its
// message.
func flagMessage(e adminapi.Error) string {
	if e.Param == "" || e.Param == "id" {
		return e.Error
	}
	reason, ok := strings.CutPrefix(e.Error, "invalid parameter "+e.Param+": ")
	if !ok {
		return e.Error
	}
	return "invalid --" + flagOf(e.Param) + ": " + reason
}
