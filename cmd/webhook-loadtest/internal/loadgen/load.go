// Package loadgen is the load test's load generator: keep-alive
// connections, each sending its next signed request as soon as the last is
// answered (a closed loop, as wrk does), with a unique delivery id per
// request, counting every answer and the latencies of the measured window.
// A load may be paired with itself: its requests alternate between two
// halves every slice of the window, counted apart.
package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/caddywebhook/caddywebhook/signature"
)

// Load describes one phase's traffic: where it goes and what it sends.
type Load struct {
	Addrs    []string      // host:port of each Caddy's HTTP server; connection c goes to Addrs[c%len(Addrs)]
	Path     string        // request path
	Secret   string        // GitHub scheme secret the requests are signed with
	Tag      string        // prefix of the delivery ids, unique per phase
	BodySize int           // bytes per body
	Conns    int           // keep-alive connections, one request in flight each
	Warmup   time.Duration // traffic before the measured window
	Duration time.Duration // the measured window
	Want     int           // the status that counts as a success
	// Fill writes the body of the request with delivery id id into b, all
	// of it; nil: FillBody's JSON object.
	Fill func(b []byte, id string)
	// PairEvery, when set, pairs the phase with itself: from the window's
	// start, requests go as the first half for PairEvery, then as the
	// second half for PairEvery, and so on, and the two halves are counted
	// apart (Result.PairRates). Both see the same machine at almost
	// the same moments, so their ratio does not follow the machine's
	// changing load as two phases' rates do.
	PairEvery time.Duration
	// SecondFirst starts a paired window with the second half; rounds
	// take turns, so neither half always has the window's first slice.
	SecondFirst bool
	// What the second half's requests do differently: carry a trace
	// context (SecondTraced: the traced phases), or go to SecondPath
	// instead of Path (the rules phase's filtered receiver).
	SecondTraced bool
	SecondPath   string
}

// secondAt reports whether a request sent at t is in the pair's second
// half (a trace context, or the second path).
func (l Load) secondAt(t, measureFrom time.Time) bool {
	if l.PairEvery <= 0 {
		return false
	}
	d := t.Sub(measureFrom)
	return d >= 0 && l.secondSlice(d/l.PairEvery)
}

// secondSlice reports whether the window's k'th slice is the second half's.
func (l Load) secondSlice(k time.Duration) bool {
	return k%2 == 1 != l.SecondFirst
}

// secondShare is how much of a window of length w a paired load spends
// sending its second half: the odd slices of PairEvery.
func (l Load) secondShare(w time.Duration) time.Duration {
	if l.PairEvery <= 0 {
		return 0
	}
	var second time.Duration
	for from := time.Duration(0); from < w; from += l.PairEvery {
		if l.secondSlice(from / l.PairEvery) {
			second += min(l.PairEvery, w-from)
		}
	}
	return second
}

// loadTraceparent is the trace context of a traced phase's requests, the
// W3C specification's example: one per request would only cost the
// generator.
const loadTraceparent = "Traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\nTracestate: rojo=00f067aa0ba902b7\r\n"

// Result is what the connections of one phase saw, or of several rounds
// of it added up.
type Result struct {
	Window time.Duration // the measured window, as it really ran

	Sent     int64 // requests answered, warmup included
	OK       int64 // answered with the wanted status, warmup included
	OKWindow int64 // the same, inside the window
	// A paired load's second half: its wanted answers in the window, and
	// the part of the window it had.
	OKSecond     int64
	WindowSecond time.Duration
	Statuses     map[int]int64 // every status, warmup included
	Transport    int64         // requests that got no answer (connection errors)
	LastErr      string        // the last connection error, for the report
	Lat          []time.Duration

	// accepted[c] lists the sequence numbers that connection c sent and got
	// the wanted status for; DeliveryID(tag, c, seq) rebuilds the id.
	accepted [][]uint32
}

// Add adds another round's traffic to r; its accepted ids are not kept.
func (r *Result) Add(o *Result) {
	if r.Statuses == nil {
		r.Statuses = make(map[int]int64)
	}
	r.Window += o.Window
	r.Sent += o.Sent
	r.OK += o.OK
	r.OKWindow += o.OKWindow
	r.OKSecond += o.OKSecond
	r.WindowSecond += o.WindowSecond
	r.Transport += o.Transport
	for s, n := range o.Statuses {
		r.Statuses[s] += n
	}
	r.Lat = append(r.Lat, o.Lat...)
}

// OKRate is the wanted answers per second inside the window.
func (r *Result) OKRate() float64 {
	if r.Window <= 0 {
		return 0
	}
	return float64(r.OKWindow) / r.Window.Seconds()
}

