package httptarget

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"sync"
	"time"
)

const (
	// plainMaxIdle is how many idle connections a plain client keeps for
	// its upstream, as the transport's MaxIdleConnsPerHost: several workers
	// deliver to the same upstream at once.
	plainMaxIdle = 32
	// plainIdleTimeout closes a connection idle for longer, as
	// http.DefaultTransport's IdleConnTimeout.
	plainIdleTimeout = 90 * time.Second
	// plainMax1xx is how many informational answers (100 Continue, 103
	// Early Hints) may precede the final one, as net/http's client allows.
	plainMax1xx = 5
)

// errHeaderLimit is what a connection's reader returns once the answer's
// headers have used up maxResponseHeader bytes.
var errHeaderLimit = fmt.Errorf("response headers exceeded %d bytes", maxResponseHeader)

// plainClient posts deliveries to an http:// upstream that no proxy
// stands in front of, over HTTP/1.1 connections it keeps alive. It writes
// the request and reads the answer in the worker's own goroutine.
// net/http's Transport, which https:// and proxied upstreams keep, runs
// two goroutines per connection and hands every request and answer
// between them over channels; under load that was about 45 µs of Caddy's
// CPU per delivered event, of which the two socket calls were 16
// (docs/BENCHMARKS-LOG.md).
//
// What the Transport did that a delivery needs, it does too: a bound on
// the answer's headers, 1xx answers skipped, a connection reused only
// after its answer was read to the end and left nothing unread, and a
// kept-alive connection that the upstream has closed since (an idle
// timeout: Node closes after 5 s) left for a new one before a request is
// written on it. A request is never written twice: a connection that
// fails after the request went out is the attempt's transient error, as
// with the Transport, and the retry carries the next attempt number.
type plainClient struct {
	addr        string // host:port
	dialer      net.Dialer
	idleTimeout time.Duration

	mu     sync.Mutex
	idle   []*plainConn // most recently used last
	sweep  *time.Timer  // closes connections idle past idleTimeout
	closed bool
}

// newPlainClient returns a client for the upstream at addr (host:port).
func newPlainClient(addr string) *plainClient {
	return &plainClient{addr: addr, dialer: net.Dialer{KeepAlive: 30 * time.Second}, idleTimeout: plainIdleTimeout}
}

// plainConn is one connection to the upstream, with its buffers.
type plainConn struct {
	conn   net.Conn
	br     *bufio.Reader
	bw     *bufio.Writer
	peek   *peeker   // tells whether the upstream closed it while idle
	limit  int64     // bytes br may still read: the answer's header bound
	idleAt time.Time // when it was last handed back
}

// Read reads from the connection for br, within the limit.
func (c *plainConn) Read(p []byte) (int, error) {
	if c.limit <= 0 {
		return 0, errHeaderLimit
	}
	if int64(len(p)) > c.limit {
		p = p[:c.limit]
	}
	n, err := c.conn.Read(p)
	c.limit -= int64(n)
	return n, err
}

// roundTrip sends req, which must not be used again, and returns the
// upstream's final answer. The attempt ends at deadline or when ctx is
// done, whichever comes first. The caller must close the answer's body:
// that hands the connection back for the next delivery, or closes it.
func (c *plainClient) roundTrip(ctx context.Context, req *http.Request, deadline time.Time) (*http.Response, error) {
	pc, err := c.get(ctx, deadline)
	if err != nil {
		return nil, err
	}
	return c.exchange(ctx, pc, req)
}

