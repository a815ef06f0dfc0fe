package consumer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddywebhook/caddywebhook/caddywebhook"
	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/human"
	httptarget "github.com/caddywebhook/caddywebhook/caddywebhook/targets/http"
	"github.com/caddywebhook/caddywebhook/queue"
)

// ListenConfig configures a listener: a consumer of one pull target that
// forwards each job to a local URL, as the http target would.
type ListenConfig struct {
	URL         string        // the webhook_consumer endpoint, e.g. https://hooks.example.com/consume
	Token       string        // its bearer token
	Target      string        // the pull target to consume
	ForwardTo   string        // the local app's URL
	SignSecret  string        // Standard Webhooks secret to sign forwarded requests with; empty: unsigned
	Concurrency int           // deliveries at once; default 4
	Timeout     time.Duration // per local request; default the http target's (10s)
	Wait        time.Duration // how long each claim waits on the server; default 30s
	Out         io.Writer     // one line per delivery
	Log         io.Writer     // notices: connected, app down, reconnecting
	Now         func() time.Time
}

// Defaults of ListenConfig.
const (
	DefaultConcurrency = 4
	DefaultListenWait  = 30 * time.Second

	// retryMin and retryMax bound the wait before asking the server again
	// after a network error or a 5xx; it doubles in between, jittered.
	retryMin = 500 * time.Millisecond
	retryMax = 30 * time.Second
	// appProbe is how often a listener whose local app refused a
	// connection tries it again before it claims more.
	appProbe = 500 * time.Millisecond
	// extendLook is how often the extension loop looks at the lease.
	extendLook = time.Second
	// heldPerRunning is how many jobs a listener holds per delivery it
	// runs at once: the rest wait at hand, their leases extended as any.
	heldPerRunning = 2
)

// listener is one run of `caddy webhook listen`.
type listener struct {
	cfg    ListenConfig
	api    *client
	target *httptarget.Target
	fwd    *url.URL

	mu      sync.Mutex
	held    map[int64]*heldJob
	lease   time.Duration // from the server's last answer
	appDown bool          // the local app refused a connection; waiting for it
	holds   chan struct{} // one per job held: waiting to run, running, or being answered for
	running chan struct{} // one per delivery to the local app in progress
	acks    ackBatch

	wg sync.WaitGroup
}

// heldJob is one claim the listener holds.
type heldJob struct {
	lease   queue.Claimed
	cancel  context.CancelFunc
	fence   *time.Timer // cancels the delivery before its lease can end unextended
	lost    bool        // the lease is gone: answer nothing
	stopped bool        // the listener stops: hand it back
}

// Listen runs a listener until ctx ends, then hands back the jobs it
// holds and returns nil; it returns an error at once for a config the
// server refuses (a wrong token, a target it may not consume).
func Listen(ctx context.Context, cfg ListenConfig) error {
	l, err := newListener(cfg)
	if err != nil {
		return err
	}
	defer l.target.Cleanup()
	return l.run(ctx)
}

