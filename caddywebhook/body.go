package caddywebhook

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// bodyBuffers recycles request body buffers. Only buffers up to
// maxPooledBuffer go back, so a few large bodies do not pin memory.
var bodyBuffers = sync.Pool{New: func() any { b := make([]byte, 0, minBodyBuffer); return &b }}

const (
	// minBodyBuffer is the capacity a body starts with: most webhooks fit,
	// and a sender that declares more gets more only as it sends it.
	minBodyBuffer   = 4 << 10
	maxPooledBuffer = 256 << 10
)

// Errors of readBody.
var (
	// errTooLarge reports a body over the cap.
	errTooLarge = errors.New("body too large")
	// errBusy reports a body that would take the receiver past its bound
	// on the bytes of bodies being read.
	errBusy = errors.New("too many body bytes in flight")
	// errTooSlow reports a body that fell behind min_body_rate.
	errTooSlow = errors.New("body arrives too slowly")
)

// bodyRateGrace is how far behind min_body_rate a body may fall before it
// is cut: room for a stalled TCP window or a garbage collection, far
// shorter than the server's read_body_idle (1 minute by default).
const bodyRateGrace = 2 * time.Second

// defaultMinBodyRate is the default min_body_rate, in bytes per second:
// 512 kbit/s, far below what a provider's servers send at, so only a body
// that trickles is cut (a 1 MiB body may take 12 s past its first 256 KiB).
const defaultMinBodyRate = 64 << 10

// busyRetryAfter is the Retry-After of a 503 for a receiver at its bound
// on body bytes in flight, in seconds.
const busyRetryAfter = "5"

// diskLowRetryAfter is the Retry-After of a 503 disk_low, in seconds:
// space comes back when an operator frees it, not in a moment.
const diskLowRetryAfter = "60"

func putBuffer(bp *[]byte) {
	if cap(*bp) <= maxPooledBuffer {
		bodyBuffers.Put(bp)
	}
}

// bodyBudget bounds the bytes held by the bodies a receiver is reading or
// verifying, beyond their pooled buffers: limit for all its requests
// together, perClient for those of one client address, so that one sender
// holding many slow requests leaves room for the others. It is consulted
// only when a body outgrows the first 4 KiB (minBodyBuffer) of its pooled
// buffer, so small webhooks never take its lock.
type bodyBudget struct {
	limit     int64
	perClient int64

	mu      sync.Mutex
	used    int64
	clients map[netip.Addr]int64 // bytes held per client; no zero entries
}

// reserve charges n bytes to client, or charges nothing and reports false
// when that would pass the limit or the client's share.
func (b *bodyBudget) reserve(client netip.Addr, n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	held := b.clients[client]
	if b.used+n > b.limit || held+n > b.perClient {
		return false
	}
	if b.clients == nil {
		b.clients = make(map[netip.Addr]int64)
	}
	b.used += n
	b.clients[client] = held + n
	return true
}

// release gives back n bytes charged to client by reserve.
func (b *bodyBudget) release(client netip.Addr, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if left := b.clients[client] - n; left > 0 {
		b.clients[client] = left
	} else {
		delete(b.clients, client)
	}
}

// inUse returns the bytes charged, in all and to client.
func (b *bodyBudget) inUse(client netip.Addr) (all, byClient int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.clients[client]
}

// clientAddr is the address whose share of the budget r's body is charged
// to: Caddy's client IP, the one its access log, its client_ip matcher and
// its rate limiters see (the connection's remote address, or what a
// proxy listed in trusted_proxies reported), so that a request header is
// trusted exactly when Caddy trusts it. An IPv6 address counts as its /64,
// the least a host is given. A request without one (outside Caddy) is
// charged to the unspecified address.
func clientAddr(r *http.Request) netip.Addr {
	s, ok := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string)
	if !ok || s == "" {
		s, _, _ = net.SplitHostPort(r.RemoteAddr)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}
	}
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		a = p.Addr()
	}
	return a
}

// requestBody is one request's body while the receiver holds it: the
// pooled buffer it is read into and what the reading charged to the
// budget. release gives both back, once; ServeHTTP calls it for every
// request, Verify's caller earlier for the budget alone.
type requestBody struct {
	bp      *[]byte
	budget  *bodyBudget
	client  netip.Addr
	charged bool  // client is set
	held    int64 // charged to budget
	whole   bool  // read to its end: nothing is left for the server to drain
	kept    bool  // a store that gave up may still hold the bytes: not recycled
}

// releaseBudget gives back the bytes charged to the budget.
func (b *requestBody) releaseBudget() {
	if b.held != 0 {
		b.budget.release(b.client, b.held)
		b.held = 0
	}
}

// release gives back the budget and, unless kept, the buffer.
func (b *requestBody) release() {
	b.releaseBudget()
	if b.bp != nil && !b.kept {
		putBuffer(b.bp)
	}
	b.bp = nil
}