// PairRates are a paired load's rates of its first and second halves,
// each over its own share of the window.
func (r *Result) PairRates() (first, second float64) {
	if r.WindowSecond <= 0 || r.Window <= r.WindowSecond {
		return 0, 0
	}
	first = float64(r.OKWindow-r.OKSecond) / (r.Window - r.WindowSecond).Seconds()
	second = float64(r.OKSecond) / r.WindowSecond.Seconds()
	return first, second
}

// Percentile returns the q-quantile (0 < q ≤ 1) of the window's latencies,
// by the nearest-rank method; lat must be sorted.
func Percentile(lat []time.Duration, q float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	rank := int(q*float64(len(lat)) + 0.999999999)
	rank = min(max(rank, 1), len(lat))
	return lat[rank-1]
}

// DeliveryID is the X-GitHub-Delivery of request seq on connection c.
func DeliveryID(tag string, c int, seq uint32) string {
	return tag + "-" + strconv.Itoa(c) + "-" + strconv.FormatUint(uint64(seq), 10)
}

// AcceptedIDs returns the set of delivery ids answered with the wanted
// status.
func (r *Result) AcceptedIDs(tag string) map[string]struct{} {
	ids := make(map[string]struct{}, r.OK)
	for c, seqs := range r.accepted {
		for _, seq := range seqs {
			ids[DeliveryID(tag, c, seq)] = struct{}{}
		}
	}
	return ids
}

// Run drives the phase: Conns connections, each sending its next request
// as soon as the previous one is answered (a closed loop, as wrk does),
// for warmup+duration, spread round-robin over the addresses. Every request is signed with signature.Sign and
// carries a unique delivery id; the body embeds the id too, so no two
// bodies are alike.
func (l Load) Run(ctx context.Context) (*Result, error) {
	start := time.Now()
	measureFrom := start.Add(l.Warmup)
	end := measureFrom.Add(l.Duration)
	results := make([]*connStats, l.Conns)
	errs := make([]error, l.Conns)
	var wg sync.WaitGroup
	for c := range l.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[c], errs[c] = l.connLoop(ctx, c, measureFrom, end)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	res := &Result{
		Window:   end.Sub(measureFrom),
		Statuses: make(map[int]int64),
		accepted: make([][]uint32, l.Conns),
	}
	res.WindowSecond = l.secondShare(res.Window)
	for c, cs := range results {
		res.Sent += cs.sent
		res.OK += int64(len(cs.accepted))
		res.OKWindow += cs.okWindow
		res.OKSecond += cs.okSecond
		res.Transport += cs.transport
		if cs.lastErr != "" {
			res.LastErr = cs.lastErr
		}
		for s, n := range cs.statuses {
			res.Statuses[s] += n
		}
		res.Lat = append(res.Lat, cs.lat...)
		res.accepted[c] = cs.accepted
	}
	slices.Sort(res.Lat)
	return res, nil
}

// connStats is one connection's share of a phase.
type connStats struct {
	sent, okWindow, transport int64
	okSecond                  int64 // of okWindow, sent in the second half
	lastErr                   string
	statuses                  map[int]int64
	lat                       []time.Duration
	accepted                  []uint32
}

// maxReconnects bounds how often one connection may be re-dialled in a
// phase before the phase fails: a server that keeps dropping connections
// is a finding, not noise to retry through.
const maxReconnects = 20

func (l Load) connLoop(ctx context.Context, c int, measureFrom, end time.Time) (*connStats, error) {
	cs := &connStats{statuses: make(map[int]int64)}
	var (
		conn      net.Conn
		br        *bufio.Reader
		bw        *bufio.Writer
		reconnect int
		body      = make([]byte, l.BodySize)
		req       = make([]byte, 0, l.BodySize+512)
		seq       uint32
	)
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	fill := l.Fill
	if fill == nil {
		fill = FillBody
	}
	dialer := net.Dialer{Timeout: 5 * time.Second}
	addr := l.Addrs[c%len(l.Addrs)]
	for ctx.Err() == nil {
		if conn == nil {
			var err error
			if conn, err = dialer.DialContext(ctx, "tcp", addr); err != nil {
				return cs, fmt.Errorf("connection %d: dial: %w", c, err)
			}
			br = bufio.NewReaderSize(conn, 4096)
			bw = bufio.NewWriterSize(conn, len(req)+l.BodySize)
		}
		now := time.Now()
		if !now.Before(end) {
			break
		}
		seq++
		id := DeliveryID(l.Tag, c, seq)
		fill(body, id)
		var err error
		second := l.secondAt(now, measureFrom)
		if req, err = l.appendRequest(req[:0], addr, id, body, second); err != nil {
			return cs, err
		}
		t0 := time.Now()
		_, err = bw.Write(req)
		if err == nil {
			err = bw.Flush()
		}
		var status int
		var closeAfter bool
		if err == nil {
			status, closeAfter, err = readResponse(br)
		}
		took := time.Since(t0)
		if err != nil {
			cs.transport++
			cs.lastErr = fmt.Sprintf("connection %d, request %d after %s: %v", c, seq, took.Round(time.Microsecond), err)
			conn.Close()
			conn = nil
			if reconnect++; reconnect > maxReconnects {
				return cs, fmt.Errorf("connection %d: %d connection errors, the last: %w", c, reconnect, err)
			}
			continue
		}
		cs.sent++
		cs.statuses[status]++
		inWindow := !t0.Before(measureFrom)
		if inWindow {
			cs.lat = append(cs.lat, took)
		}
		if status == l.Want {
			cs.accepted = append(cs.accepted, seq)
			if inWindow {
				cs.okWindow++
				if second {
					cs.okSecond++
				}
			}
		}
		if closeAfter {
			conn.Close()
			conn = nil
		}
	}
	return cs, nil
}

