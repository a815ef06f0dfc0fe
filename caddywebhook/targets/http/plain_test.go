package httptarget

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/caddywebhook/targets/targettest"
)

// rawUpstream is an HTTP/1.1 upstream that answers each request with the
// bytes a test scripts, so that the answers net/http's server would never
// send (bytes after the answer, a close without an answer) can be sent.
// It counts connections and requests.
type rawUpstream struct {
	ln net.Listener
	// answer returns the bytes to write for the n-th request (from 0) of
	// the whole upstream, and what to do with the connection afterwards:
	// keep it, close it, or reset it (an RST, as a crashed upstream).
	answer func(n int) (raw string, then after)

	mu       sync.Mutex
	requests int // requests read, over all connections
	conns    int // connections accepted
	eofs     int // connections the client closed
	ended    int // connections the upstream's side has ended
}

func startRawUpstream(t *testing.T, answer func(n int) (string, after)) *rawUpstream {
	t.Helper()
	skipWithoutPlain(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpstream{ln: ln, answer: answer}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			u.mu.Lock()
			u.conns++
			u.mu.Unlock()
			wg.Go(func() { u.serve(conn) })
		}
	})
	return u
}

func (u *rawUpstream) serve(conn net.Conn) {
	defer func() {
		conn.Close()
		u.mu.Lock()
		u.ended++
		u.mu.Unlock()
	}()
	br := bufio.NewReader(conn)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			if errors.Is(err, io.EOF) {
				u.mu.Lock()
				u.eofs++
				u.mu.Unlock()
			}
			return
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return
		}
		u.mu.Lock()
		n := u.requests
		u.requests++
		u.mu.Unlock()
		raw, then := u.answer(n)
		if _, err := io.WriteString(conn, raw); err != nil || then == closeConn {
			return
		}
		if then == resetConn {
			conn.(*net.TCPConn).SetLinger(0)
			return
		}
	}
}

// counts returns the requests read and the connections accepted so far.
func (u *rawUpstream) counts() (requests, conns int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.requests, u.conns
}

func (u *rawUpstream) target(t *testing.T) *Target {
	t.Helper()
	tgt := &Target{URL: "http://" + u.ln.Addr().String() + "/hook", now: func() time.Time { return httpTestNow }}
	if err := targettest.Provision(t, tgt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tgt.Cleanup() })
	if tgt.plain == nil {
		t.Fatal("an http:// URL on loopback got no plain client")
	}
	return tgt
}

const noContent = "HTTP/1.1 204 No Content\r\n\r\n"

// after is what a raw upstream does with a connection once it answered.
type after int

const (
	keep after = iota
	closeConn
	resetConn
)

// TestPlainConnectionReuse: a connection carries the next delivery only
// when its answer was read to the end, nothing followed it and the
// upstream did not ask to close it. Each case delivers twice; the second
// answer is always a plain 204.
func TestPlainConnectionReuse(t *testing.T) {
	tests := []struct {
		name      string
		first     string // the answer to the first delivery
		want      string // its outcome
		wantConns int    // connections the two deliveries used
	}{
		{"204 without a body", noContent, "done", 1},
		{"200 with a short body", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", "done", 1},
		{"chunked body", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", "done", 1},
		{"500 with an error body", "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\nboom", "transient", 1},
		{"Connection: close", "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n", "done", 2},
		{"an HTTP/1.0 answer", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", "done", 2},
		{"a body larger than the drain limit", "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + strings.Repeat("x", 100000), "done", 2},
		{"bytes after the answer", noContent + "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n", "done", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := startRawUpstream(t, func(n int) (string, after) {
				if n == 0 {
					return tt.first, keep
				}
				return noContent, keep
			})
			tgt := u.target(t)
			if got := targettest.Outcome(tgt.Deliver(t.Context(), targettest.Job("http"))); got != tt.want {
				t.Fatalf("first delivery: outcome = %s, want %s", got, tt.want)
			}
			if err := tgt.Deliver(t.Context(), targettest.Job("http")); err != nil {
				t.Fatalf("second delivery: %v, want done", err)
			}
			requests, conns := u.counts()
			if requests != 2 || conns != tt.wantConns {
				t.Errorf("upstream saw %d requests on %d connections, want 2 on %d", requests, conns, tt.wantConns)
			}
		})
	}
}

// TestPlainStaleConnection: an upstream that closes a kept-alive
// connection while it is idle (Node's keepAliveTimeout closes after 5 s)
// costs the next delivery nothing: it goes out again on a new connection,
// and the upstream sees it once. A new connection that ends without an
// answer is a transient failure, not sent twice.
func TestPlainStaleConnection(t *testing.T) {
	tests := []struct {
		name         string
		answer       func(n int) (string, after)
		want         string // the second delivery's outcome
		wantRequests int
	}{
		{"closed after the answer", func(int) (string, after) { return noContent, closeConn }, "done", 2},
		{"reset after the answer", func(int) (string, after) { return noContent, resetConn }, "done", 2},
		{"no answer on a new connection", func(n int) (string, after) {
			if n == 0 {
				return noContent, closeConn
			}
			return "", closeConn
		}, "transient", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := startRawUpstream(t, tt.answer)
			tgt := u.target(t)
			if err := tgt.Deliver(t.Context(), targettest.Job("http")); err != nil {
				t.Fatalf("first delivery: %v", err)
			}
			// The upstream has closed the idle connection, as after an
			// idle timeout.
			waitFor(t, func() bool {
				u.mu.Lock()
				defer u.mu.Unlock()
				return u.ended == 1
			})
			err := tgt.Deliver(t.Context(), targettest.Job("http"))
			if got := targettest.Outcome(err); got != tt.want {
				t.Fatalf("second delivery: outcome = %s (%v), want %s", got, err, tt.want)
			}
			if requests, _ := u.counts(); requests != tt.wantRequests {
				t.Errorf("upstream read %d requests, want %d", requests, tt.wantRequests)
			}
		})
	}
}

// TestPlainInformationalAnswers: 1xx answers before the final one are
// skipped, as net/http's client does, up to a bound.
func TestPlainInformationalAnswers(t *testing.T) {
	tests := []struct {
		name   string
		answer string
		want   string
	}{
		{"100 Continue, then 204", "HTTP/1.1 100 Continue\r\n\r\n" + noContent, "done"},
		{"103 Early Hints, then 500", "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n", "transient"},
		{"six 100s", strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 6) + noContent, "transient"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := startRawUpstream(t, func(int) (string, after) { return tt.answer, keep })
			tgt := u.target(t)
			err := tgt.Deliver(t.Context(), targettest.Job("http"))
			if got := targettest.Outcome(err); got != tt.want {
				t.Fatalf("outcome = %s (%v), want %s", got, err, tt.want)
			}
		})
	}
}

