package phases

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/monitor"
)

// upstream is the recording upstream of the slow-upstream phases: an HTTP
// server in this process that answers each delivery 200 after a delay and
// remembers every delivery id it answered, so the load test can check that
// each job the database calls done really arrived.
type upstream struct {
	delay atomic.Int64 // time.Duration before answering

	answered atomic.Int64 // requests answered 200, duplicates included
	held     atomic.Int64 // nanoseconds from reading a request to answering it, summed over answered

	mu   sync.Mutex
	seen map[string]int // delivery id → times answered

	srv *http.Server
	ln  net.Listener
}

// startUpstream listens on a loopback port and serves until close.
func startUpstream() (*upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for upstream: %w", err)
	}
	u := &upstream{seen: make(map[string]int), ln: ln}
	u.srv = &http.Server{Handler: u, ReadHeaderTimeout: 10 * time.Second}
	go u.srv.Serve(ln)
	return u, nil
}

// url is where targets should deliver.
func (u *upstream) url() string { return "http://" + u.ln.Addr().String() + "/deliver" }

// ServeHTTP reads the delivery, waits the delay (the upstream's own work),
// then records the id and answers 200. A request without a delivery id is
// refused with 400, so a target that stops sending it is noticed.
func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("X-Webhook-Delivery-Id")
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if id == "" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	start := time.Now()
	if d := time.Duration(u.delay.Load()); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if strings.HasPrefix(id, ceilingPrefix) {
		// The reference measurement's own requests: answered, not counted.
		w.WriteHeader(http.StatusOK)
		return
	}
	u.mu.Lock()
	u.seen[id]++
	u.mu.Unlock()
	u.held.Add(int64(time.Since(start)))
	u.answered.Add(1)
	w.WriteHeader(http.StatusOK)
}

// reset forgets what was recorded and sets the delay for the next phase.
func (u *upstream) reset(delay time.Duration) {
	u.mu.Lock()
	clear(u.seen)
	u.mu.Unlock()
	u.answered.Store(0)
	u.held.Store(0)
	u.delay.Store(int64(delay))
}

// snapshot returns the recorded ids and how many deliveries repeated one.
func (u *upstream) snapshot() (ids map[string]int, repeats int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	ids = make(map[string]int, len(u.seen))
	for id, n := range u.seen {
		ids[id] = n
		repeats += n - 1
	}
	return ids, repeats
}

// upstreamWindow is what the upstream answered over one window: the
// counts of answered and held read at its start and at its end.
type upstreamWindow struct {
	a0, h0, a1, h1 int64
}

// delivered is how many requests the upstream answered in the window.
func (w upstreamWindow) delivered() int64 { return w.a1 - w.a0 }

// meanHold is how long the upstream held a request on average in the
// window: the delay plus the lateness of the timer that ends it, which
// grows with the number of requests waiting at once.
func (w upstreamWindow) meanHold() time.Duration {
	if w.a1 <= w.a0 {
		return 0
	}
	return time.Duration((w.h1 - w.h0) / (w.a1 - w.a0))
}

// addTo counts the window's deliveries and hold times in pr.
func (w upstreamWindow) addTo(pr *Phase, window time.Duration) {
	pr.Delivered += w.delivered()
	pr.DeliveredWindow += window
	pr.held += time.Duration(w.h1 - w.h0)
	pr.heldCount += w.delivered()
}

// watchUpstream waits out the warmup, then counts what the upstream
// answers over one window, inside the monitor's window and with the
// phase's captures running.
func (r *runner) watchUpstream(ctx context.Context, pr *Phase, mon *monitor.Monitor) (upstreamWindow, error) {
	if !sleepCtx(ctx, r.o.Warmup) {
		return upstreamWindow{}, ctx.Err()
	}
	mon.WindowStart()
	w := upstreamWindow{a0: r.up.answered.Load(), h0: r.up.held.Load()}
	wait := r.capture(ctx, pr, r.window)
	if !sleepCtx(ctx, r.window) {
		return upstreamWindow{}, ctx.Err()
	}
	w.a1, w.h1 = r.up.answered.Load(), r.up.held.Load()
	mon.WindowEnd()
	wait()
	return w, nil
}

// close stops the server.
func (u *upstream) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := u.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("stop upstream: %w", err)
	}
	return nil
}
