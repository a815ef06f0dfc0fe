package loadgen

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/signature"
)

func TestPercentile(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = ms(i + 1)
	}
	tests := []struct {
		name string
		lat  []time.Duration
		q    float64
		want time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", []time.Duration{ms(7)}, 0.99, ms(7)},
		{"median of 100", hundred, 0.50, ms(50)},
		{"p99 of 100", hundred, 0.99, ms(99)},
		{"max of 100", hundred, 1, ms(100)},
		{"p99 of 3 is the max", []time.Duration{ms(1), ms(2), ms(3)}, 0.99, ms(3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.lat, tt.q); got != tt.want {
				t.Errorf("Percentile(%v) = %s, want %s", tt.q, got, tt.want)
			}
		})
	}
}

func TestReadResponse(t *testing.T) {
	tests := []struct {
		name      string
		raw       string
		status    int
		closeConn bool
		wantErr   bool
	}{
		{"empty body", "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n", 202, false, false},
		{"body with length", "HTTP/1.1 401 Unauthorized\r\nContent-Length: 5\r\n\r\nhello", 401, false, false},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3;x=y\r\nabc\r\n0\r\n\r\n", 200, false, false},
		{"connection close", "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", 503, true, false},
		{"no length runs to the end", "HTTP/1.0 200 OK\r\n\r\n", 200, true, false},
		{"no content on 204", "HTTP/1.1 204 No Content\r\n\r\n", 204, false, false},
		{"garbage", "SSH-2.0-OpenSSH\r\n", 0, false, true},
		{"truncated body", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 0, false, true},
		{"bad length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A good response twice back to back: the first must be
			// consumed exactly. A bad one alone, so nothing pads it.
			input := tt.raw
			if !tt.wantErr {
				input += tt.raw
			}
			br := bufio.NewReader(strings.NewReader(input))
			status, closeConn, err := readResponse(br)
			if (err != nil) != tt.wantErr {
				t.Fatalf("readResponse: err = %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if status != tt.status || closeConn != tt.closeConn {
				t.Errorf("readResponse = %d, close %v; want %d, close %v", status, closeConn, tt.status, tt.closeConn)
			}
			if !closeConn {
				if status2, _, err := readResponse(br); err != nil || status2 != tt.status {
					t.Errorf("second response = %d, %v; the first was not consumed exactly", status2, err)
				}
			}
		})
	}
}

// verifyingServer is a webhook endpoint in the shape of the receiver: it
// verifies the GitHub signature and answers 202, or 401, and remembers the
// delivery ids it accepted. Every tenth request it closes the connection
// after answering, as a server may.
type verifyingServer struct {
	v     signature.Verifier
	mu    sync.Mutex
	ids   map[string]int
	sizes map[int]int
	n     int
}

