package caddywebhook

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddywebhook/caddywebhook/signature"
)

// TestBodyBudgetPerClient: one client address holds at most its share,
// and others still get in up to the whole limit.
func TestBodyBudgetPerClient(t *testing.T) {
	a, b := netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.1")
	budget := &bodyBudget{limit: 100, perClient: 40}
	steps := []struct {
		name   string
		client netip.Addr
		n      int64
		want   bool
	}{
		{"a within its share", a, 30, true},
		{"a to its share, to the byte", a, 10, true},
		{"a past its share", a, 1, false},
		{"b while a holds its share", b, 40, true},
		{"c, a third address", netip.MustParseAddr("10.0.0.1"), 20, true},
		{"d past the whole limit", netip.MustParseAddr("10.0.0.2"), 11, false},
	}
	for _, s := range steps {
		if got := budget.reserve(s.client, s.n); got != s.want {
			t.Errorf("%s: reserve = %v, want %v", s.name, got, s.want)
		}
	}
	budget.release(a, 40)
	if all, byA := budget.inUse(a); all != 60 || byA != 0 {
		t.Errorf("after a's release: %d in all, %d by a; want 60 and 0", all, byA)
	}
	if !budget.reserve(a, 40) {
		t.Error("a cannot reserve its share again after releasing it")
	}
	if len(budget.clients) != 3 {
		t.Errorf("%d clients tracked, want 3 (no empty entries)", len(budget.clients))
	}
}

func TestClientAddr(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		remote   string
		clientIP string // Caddy's client_ip var; empty: not set
		want     string
	}{
		{"remote IPv4", "192.0.2.7:4711", "", "192.0.2.7"},
		{"Caddy's client IP wins", "10.0.0.1:4711", "198.51.100.9", "198.51.100.9"},
		{"IPv6 counts per /64", "[2001:db8:1:2:3:4:5:6]:443", "", "2001:db8:1:2::"},
		{"IPv4-mapped IPv6", "[::ffff:192.0.2.7]:1", "", "192.0.2.7"},
		{"zone dropped", "[fe80::1%eth0]:1", "", "fe80::"},
		{"no address", "pipe", "", "invalid IP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/", nil)
			r.RemoteAddr = tt.remote
			if tt.clientIP != "" {
				r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{caddyhttp.ClientIPVarKey: tt.clientIP}))
			}
			if got := clientAddr(r).String(); got != tt.want {
				t.Errorf("clientAddr = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestReceiverUnreadBodyClosesConnection: every answer that leaves the
// body unread says Connection: close, so Go's server does not first wait
// for the rest of it; an answer after the whole body does not.
func TestReceiverUnreadBodyClosesConnection(t *testing.T) {
	v, err := signature.New(signature.Config{Scheme: "github", Secrets: []string{testSecret}})
	if err != nil {
		t.Fatal(err)
	}
	rc := &Receiver{Source: "s", verifier: v, maxBody: 1 << 10}
	rc.inflight.limit, rc.inflight.perClient = 1<<20, 1<<20
	signed := func() http.Header {
		return http.Header{"X-Hub-Signature-256": {"sha256=" + strings.Repeat("0", 64)}}
	}
	tests := []struct {
		name      string
		method    string
		header    http.Header
		body      string
		length    int64
		wantClose bool
	}{
		{"no signature header", http.MethodPost, http.Header{}, "{}", 2, true},
		{"declared over max_body", http.MethodPost, signed(), "{}", 2 << 10, true},
		{"sent over max_body", http.MethodPost, signed(), strings.Repeat("x", 2<<10), -1, true},
		{"method not allowed", http.MethodPut, signed(), "{}", 2, true},
		{"read whole, signature wrong", http.MethodPost, signed(), "{}", 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, "/", strings.NewReader(tt.body))
			r.Header, r.ContentLength = tt.header, tt.length
			w := httptest.NewRecorder()
			rc.ServeHTTP(w, r, nil)
			if got := w.Header().Get("Connection") == "close"; got != tt.wantClose {
				t.Errorf("status %d, Connection %q; want close: %v", w.Code, w.Header().Get("Connection"), tt.wantClose)
			}
		})
	}
}

// TestReceiverCutsSlowBody: a body that stops arriving once it holds more
// than a pooled buffer is cut after bodyRateGrace, with 408 too_slow and
// its budget given back, over a real connection.
func TestReceiverCutsSlowBody(t *testing.T) {
	v, err := signature.New(signature.Config{Scheme: "github", Secrets: []string{testSecret}})
	if err != nil {
		t.Fatal(err)
	}
	rc := &Receiver{Source: "s", verifier: v, maxBody: 1 << 20, minBodyRate: 1 << 20}
	rc.inflight.limit, rc.inflight.perClient = 8<<20, 8<<20
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rc.ServeHTTP(w, r, nil) }))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * bodyRateGrace))
	fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nX-Hub-Signature-256: sha256=%s\r\nContent-Length: %d\r\n\r\n", strings.Repeat("0", 64), 1<<20)
	start := time.Now()
	go conn.Write(make([]byte, maxPooledBuffer+1<<10))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	took := time.Since(start)
	if resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
		t.Errorf("status %d, close %v; want 408 and the connection closed", resp.StatusCode, resp.Close)
	}
	if took < bodyRateGrace || took > 4*bodyRateGrace {
		t.Errorf("cut after %v, want about %v", took, bodyRateGrace)
	}
	if used := budgetUsed(&rc.inflight); used != 0 {
		t.Errorf("%d bytes still charged after the cut", used)
	}
}

// TestRecycledBufferCharged: a body read into a recycled buffer larger
// than minBodyBuffer is charged for every byte past the first 4 KiB, as in
// a new buffer, and the recycled memory is reused rather than copied. A
// buffer handed out whole let a body fill 256 KiB uncharged, past the
// budget and the client's share.
func TestRecycledBufferCharged(t *testing.T) {
	tests := []struct {
		name     string
		body     int
		wantHeld int64
		reused   bool // read into the recycled array
	}{
		{name: "fits the first 4 KiB", body: 1000, wantHeld: 0, reused: true},
		{name: "grows inside the recycled buffer", body: 200 << 10, wantHeld: 256 << 10, reused: true},
		{name: "grows past it", body: 300 << 10, wantHeld: 512 << 10, reused: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recycled := make([]byte, 0, maxPooledBuffer)
			first := &recycled[:1][0]
			budget := &bodyBudget{limit: 64 << 20, perClient: 64 << 20}
			b := requestBody{budget: budget, bp: &recycled}
			r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(bytes.Repeat([]byte("x"), tt.body)))
			got, err := b.readInto(httptest.NewRecorder(), r, bodyLimits{max: 1 << 20, hint: -1})
			if err != nil || len(got) != tt.body {
				t.Fatalf("fill = %d bytes, %v; want %d", len(got), err, tt.body)
			}
			if b.held != tt.wantHeld {
				t.Errorf("charged %d bytes, want %d", b.held, tt.wantHeld)
			}
			if all, _ := budget.inUse(testClient); all != tt.wantHeld {
				t.Errorf("budget holds %d bytes, want %d", all, tt.wantHeld)
			}
			if same := &got[:1][0] == first; same != tt.reused {
				t.Errorf("read into the recycled buffer = %v, want %v", same, tt.reused)
			}
			if tt.reused && cap(*b.bp) != maxPooledBuffer {
				t.Errorf("the buffer goes back with capacity %d, want the recycled %d", cap(*b.bp), maxPooledBuffer)
			}
		})
	}
}
