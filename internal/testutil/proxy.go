package testutil

import (
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to a target, and can stop forwarding
// without closing anything: a partition as a client sees one, its
// connections open and nothing answering, or a link that holds the
// server's answers back. Bytes read meanwhile are held and sent once the
// proxy resumes.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	up    chan struct{} // closed while client-to-server bytes flow
	down  chan struct{} // closed while server-to-client bytes flow
	conns []net.Conn
	done  bool
}

// NewProxy listens on a loopback port and forwards each connection to
// target (host:port) until tb ends.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("proxy: listen: %v", err)
	}
	p := &Proxy{ln: ln, target: target, up: make(chan struct{}), down: make(chan struct{})}
	close(p.up)
	close(p.down)
	go p.accept()
	tb.Cleanup(p.close)
	return p
}

// ProxyDSN returns dsn, a postgres:// URL, with its host and port replaced
// by the proxy's.
func (p *Proxy) ProxyDSN(tb testing.TB, dsn string) string {
	tb.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		tb.Fatalf("proxy: the DSN is not a URL")
	}
	u.Host = p.Addr()
	return u.String()
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Partition stops forwarding in both directions.
func (p *Proxy) Partition() { p.stop(true, true) }

// HoldAnswers stops forwarding the server's bytes to the clients; what
// the clients send still reaches the server.
func (p *Proxy) HoldAnswers() { p.stop(false, true) }

// Heal forwards again, in both directions, what was held first.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range []*chan struct{}{&p.up, &p.down} {
		select {
		case <-*c:
		default:
			close(*c)
		}
	}
}

func (p *Proxy) stop(up, down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if up {
		p.up = reopened(p.up)
	}
	if down {
		p.down = reopened(p.down)
	}
}

// reopened returns an open gate: c if it is open, else a new one.
func reopened(c chan struct{}) chan struct{} {
	select {
	case <-c:
		return make(chan struct{})
	default:
		return c
	}
}

func (p *Proxy) gate(up bool) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if up {
		return p.up
	}
	return p.down
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.done {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go p.pipe(s, c, true)
		go p.pipe(c, s, false)
	}
}

// pipe copies from src to dst while the gate of its direction is open.
func (p *Proxy) pipe(dst, src net.Conn, up bool) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-p.gate(up)
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a closed connection: both ends close
		}
	}
}

func (p *Proxy) close() {
	p.mu.Lock()
	p.done = true
	conns := p.conns
	p.mu.Unlock()
	p.ln.Close()
	p.Heal()
	for _, c := range conns {
		c.Close()
	}
}