// TestPlainIdleConnectionsClosed: idle connections are closed after the
// idle timeout and by Cleanup, so an upstream no one delivers to holds no
// sockets of ours.
func TestPlainIdleConnectionsClosed(t *testing.T) {
	tests := []struct {
		name        string
		idleTimeout time.Duration
		cleanup     bool
	}{
		{"idle timeout", 100 * time.Millisecond, false},
		{"cleanup", time.Hour, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := startRawUpstream(t, func(int) (string, after) { return noContent, keep })
			tgt := u.target(t)
			tgt.plain.idleTimeout = tt.idleTimeout
			if err := tgt.Deliver(t.Context(), targettest.Job("http")); err != nil {
				t.Fatal(err)
			}
			if tt.cleanup {
				_ = tgt.Cleanup()
			}
			waitFor(t, func() bool {
				u.mu.Lock()
				defer u.mu.Unlock()
				return u.eofs == 1
			})
		})
	}
}

// TestPlainAddr: http:// URLs that no proxy stands in front of get the
// plain client; https:// and proxied ones keep net/http's Transport.
func TestPlainAddr(t *testing.T) {
	skipWithoutPlain(t)
	proxyAll := func(*http.Request) (*url.URL, error) { return url.Parse("http://proxy.internal:3128") }
	tests := []struct {
		name     string
		url      string
		proxy    func(*http.Request) (*url.URL, error)
		wantAddr string // "" for the Transport
	}{
		{"http with a port", "http://127.0.0.1:9080/hook", nil, "127.0.0.1:9080"},
		{"http without a port", "http://app.internal/hook?x=1", nil, "app.internal:80"},
		{"IPv6 literal", "http://[::1]:9080/hook", nil, "[::1]:9080"},
		{"environment without a proxy", "http://app.internal/hook", http.ProxyFromEnvironment, "app.internal:80"},
		{"https", "https://app.internal/hook", nil, ""},
		{"behind a proxy", "http://app.internal/hook", proxyAll, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := url.Parse(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			addr, ok := plainAddr(u, tt.proxy)
			if addr != tt.wantAddr || ok != (tt.wantAddr != "") {
				t.Errorf("plainAddr(%s) = %q, %v; want %q", tt.url, addr, ok, tt.wantAddr)
			}
		})
	}
}

// TestTargetHTTPS: an https:// upstream is reached through net/http's
// Transport, with the same request and the same outcomes.
func TestTargetHTTPS(t *testing.T) {
	tests := []struct {
		name   string
		status int
		want   string
	}{
		{"204", http.StatusNoContent, "done"},
		{"503", http.StatusServiceUnavailable, "transient"},
		{"410", http.StatusGone, "permanent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := make(chan http.Header, 1)
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen <- r.Header.Clone()
				w.WriteHeader(tt.status)
			}))
			t.Cleanup(srv.Close)
			tgt := &Target{URL: srv.URL + "/hook", now: func() time.Time { return httpTestNow }}
			if err := targettest.Provision(t, tgt); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = tgt.Cleanup() })
			if tgt.plain != nil {
				t.Fatal("an https:// URL got the plain client")
			}
			tgt.transport.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig
			err := tgt.Deliver(t.Context(), targettest.Job("http"))
			if outcome := targettest.Outcome(err); outcome != tt.want {
				t.Fatalf("outcome = %s (%v), want %s", outcome, err, tt.want)
			}
			got := <-seen
			if got.Get("X-Webhook-Job-Id") != "42" || got.Get("X-GitHub-Event") != "push" {
				t.Errorf("upstream saw headers %v, want the job's metadata and stored headers", got)
			}
		})
	}
}

// skipWithoutPlain skips a test of the plain client where every upstream
// goes through net/http's Transport (plain_peek_other.go).
func skipWithoutPlain(t testing.TB) {
	t.Helper()
	if !plainSupported {
		t.Skip("no plain client on this system")
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