// exchange writes req on pc, whose deadline is set, and reads the final
// answer, whose body hands pc back when closed. On an error pc is closed.
func (c *plainClient) exchange(ctx context.Context, pc *plainConn, req *http.Request) (*http.Response, error) {
	// A cancelled attempt (shutdown, a lost lease) ends the exchange at
	// once: a deadline in the past fails the read or write in progress.
	stop := context.AfterFunc(ctx, func() { _ = pc.conn.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (*http.Response, error) {
		stop()
		pc.conn.Close()
		return nil, err
	}
	if err := req.Write(pc.bw); err != nil {
		return fail(err)
	}
	if err := pc.bw.Flush(); err != nil {
		return fail(err)
	}
	var resp *http.Response
	for informational := 0; ; informational++ {
		pc.limit = maxResponseHeader
		var err error
		resp, err = http.ReadResponse(pc.br, req)
		if err != nil {
			if pc.limit <= 0 {
				err = errHeaderLimit
			}
			return fail(err)
		}
		// 101 Switching Protocols is final, and the connection is then
		// not HTTP any more.
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		if informational == plainMax1xx {
			return fail(fmt.Errorf("upstream sent more than %d informational answers", plainMax1xx))
		}
	}
	pc.limit = math.MaxInt64
	resp.Body = &plainBody{
		body:   resp.Body,
		client: c,
		pc:     pc,
		stop:   stop,
		keep:   !resp.Close && resp.StatusCode != http.StatusSwitchingProtocols,
	}
	return resp, nil
}

// get returns an idle connection that the upstream has not closed, or a
// new one, with its deadline set.
func (c *plainClient) get(ctx context.Context, deadline time.Time) (*plainConn, error) {
	now := time.Now()
	for {
		c.mu.Lock()
		if len(c.idle) == 0 {
			c.mu.Unlock()
			break
		}
		pc := c.idle[len(c.idle)-1]
		c.idle[len(c.idle)-1] = nil
		c.idle = c.idle[:len(c.idle)-1]
		c.mu.Unlock()
		// The deadline first: a connection's last one is in the past, and
		// the check's read would fail on it.
		if now.Sub(pc.idleAt) < c.idleTimeout && pc.conn.SetDeadline(deadline) == nil && !pc.peek.closed() {
			return pc, nil
		}
		pc.conn.Close()
	}
	d := c.dialer
	d.Deadline = deadline
	conn, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return nil, err
	}
	if err := conn.SetDeadline(deadline); err != nil {
		conn.Close()
		return nil, err
	}
	pc := &plainConn{conn: conn, bw: bufio.NewWriterSize(conn, 4<<10), peek: newPeeker(conn)}
	pc.br = bufio.NewReaderSize(pc, 4<<10)
	return pc, nil
}

// put keeps pc for the next delivery, or closes it when the client keeps
// enough already or has been closed.
func (c *plainClient) put(pc *plainConn) {
	pc.idleAt = time.Now()
	c.mu.Lock()
	if c.closed || len(c.idle) >= plainMaxIdle {
		c.mu.Unlock()
		pc.conn.Close()
		return
	}
	c.idle = append(c.idle, pc)
	if c.sweep == nil {
		c.sweep = time.AfterFunc(c.idleTimeout, c.closeStale)
	}
	c.mu.Unlock()
}

// closeStale closes the connections idle for idleTimeout, so that an
// upstream no one delivers to any more holds no sockets, and looks again
// while any are left.
func (c *plainClient) closeStale() {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.idle[:0]
	for _, pc := range c.idle {
		if now.Sub(pc.idleAt) >= c.idleTimeout {
			pc.conn.Close()
			continue
		}
		kept = append(kept, pc)
	}
	clear(c.idle[len(kept):])
	c.idle = kept
	if len(c.idle) == 0 || c.closed {
		c.sweep = nil
		return
	}
	c.sweep.Reset(c.idleTimeout - now.Sub(c.idle[0].idleAt))
}

// close closes the idle connections; connections in use are closed when
// their answer's body is.
func (c *plainClient) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, pc := range c.idle {
		pc.conn.Close()
	}
	c.idle = nil
	if c.sweep != nil {
		c.sweep.Stop()
		c.sweep = nil
	}
}

// plainBody is an answer's body. Closing it hands the connection back
// when the body was read to its end, nothing followed it and the attempt
// was not cancelled; otherwise it closes the connection. It never reads
// what the caller left unread: a large body costs less as a new
// connection than as a download.
type plainBody struct {
	body   io.ReadCloser
	client *plainClient
	pc     *plainConn
	stop   func() bool
	keep   bool
	eof    bool
	done   bool
}

func (b *plainBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, errors.New("read on a closed answer body")
	}
	n, err := b.body.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *plainBody) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	// stop is false when the cancellation already set a past deadline.
	if b.stop() && b.eof && b.keep && b.pc.br.Buffered() == 0 {
		b.client.put(b.pc)
		return nil
	}
	return b.pc.conn.Close()
}