// FillBody writes a JSON object of exactly len(b) bytes that names id:
// {"delivery":"<id>","pad":"xxxx"}. b must be large enough for the id.
func FillBody(b []byte, id string) {
	n := copy(b, `{"delivery":"`)
	n += copy(b[n:], id)
	n += copy(b[n:], `","pad":"`)
	for ; n < len(b)-2; n++ {
		b[n] = 'x'
	}
	copy(b[n:], `"}`)
}

// MinBodySize is the smallest body FillBody can build around our ids.
const MinBodySize = 96

// appendRequest appends a complete HTTP/1.1 request for body to dst,
// signed as GitHub signs it, for the server at addr, as a paired load's
// second half sends it if second.
func (l Load) appendRequest(dst []byte, addr, id string, body []byte, second bool) ([]byte, error) {
	h, err := signature.Sign(signature.SchemeGitHub, l.Secret, body, signature.SignOptions{ID: id, EventType: "push"})
	if err != nil {
		return dst, fmt.Errorf("sign: %w", err)
	}
	path := l.Path
	traced := second && l.SecondTraced
	if second && l.SecondPath != "" {
		path = l.SecondPath
	}
	dst = append(dst, "POST "...)
	dst = append(dst, path...)
	dst = append(dst, " HTTP/1.1\r\nHost: "...)
	dst = append(dst, addr...)
	dst = append(dst, "\r\nUser-Agent: webhook-loadtest\r\nContent-Type: application/json\r\n"...)
	if traced {
		dst = append(dst, loadTraceparent...)
	}
	for name, values := range h {
		for _, v := range values {
			dst = append(dst, name...)
			dst = append(dst, ": "...)
			dst = append(dst, v...)
			dst = append(dst, "\r\n"...)
		}
	}
	dst = append(dst, "Content-Length: "...)
	dst = strconv.AppendInt(dst, int64(len(body)), 10)
	dst = append(dst, "\r\n\r\n"...)
	return append(dst, body...), nil
}

// readResponse reads one HTTP/1.1 response and discards its body. It
// understands what Caddy sends: Content-Length or chunked bodies, and
// Connection: close.
func readResponse(br *bufio.Reader) (status int, closeAfter bool, err error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, false, fmt.Errorf("read status line: %w", err)
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, false, fmt.Errorf("read status line: malformed %q", line)
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, false, fmt.Errorf("read status line: malformed %q", line)
	}
	length, chunked := int64(-1), false
	for {
		line, err = br.ReadSlice('\n')
		if err != nil {
			return 0, false, fmt.Errorf("read headers: %w", err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, false, fmt.Errorf("read headers: malformed %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.ParseInt(string(value), 10, 64); err != nil || length < 0 {
				return 0, false, fmt.Errorf("read headers: bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			closeAfter = bytes.EqualFold(value, []byte("close"))
		}
	}
	switch {
	case chunked:
		err = discardChunked(br)
	case length > 0:
		_, err = br.Discard(int(length))
	case length < 0 && status >= 200 && status != 204 && status != 304:
		// No length and not chunked: the body runs to the connection's end.
		closeAfter = true
	}
	if err != nil {
		return 0, false, fmt.Errorf("read body: %w", err)
	}
	return status, closeAfter, nil
}

// discardChunked reads and drops a chunked body and its trailer.
func discardChunked(br *bufio.Reader) error {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		sizeText, _, _ := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(";"))
		size, err := strconv.ParseInt(string(bytes.TrimSpace(sizeText)), 16, 64)
		if err != nil || size < 0 {
			return fmt.Errorf("bad chunk size %q", line)
		}
		if size == 0 {
			for {
				line, err := br.ReadSlice('\n')
				if err != nil {
					return err
				}
				if len(bytes.TrimRight(line, "\r\n")) == 0 {
					return nil
				}
			}
		}
		if _, err := br.Discard(int(size) + 2); err != nil {
			return err
		}
	}
}

// Millis writes a latency in milliseconds to two places, "—" for none.
func Millis(d time.Duration) string {
	if d == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}