func (s *verifyingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	res, err := s.v.Verify(signature.Request{Method: "POST", Header: r.Header, Body: body})
	if err != nil {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	s.mu.Lock()
	s.ids[res.DeliveryID]++
	s.sizes[len(body)]++
	s.n++
	closeConn := s.n%10 == 0
	s.mu.Unlock()
	if closeConn {
		w.Header().Set("Connection", "close")
	}
	w.WriteHeader(http.StatusAccepted)
}

func setupServer(t *testing.T, secret string) (*verifyingServer, string) {
	t.Helper()
	v, err := signature.New(signature.Config{Scheme: signature.SchemeGitHub, Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	s := &verifyingServer{v: v, ids: make(map[string]int), sizes: make(map[int]int)}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, strings.TrimPrefix(srv.URL, "http://")
}

func TestLoadRun(t *testing.T) {
	tests := []struct {
		name       string
		signWith   string
		servers    int
		wantStatus int
	}{
		{"signed requests are accepted", "right", 1, http.StatusAccepted},
		{"a wrong secret is refused", "wrong", 1, http.StatusUnauthorized},
		{"connections go round-robin over the servers", "right", 2, http.StatusAccepted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var srvs []*verifyingServer
			var addrs []string
			for range tt.servers {
				srv, addr := setupServer(t, "right")
				srvs, addrs = append(srvs, srv), append(addrs, addr)
			}
			l := Load{Addrs: addrs, Path: "/hook", Secret: tt.signWith, Tag: "t", BodySize: 300,
				Conns: 3, Warmup: 20 * time.Millisecond, Duration: 150 * time.Millisecond, Want: http.StatusAccepted}
			res, err := l.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.Sent == 0 || res.Transport != 0 {
				t.Fatalf("sent %d, transport errors %d; want some requests and no errors", res.Sent, res.Transport)
			}
			if res.Statuses[tt.wantStatus] != res.Sent {
				t.Errorf("statuses %v, want all %d", res.Statuses, tt.wantStatus)
			}
			if int64(len(res.Lat)) > res.Sent || res.OKWindow > res.OK {
				t.Errorf("window counts %d latencies, %d ok exceed the totals %d, %d", len(res.Lat), res.OKWindow, res.Sent, res.OK)
			}
			ids := res.AcceptedIDs(l.Tag)
			seen := 0
			for i, srv := range srvs {
				srv.mu.Lock()
				defer srv.mu.Unlock()
				seen += len(srv.ids)
				if tt.wantStatus == http.StatusAccepted && len(srv.ids) == 0 {
					t.Errorf("server %d got no request", i)
				}
				for id := range srv.ids {
					// Connection c of tag t sends t-c-seq, to server c%n.
					c, _, _ := strings.Cut(strings.TrimPrefix(id, l.Tag+"-"), "-")
					if atoi(t, c)%len(srvs) != i {
						t.Errorf("server %d got %s, from connection %s", i, id, c)
					}
					if _, ok := ids[id]; !ok {
						t.Errorf("server accepted %s, which the load did not count", id)
					}
					if srv.ids[id] != 1 {
						t.Errorf("id %s accepted %d times by the server, want 1", id, srv.ids[id])
					}
				}
				for size := range srv.sizes {
					if size != l.BodySize {
						t.Errorf("server saw a body of %d bytes, want %d", size, l.BodySize)
					}
				}
			}
			if len(ids) != seen || int64(len(ids)) != res.OK {
				t.Fatalf("load counted %d accepted (%d unique ids), the servers accepted %d ids", res.OK, len(ids), seen)
			}
		})
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}

// TestPairedTrace: a paired load sends a trace context in every other
// slice of the window, and its halves' rates are each over their own
// share of it.
func TestPairedTrace(t *testing.T) {
	l := Load{PairEvery: 250 * time.Millisecond}
	from := time.Unix(1000, 0)
	tests := []struct {
		name   string
		at     time.Duration
		traced bool
	}{
		{"warmup", -100 * time.Millisecond, false},
		{"first slice", 10 * time.Millisecond, false},
		{"second slice", 260 * time.Millisecond, true},
		{"third slice", 500 * time.Millisecond, false},
		{"fourth slice", 999 * time.Millisecond, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := l.secondAt(from.Add(tt.at), from); got != tt.traced {
				t.Errorf("secondAt(%v) = %v, want %v", tt.at, got, tt.traced)
			}
		})
	}
	for _, tt := range []struct {
		window, traced time.Duration
	}{{time.Second, 500 * time.Millisecond}, {1100 * time.Millisecond, 500 * time.Millisecond}, {1400 * time.Millisecond, 650 * time.Millisecond}} {
		if got := l.secondShare(tt.window); got != tt.traced {
			t.Errorf("secondShare(%v) = %v, want %v", tt.window, got, tt.traced)
		}
	}
	first := Load{PairEvery: 250 * time.Millisecond, SecondFirst: true}
	if !first.secondAt(from.Add(10*time.Millisecond), from) || first.secondAt(from.Add(260*time.Millisecond), from) {
		t.Error("a load that starts traced does not alternate from a traced first slice")
	}
	if got := first.secondShare(1100 * time.Millisecond); got != 600*time.Millisecond {
		t.Errorf("secondShare of a load that starts traced = %v, want 600ms", got)
	}
	r := Result{Window: time.Second, WindowSecond: 500 * time.Millisecond, OKWindow: 1900, OKSecond: 900}
	if plain, traced := r.PairRates(); plain != 2000 || traced != 1800 {
		t.Errorf("pairRates = %v, %v; want 2000, 1800", plain, traced)
	}
	if plain, traced := (&Result{Window: time.Second, OKWindow: 5}).PairRates(); plain != 0 || traced != 0 {
		t.Errorf("an unpaired load's pairRates = %v, %v; want none", plain, traced)
	}
}
