package caddyproc

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Admin is the host:port of a Caddy admin API.
type Admin string

// adminClient makes no keep-alive connections: each config load replaces
// Caddy's admin server, and a request sent on an idle connection to the
// old one is reset. Its timeout is for a hung process; a capture of a CPU
// profile, or a replay of half a million jobs, takes a while.
var adminClient = &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}

// Do sends one request to the admin API and returns the answer's status
// and body. A body is sent as JSON.
func (a Admin) Do(ctx context.Context, method, path string, body io.Reader) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, a.URL(path), body)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := adminClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return resp.StatusCode, out, nil
}

// Call is Do for a request that must succeed: it returns the body of a
// 2xx answer, and any other answer as an error that quotes it.
func (a Admin) Call(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	status, out, err := a.Do(ctx, method, path, rd)
	if err != nil {
		return nil, err
	}
	if status/100 != 2 {
		return nil, fmt.Errorf("%s %s: %d %s: %s", method, path, status, http.StatusText(status), bytes.TrimSpace(out))
	}
	return out, nil
}

// Load replaces the running config; Caddy answers once the new one runs
// (and the old one's apps have stopped).
func (a Admin) Load(ctx context.Context, cfg []byte) error {
	_, err := a.Call(ctx, http.MethodPost, "/load", cfg)
	return err
}

// URL is the admin API's URL of path.
func (a Admin) URL(path string) string { return "http://" + string(a) + path }