// bodyLimits are the caps of one read: max_body, the declared length
// (-1 if unknown) and min_body_rate (0: none).
type bodyLimits struct {
	max, hint, minRate int64
}

// read reads r's body into a pooled buffer, reusing its capacity, and
// fails with errTooLarge as soon as it holds more than lim.max bytes.
// lim.hint is only a promise: the buffer grows as bytes arrive (doubling,
// so a body costs at most about twice its size) and never past hint+1
// while the promise holds. Each growth is charged to the budget first,
// errBusy reporting one it refused. Once the buffer is larger than a
// pooled one, the rest must arrive at lim.minRate (errTooSlow).
//
// A recycled buffer may be up to maxPooledBuffer large, but a body sees
// only its first minBodyBuffer bytes, as with a new one: the rest is
// handed out by fill's growth, charged like any other, so reusing memory
// never lets a body hold more than the budget says.
func (b *requestBody) read(w http.ResponseWriter, r *http.Request, lim bodyLimits) ([]byte, error) {
	b.bp = bodyBuffers.Get().(*[]byte)
	return b.readInto(w, r, lim)
}

// readInto is read into the buffer b.bp already holds.
func (b *requestBody) readInto(w http.ResponseWriter, r *http.Request, lim bodyLimits) ([]byte, error) {
	pooled := *b.bp
	buf, err := b.fill(w, r, pooled[:0:min(cap(pooled), minBodyBuffer)], lim)
	if cap(buf) > cap(pooled) {
		*b.bp = buf[:0] // grown past the recycled buffer: keep the larger
	}
	b.whole = err == nil
	return buf, err
}

func (b *requestBody) fill(w http.ResponseWriter, r *http.Request, buf []byte, lim bodyLimits) ([]byte, error) {
	if r.Body == nil {
		return buf, nil
	}
	var pace bodyPace
	defer pace.stop()
	for {
		if len(buf) == cap(buf) {
			next := min(max(2*int64(cap(buf)), minBodyBuffer), lim.max+1)
			if lim.hint >= int64(len(buf)) {
				// One byte past the hint lets the read end on EOF
				// without growing again.
				next = min(next, lim.hint+1)
			}
			if !b.charge(r, next-b.held) {
				return buf, errBusy
			}
			b.held = next
			if b.bp != nil && int64(cap(*b.bp)) >= next {
				pooled := *b.bp
				// Still inside the recycled buffer, whose first bytes buf
				// is: widen the view rather than allocate.
				buf = pooled[:len(buf):next]
			} else {
				grown := make([]byte, len(buf), next)
				copy(grown, buf)
				buf = grown
			}
			if next > maxPooledBuffer && lim.minRate > 0 && !pace.on {
				pace.start(w, lim.minRate, len(buf))
			}
		}
		pace.arm(len(buf))
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > lim.max {
			return buf, errTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			var mbe *http.MaxBytesError
			switch {
			case errors.As(err, &mbe):
				// request_body's own cap, ahead of ours.
				return buf, errTooLarge
			case pace.on && errors.Is(err, os.ErrDeadlineExceeded):
				return buf, errTooSlow
			}
			return buf, err
		}
	}
}

// charge reserves n more bytes for r's client.
func (b *requestBody) charge(r *http.Request, n int64) bool {
	if !b.charged {
		b.client, b.charged = clientAddr(r), true
	}
	return b.budget.reserve(b.client, n)
}

// bodyPace holds a body to a minimum rate through the connection's read
// deadline, as Caddy's read_body_idle with a min_rate does (and Apache's
// mod_reqtimeout MinRate): from start, each byte buys 1/rate seconds on
// top of bodyRateGrace. Setting the deadline through the
// ResponseController reaches Caddy's own idle reader, which keeps it as a
// ceiling, or the connection when Caddy has none.
type bodyPace struct {
	on    bool
	ctrl  *http.ResponseController
	rate  int64
	since time.Time
	base  int // bytes held at since
}

func (p *bodyPace) start(w http.ResponseWriter, rate int64, held int) {
	*p = bodyPace{on: true, ctrl: http.NewResponseController(w), rate: rate, since: time.Now(), base: held}
}

// arm sets the deadline of the next read, for a body that holds n bytes.
func (p *bodyPace) arm(n int) {
	if !p.on {
		return
	}
	credit := time.Duration(int64(n-p.base)) * time.Second / time.Duration(p.rate)
	if p.ctrl.SetReadDeadline(p.since.Add(bodyRateGrace+credit)) != nil {
		// Not a connection (a test's recorder): nothing to hold to.
		p.on = false
	}
}

// stop clears the deadline, so it does not outlive the body.
func (p *bodyPace) stop() {
	if p.on {
		p.ctrl.SetReadDeadline(time.Time{})
	}
}