func newListener(cfg ListenConfig) (*listener, error) {
	switch {
	case cfg.URL == "":
		return nil, errors.New("listen: --url is required")
	case cfg.Token == "":
		return nil, errors.New("listen: the token is empty: set the variable --token-env names")
	case cfg.Target == "":
		return nil, errors.New("listen: --target is required")
	case cfg.ForwardTo == "":
		return nil, errors.New("listen: --forward-to is required")
	case cfg.Concurrency < 0:
		return nil, fmt.Errorf("listen: --concurrency is %d, must be positive", cfg.Concurrency)
	}
	base, err := url.Parse(cfg.URL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, errors.New("listen: --url must be an absolute http:// or https:// URL")
	}
	fwd, err := url.Parse(cfg.ForwardTo)
	if err != nil || (fwd.Scheme != "http" && fwd.Scheme != "https") || fwd.Host == "" {
		return nil, errors.New("listen: --forward-to must be an absolute http:// or https:// URL")
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.Wait == 0 {
		cfg.Wait = DefaultListenWait
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	// The http target forwards each job: the same request, headers and
	// signature an upstream of the target gets, and the same reading of
	// its answer.
	target := &httptarget.Target{URL: cfg.ForwardTo, Timeout: caddy.Duration(cfg.Timeout), SignSecret: cfg.SignSecret}
	if err := target.Provision(caddy.Context{Context: context.Background()}); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if err := target.Validate(); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	return &listener{
		cfg:    cfg,
		target: target,
		fwd:    fwd,
		api: &client{base: base, token: cfg.Token, http: &http.Client{
			// A claim waits up to cfg.Wait on the server; the rest is
			// the network's.
			Timeout:   cfg.Wait + 30*time.Second,
			Transport: apiTransport(),
		}},
		held:  make(map[int64]*heldJob),
		lease: queue.DefaultLease,
		// Twice as many jobs held as run: while one delivery's answer is
		// on its way to the server and the next claim is out, the app
		// has its next jobs at hand instead of waiting for two round
		// trips with a slot idle.
		holds:   make(chan struct{}, heldPerRunning*cfg.Concurrency),
		running: make(chan struct{}, cfg.Concurrency),
	}, nil
}

func (l *listener) logf(format string, args ...any) {
	fmt.Fprintf(l.cfg.Log, "%s  "+format+"\n", append([]any{l.cfg.Now().Format(time.DateTime)}, args...)...)
}

// run claims while it has room, until ctx ends.
func (l *listener) run(ctx context.Context) error {
	extendCtx, stopExtend := context.WithCancel(context.WithoutCancel(ctx))
	extendDone := make(chan struct{})
	go func() {
		defer close(extendDone)
		l.extendLoop(extendCtx)
	}()
	err := l.claimLoop(ctx)
	l.shutdown(context.WithoutCancel(ctx))
	stopExtend()
	<-extendDone
	return err
}

// claimLoop asks the server for as many jobs as the listener may hold
// more of, starts a delivery for each, and backs off after errors.
func (l *listener) claimLoop(ctx context.Context) error {
	retry := retryMin
	connected, reported := false, ""
	for ctx.Err() == nil {
		// Wait until a job more may be held, then for the local app if
		// it is down.
		select {
		case l.holds <- struct{}{}:
			<-l.holds
		case <-ctx.Done():
			return nil
		}
		if !l.waitForApp(ctx) {
			return nil
		}
		free := cap(l.holds) - len(l.holds)
		resp, err := l.api.claim(ctx, l.cfg.Target, free, l.cfg.Wait)
		if ctx.Err() != nil {
			// A claim committed as we gave up is handed back by the
			// server, which sees the request go.
			return nil
		}
		if err != nil {
			if isFatal(err) {
				return fmt.Errorf("listen: claim: %w", err)
			}
			if msg := err.Error(); reported != msg {
				l.logf("cannot claim from %s: %v; retrying", loggedURL(l.cfg.URL), redactURL(err))
				reported = msg
			}
			connected = false
			if !sleep(ctx, jitter(retry)) {
				return nil
			}
			retry = min(retry*2, retryMax)
			continue
		}
		if !connected {
			l.logf("Ready! Forwarding %s events from %s to %s (concurrency %d)", l.cfg.Target, loggedURL(l.cfg.URL), loggedURL(l.cfg.ForwardTo), l.cfg.Concurrency)
			connected, reported, retry = true, "", retryMin
		}
		l.mu.Lock()
		if resp.LeaseMS > 0 {
			l.lease = time.Duration(resp.LeaseMS) * time.Millisecond
		}
		l.mu.Unlock()
		for _, j := range resp.Jobs {
			l.start(ctx, j)
		}
	}
	return nil
}

// waitForApp returns at once while the local app answers; after it
// refused a connection, it probes it until it accepts one, saying so once
// each way. It returns false if ctx ended.
func (l *listener) waitForApp(ctx context.Context) bool {
	l.mu.Lock()
	down := l.appDown
	l.mu.Unlock()
	if !down {
		return true
	}
	for {
		if !sleep(ctx, appProbe) {
			return false
		}
		if l.appListening(ctx) {
			l.mu.Lock()
			l.appDown = false
			l.mu.Unlock()
			l.logf("local app at %s is listening again; resuming", l.fwd.Host)
			return true
		}
	}
}

// appListening reports whether the local app accepts a connection.
func (l *listener) appListening(ctx context.Context) bool {
	host := l.fwd.Host
	if l.fwd.Port() == "" {
		port := "80"
		if l.fwd.Scheme == "https" {
			port = "443"
		}
		host += ":" + port
	}
	d := net.Dialer{Timeout: appProbe}
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// start holds one job and runs its delivery when one of the
// --concurrency slots is free.
func (l *listener) start(ctx context.Context, j ClaimedJob) {
	l.holds <- struct{}{}
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h := &heldJob{lease: queue.Claimed{ID: j.ID, Fence: j.Fence}, cancel: cancel}
	l.mu.Lock()
	lease := l.lease
	// The delivery is cancelled a quarter of the lease before the lease
	// can end unless an extension moves it, so no other consumer starts
	// the job while this one still runs it. The quarter also covers the
	// time between the claim's commit and its answer's arrival.
	h.fence = time.AfterFunc(lease-lease/4, func() { l.loseLease(h) })
	l.hold(h)
	l.mu.Unlock()
	l.wg.Go(func() {
		defer func() { <-l.holds }()
		defer cancel()
		select {
		case l.running <- struct{}{}:
		case <-dctx.Done():
			// Stopped or lost before it ran: the stop hands it back; a
			// lost lease is the server's to give again.
			if l.dropLost(h) {
				l.line(j, "lease lost", 0, "not delivered: the server may hand it to another consumer")
			}
			return
		}
		l.deliver(dctx, h, j)
	})
}

// hold records h as the claim held for its job; l.mu is held. A claim of
// the same job still held is an older run's, whose lease the server has
// given up since (a laptop that slept through it, timers and all): the new
// claim proves it lost, so it is cancelled now rather than left to run
// beside the new one.
func (l *listener) hold(h *heldJob) {
	if prev := l.held[h.lease.ID]; prev != nil && !prev.stopped {
		prev.lost = true
		prev.cancel()
	}
	l.held[h.lease.ID] = h
}

// loseLease gives up a job whose lease can no longer be proven: another
// consumer may have it now.
func (l *listener) loseLease(h *heldJob) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !h.stopped {
		h.lost = true
		h.cancel()
	}
}

// deliver forwards one job and answers for it.
func (l *listener) deliver(ctx context.Context, h *heldJob, j ClaimedJob) {
	job := &queue.Job{
		ID: j.ID, Source: j.Source, DeliveryID: j.DeliveryID, EventType: j.EventType, Target: j.Target,
		Headers: j.Headers, Payload: j.Payload, Attempt: j.Attempt, Replays: j.Replays, Fence: j.Fence,
	}
	// What the http target does not return: whether a dial was refused
	// (the transport dials on a goroutine of its own). The status of the
	// app's answer it records in job.Code.
	var refusedDial atomic.Bool
	trace := &httptrace.ClientTrace{ConnectDone: func(_, _ string, err error) {
		if errors.Is(err, syscall.ECONNREFUSED) {
			refusedDial.Store(true)
		}
	}}
	dctx := httptrace.WithClientTrace(ctx, trace)
	start := time.Now()
	err := l.target.Deliver(dctx, job)
	took := time.Since(start)
	// The slot is the app's: the answer to the server does not hold it.
	<-l.running
	code, _ := job.Code.Value()
	refused := refusedDial.Load()

	l.mu.Lock()
	lost, stopped := h.lost, h.stopped
	l.mu.Unlock()
	res := Ack{ID: j.ID, Fence: j.Fence, Duration: took.String()}
	word := ""
	switch {
	case lost:
		l.forget(h)
		l.line(j, "lease lost", took, "not answered: the server may hand it to another consumer")
		return
	case stopped && err != nil:
		return // cut short by the stop, which hands it back
	case refused && code == 0:
		// The app is not listening: not the event's fault. Hand it back
		// uncharged and wait for the app.
		res.Outcome, word = string(caddywebhook.AckHandedBack), "handed back"
		l.mu.Lock()
		first := !l.appDown
		l.appDown = true
		l.mu.Unlock()
		if first {
			l.logf("local app at %s refused the connection; holding deliveries until it listens", l.fwd.Host)
		}
	case err == nil:
		res.Outcome, word = string(caddywebhook.AckDelivered), "done"
	case queue.IsPermanent(err):
		res.Outcome, res.Error, word = string(caddywebhook.AckDead), err.Error(), "dead"
	default:
		res.Outcome, res.Error, word = string(caddywebhook.AckRetry), err.Error(), "retry"
		if after, ok := queue.RetryAfterOf(err); ok && after > 0 {
			res.RetryAfter = after.String()
		}
	}
	answer, ok := l.answer(ctx, res)
	l.forget(h)
	switch {
	case !ok:
		word = "not answered"
	case !answer.Recorded:
		word = "lease lost"
	case answer.Status == queue.StatusPending && res.Outcome == string(caddywebhook.AckRetry):
		word = "retry at " + answer.RunAt.Local().Format(time.TimeOnly)
	case answer.Status == queue.StatusDead:
		word = "dead"
	}
	shown := "error"
	if code != 0 {
		shown = fmt.Sprint(code)
	} else if refused {
		shown = "refused"
	}
	note := ""
	if res.Error != "" && code == 0 && !refused {
		note = queue.SafeLine(res.Error, 200)
	}
	l.line(j, "["+shown+"] "+word, took, note)
}

// answer sends one result, again after network errors, until the lease
// it answers for can have ended.
func (l *listener) answer(ctx context.Context, res Ack) (AckReply, bool) {
	l.mu.Lock()
	deadline := time.Now().Add(l.lease)
	l.mu.Unlock()
	retry := retryMin
	for {
		ans, err := l.acks.send(ctx, l.api, res)
		if err == nil {
			return ans, true
		}
		if isFatal(err) || time.Now().Add(retry).After(deadline) {
			l.logf("cannot answer for job %d: %v", res.ID, redactURL(err))
			return AckReply{}, false
		}
		if !sleep(ctx, jitter(retry)) {
			return AckReply{}, false
		}
		retry = min(retry*2, retryMax)
	}
}

// ackBatch sends the results of deliveries that end together in one ack
// request: while one request is out, the results that arrive wait, and the
// next request takes them all. With 32 deliveries at once that is one
// request (and one transaction on the server) for many results, instead
// of one each.
type ackBatch struct {
	mu       sync.Mutex
	queue    []*pendingAck
	flushing bool
}

type pendingAck struct {
	res  Ack
	done chan ackReply // buffered 1
}

type ackReply struct {
	ans AckReply
	err error
}

// ackTimeout bounds one ack request, which is not cancelled with the
// delivery that sends it: it carries other deliveries' results too.
const ackTimeout = 30 * time.Second

// send queues res and returns the server's answer for it.
func (b *ackBatch) send(ctx context.Context, api *client, res Ack) (AckReply, error) {
	p := &pendingAck{res: res, done: make(chan ackReply, 1)}
	b.mu.Lock()
	b.queue = append(b.queue, p)
	if b.flushing {
		b.mu.Unlock()
		select {
		case r := <-p.done:
			return r.ans, r.err
		case <-ctx.Done():
			return AckReply{}, ctx.Err()
		}
	}
	b.flushing = true
	b.mu.Unlock()
	for {
		b.mu.Lock()
		n := min(len(b.queue), maxLeases)
		batch := b.queue[:n:n]
		b.queue = b.queue[n:]
		if n == 0 {
			b.flushing = false
			b.mu.Unlock()
			break
		}
		b.mu.Unlock()
		results := make([]Ack, n)
		for i, q := range batch {
			results[i] = q.res
		}
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
		resp, err := api.ack(actx, results)
		cancel()
		if err == nil && len(resp.Results) != n {
			err = fmt.Errorf("ack: %d answers for %d results", len(resp.Results), n)
		}
		for i, q := range batch {
			if err != nil {
				q.done <- ackReply{err: err}
			} else {
				q.done <- ackReply{ans: resp.Results[i]}
			}
		}
	}
	r := <-p.done
	return r.ans, r.err
}

// dropLost forgets a job whose lease was lost and reports whether it was;
// a job the stop cut short stays held, for the stop to hand back.
func (l *listener) dropLost(h *heldJob) bool {
	l.mu.Lock()
	lost := h.lost
	l.mu.Unlock()
	if lost {
		l.forget(h)
	}
	return lost
}

// forget stops holding h's claim. The map is by job id, and the server
// may have handed the job to this listener again, in a claim of its own,
// while h's run still ended: that claim stays held.
func (l *listener) forget(h *heldJob) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h.fence.Stop()
	if l.held[h.lease.ID] == h {
		delete(l.held, h.lease.ID)
	}
}

// line prints one delivery: time, source, event type, delivery id, the
// local app's status and what became of the job, and the duration.
func (l *listener) line(j ClaimedJob, outcome string, took time.Duration, note string) {
	s := fmt.Sprintf("%s  %s  %s  %s  %s  %s", l.cfg.Now().Format(time.DateTime), j.Source, cmp.Or(j.EventType, "-"),
		j.DeliveryID, outcome, human.Latency(took))
	if note != "" {
		s += "  " + note
	}
	fmt.Fprintln(l.cfg.Out, queue.SafeLine(s, 0))
}

// extendLoop extends the leases of the held jobs every third of the lease,
// and moves each one's self-fence.
//
// The lease is the server's, learnt from the first claim's answer, after
// this loop started with the default: it looks at least every second, so
// a lease shorter than the default is extended in time from the start.
func (l *listener) extendLoop(ctx context.Context) {
	last := time.Now()
	for {
		l.mu.Lock()
		every := l.lease / 3
		l.mu.Unlock()
		if !sleep(ctx, min(time.Until(last.Add(every)), extendLook)) {
			return
		}
		if time.Since(last) < every {
			continue
		}
		last = time.Now()
		l.mu.Lock()
		leases := make([]queue.Claimed, 0, len(l.held))
		for _, h := range l.held {
			if !h.lost && !h.stopped {
				leases = append(leases, h.lease)
			}
		}
		l.mu.Unlock()
		if len(leases) == 0 {
			continue
		}
		sent := time.Now()
		lost, leaseMS, extended := l.extend(ctx, leases)
		l.mu.Lock()
		if leaseMS > 0 {
			l.lease = time.Duration(leaseMS) * time.Millisecond
		}
		for _, ls := range extended {
			h, ok := l.held[ls.ID]
			if !ok || h.lease.Fence != ls.Fence {
				continue // answered meanwhile, or claimed again since
			}
			if lost[ls.ID] {
				h.lost = true
				h.cancel()
				continue
			}
			h.fence.Reset(time.Until(sent.Add(l.lease - l.lease/4)))
		}
		l.mu.Unlock()
	}
}

// extend extends leases in requests of at most maxLeases, the server's
// cap, and returns the claims it lost, the lease the server gives, and
// the leases of the requests it answered: a failed request's self-fences
// cancel their deliveries in time if failures go on.
func (l *listener) extend(ctx context.Context, leases []queue.Claimed) (lost map[int64]bool, leaseMS int64, extended []queue.Claimed) {
	lost = make(map[int64]bool)
	for chunk := range slices.Chunk(leases, maxLeases) {
		resp, err := l.api.extend(ctx, chunk)
		if err != nil {
			continue
		}
		for _, id := range resp.Lost {
			lost[id] = true
		}
		leaseMS = max(leaseMS, resp.LeaseMS)
		extended = append(extended, chunk...)
	}
	return lost, leaseMS, extended
}

// shutdown cancels the deliveries still running, waits for them, and
// hands back, uncharged, the jobs they did not answer for.
func (l *listener) shutdown(ctx context.Context) {
	l.mu.Lock()
	for _, h := range l.held {
		h.stopped = true
		h.cancel()
	}
	l.mu.Unlock()
	l.wg.Wait()
	l.mu.Lock()
	var leases []queue.Claimed
	for id, h := range l.held {
		h.fence.Stop()
		if !h.lost {
			leases = append(leases, h.lease)
		}
		delete(l.held, id)
	}
	l.mu.Unlock()
	if len(leases) > 0 {
		results := make([]Ack, len(leases))
		for i, ls := range leases {
			results[i] = Ack{ID: ls.ID, Fence: ls.Fence, Outcome: string(caddywebhook.AckHandedBack)}
		}
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		handed := 0
		var failed error
		for chunk := range slices.Chunk(results, maxLeases) {
			if _, err := l.api.ack(hctx, chunk); err != nil {
				failed = err
				continue
			}
			handed += len(chunk)
		}
		if failed != nil {
			l.logf("could not hand back %d jobs: %v; they go back when their leases end", len(leases)-handed, redactURL(failed))
		}
		if handed > 0 {
			l.logf("handed back %d jobs", handed)
		}
		cancel()
	}
}

// apiTransport is the transport to the server: a claim waiting on the
// server, an ack and an extension can be out at once, so it keeps more
// idle connections than http.DefaultTransport's two per host.
func apiTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 4
	return t
}

// loggedURL is a URL as the log shows it: without its user info, query
// and fragment, any of which could hold a credential ("?…" says there was
// a query). A URL that does not parse is shown as "(the URL given)".
func loggedURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(the URL given)"
	}
	q := u.RawQuery != "" || u.ForceQuery
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	if q {
		return u.String() + "?…"
	}
	return u.String()
}

// redactURL keeps a url.Error's message without its URL, whose query
// could hold a credential.
func redactURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// sleep waits d, or until ctx ends; it reports whether it waited d.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// jitter spreads d over [d/2, d), so listeners that lost the server
// together do not come back together.
func jitter(d time.Duration) time.Duration {
	return d/2 + time.Duration(rand.Float64()*float64(d/2))
}
