package consumer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/human"
	httptarget "github.com/caddywebhook/caddywebhook/caddywebhook/targets/http"
	"github.com/caddywebhook/caddywebhook/queue"
)

// `caddy webhook listen` is the queue's worker pool run on a laptop: a
// queue.Pool whose Store is the consumer API of a remote Caddy (apistore.go)
// and whose handler forwards each job to a local app, as the http target
// would. The pool brings what it does for the app's own deliveries: a claim
// while it has room, jobs held ahead (as many again as run), lease
// extensions in one request, a run cancelled before its lease can end
// unextended, answers batched, a job claimed again after a sleep never run
// twice, and on a stop the running deliveries handed back, uncharged. What
// the pool cannot know of lives here: the lease is the server's (learnt
// before the pool starts, and a pool replaced when the server's changes),
// an app that refuses the connection is not the event's fault (its job is
// handed back and claims wait for the app), and one line per delivery.

// ListenConfig configures a listener: a consumer of pull targets that
// forwards each job to a local URL, as the http target would.
type ListenConfig struct {
	URL    string // the webhook_consumer endpoint, e.g. https://hooks.example.com/consume
	Token  string // its bearer token
	Target string // the pull target to consume
	// Targets, when it names more than one, are the pull targets to
	// consume, each by a listener of its own with this config (multi.go).
	Targets    []string
	ForwardTo  string  // the local app's URL: the default route; empty: none
	Routes     []Route // routes by event type, tried in order before ForwardTo (routes.go)
	SignSecret string  // Standard Webhooks secret to sign forwarded requests with; empty: unsigned
	// Resign signs each forwarded request as the provider signs it, with
	// a secret of the operator's (the http target's resign); nil: unsigned.
	Resign      *httptarget.Resign
	Concurrency int           // deliveries at once; default 4
	Timeout     time.Duration // per local request; default the http target's (10s)
	Wait        time.Duration // how long each claim waits on the server; default 30s, at most a quarter of the lease
	// Grace is how long running deliveries may finish after a stop
	// before they are cancelled and handed back. Default: none, they are
	// handed back at once. (`caddy webhook listen --grace` defaults to
	// the webhook app's shutdown_grace, 10s.)
	Grace time.Duration
	// Abort, when it is closed during a stop's grace, cuts the grace
	// short: the running deliveries are cancelled and handed back at once
	// (a second Ctrl-C). Default: nil, the grace runs out.
	Abort <-chan struct{}
	Out   io.Writer // one line per delivery
	Log   io.Writer // notices: connected, app down, reconnecting
	Now   func() time.Time
}

// Defaults of ListenConfig.
const (
	DefaultConcurrency = 4
	DefaultListenWait  = 30 * time.Second
	// DefaultListenGrace is the CLI's --grace: the webhook app's own
	// shutdown_grace.
	DefaultListenGrace = 10 * time.Second

	// retryMin and retryMax bound the wait before asking the server again
	// after a network error or a 5xx; it doubles in between, jittered.
	retryMin = 500 * time.Millisecond
	retryMax = 30 * time.Second
	// appProbe is how often a listener whose local app refused a
	// connection tries it again before it claims more.
	appProbe = 500 * time.Millisecond
	// handBackTimeout bounds the hand-back of a stop.
	handBackTimeout = 10 * time.Second
)

// listener is one run of `caddy webhook listen`.
type listener struct {
	cfg   ListenConfig
	api   *client
	dests []*destination // the routes' targets, the default last (routes.go)
	held  holdState      // the claims no destination takes (hold.go)
	fwd   *url.URL       // the local app waited for after a refusal
	// stop is Listen's context: its end stops the claims in flight and
	// the waits between them at once.
	stop context.Context

	// failed receives the error no retry can help (a refused token, a
	// target the token may not consume), once; relearn the server's new
	// lease when it changed.
	failed  chan error
	relearn chan time.Duration

	mu        sync.Mutex
	appDown   bool   // the local app refused a connection; waiting for it
	connected bool   // the last request to the server got an answer
	reported  string // the last failure told, so each is told once
	stopping  bool   // the pools are stopping: count the hand-backs
	handed    int    // claims not started that the stop handed back
	unhanded  int    // jobs the stop could not hand back
	handErr   error  // why
	finished  int    // deliveries that ended with an answer during the stop
	cut       int    // deliveries the stop cut short, handed back with their history
	claims    map[queue.Claimed]*claimState
}

// claimState is what the listener knows of one claim beyond the pool.
type claimState struct {
	started bool      // the pool started its delivery
	lost    bool      // its lease was lost while the delivery ran
	refused bool      // the app refused the connection: hand it back
	reply   *AckReply // the server's reply to its answer, when it came
}

// Listen runs a listener until ctx ends, then hands back the jobs it
// holds and returns nil; it returns an error for a config the server
// refuses (a wrong token, a target it may not consume).
func Listen(ctx context.Context, cfg ListenConfig) error {
	if len(cfg.Targets) > 1 {
		return listenAll(ctx, cfg)
	}
	if len(cfg.Targets) == 1 {
		cfg.Target = cfg.Targets[0]
	}
	l, err := newListener(cfg)
	if err != nil {
		return err
	}
	defer closeDestinations(l.dests)
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
	case cfg.Concurrency < 0:
		return nil, fmt.Errorf("listen: --concurrency is %d, must be positive", cfg.Concurrency)
	case cfg.Grace < 0:
		return nil, fmt.Errorf("listen: the grace is %s, must not be negative", cfg.Grace)
	}
	base, err := url.Parse(cfg.URL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, errors.New("listen: --url must be an absolute http:// or https:// URL")
	}
	cfg.Concurrency = cmp.Or(cfg.Concurrency, DefaultConcurrency)
	cfg.Wait = cmp.Or(cfg.Wait, DefaultListenWait)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	dests, err := destinations(cfg)
	if err != nil {
		return nil, err
	}
	return &listener{
		cfg:   cfg,
		dests: dests,
		fwd:   dests[0].url,
		api: &client{base: base, token: cfg.Token, http: &http.Client{
			// A claim waits up to cfg.Wait on the server; the rest is
			// the network's.
			Timeout:   cfg.Wait + 30*time.Second,
			Transport: apiTransport(),
		}},
		stop:    context.Background(),
		failed:  make(chan error, 1),
		relearn: make(chan time.Duration, 1),
		claims:  make(map[queue.Claimed]*claimState),
	}, nil
}

func (l *listener) logf(format string, args ...any) {
	fmt.Fprintf(l.cfg.Log, "%s  "+format+"\n", append([]any{l.cfg.Now().Format(time.DateTime)}, args...)...)
}

// run claims the first jobs, which tell the server's lease, runs a pool
// with that lease until ctx ends or the server's lease changes (then a
// pool with the new one), and stops.
func (l *listener) run(ctx context.Context) error {
	l.stop = ctx
	var pools []*queue.Pool // the running one last; before it, those draining
	defer func() { l.stopPools(pools) }()
	for {
		lease, first, err := l.firstClaim(ctx)
		if err != nil || ctx.Err() != nil {
			return err
		}
		store := newAPIStore(l, lease)
		store.first = first
		pool, err := queue.NewPool(l.poolConfig(store, lease))
		if err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		// The pool is stopped by stopPools, with its grace, not by ctx.
		if err := pool.Start(context.WithoutCancel(ctx)); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		pools = append(pools, pool)
		select {
		case <-ctx.Done():
			return nil
		case err := <-l.failed:
			return err
		case next := <-l.relearn:
			if next < lease {
				// The pool's leases would end sooner than it extends
				// them: hand its jobs back now.
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handBackTimeout)
				_ = pool.Stop(sctx)
				cancel()
				pools = pools[:len(pools)-1]
			} else {
				// Its deliveries finish, leases extended; the new pool
				// claims meanwhile.
				pool.Drain()
			}
			l.logf("the server's lease is now %s; claiming with it", next)
		}
	}
}

// poolConfig is the pool of a listener whose server leases claims for
// lease. The server decides what an answer does to the job (its backoff,
// its attempt budget, dead letters): the pool's own decider is told never
// to park a job and to wait nothing but what the app asked for, so that
// the answer carries the app's verdict and its Retry-After as they were.
func (l *listener) poolConfig(store *apiStore, lease time.Duration) queue.PoolConfig {
	return queue.PoolConfig{
		Store:   store,
		Handler: queue.HandlerFunc(l.deliver),
		Workers: l.cfg.Concurrency,
		// Twice as many jobs held as run: while one delivery's answer is
		// on its way to the server and the next claim is out, the app
		// has its next jobs at hand instead of waiting for two round
		// trips with a slot idle.
		ClaimAhead:    l.cfg.Concurrency,
		Lease:         lease,
		PollInterval:  l.claimWait(lease),
		MaxAttempts:   math.MaxInt32,
		Retry:         noBackoff{},
		MaxRetryAfter: math.MaxInt64,
		// A stop hands back at once, as listen always has, unless a grace
		// is configured.
		ShutdownGrace: cmp.Or(l.cfg.Grace, time.Nanosecond),
		Owner:         "listen", // the server leases to pull:<target> whatever this says
		Observer:      l,
	}
}

// claimWait is how long one claim waits on the server: --wait, but at most
// a quarter of the lease. The pool times a claim's lease from when it sent
// the claim, so a long poll shortens the time it has to extend the lease
// before its fence cancels the delivery (three quarters of the lease);
// with a quarter at most, the first extension, a third of the lease on,
// comes in time.
func (l *listener) claimWait(lease time.Duration) time.Duration {
	return min(l.cfg.Wait, lease/4)
}

// noBackoff is the pool's retry policy: none, the server's applies.
type noBackoff struct{}

// NextRetry implements queue.RetryPolicy.
func (noBackoff) NextRetry(int) time.Duration { return 0 }

// firstClaim claims the first jobs, whose answer tells the server's
// lease, again after network errors and 5xx, until the server answers or
// ctx ends; it claims as many as a pool holds. An answer no retry can help
// (a refused token, a target it may not consume) is returned as the error.
// The pool takes the jobs as its first claim, and times their leases from
// then: as late as the answer's arrival, as the pool's own claims are.
func (l *listener) firstClaim(ctx context.Context) (time.Duration, []ClaimedJob, error) {
	retry := retryMin
	for {
		if !l.waitForApp(ctx) {
			return 0, nil, nil
		}
		resp, err := l.api.claim(ctx, l.cfg.Target, 2*l.cfg.Concurrency, l.cfg.Wait)
		if ctx.Err() != nil {
			return 0, nil, nil
		}
		if err == nil && resp.LeaseMS <= 0 {
			err = errors.New("the answer gives no lease (is --url the address of a webhook_consumer?)")
		}
		if err == nil {
			l.claimed()
			return time.Duration(resp.LeaseMS) * time.Millisecond, resp.Jobs, nil
		}
		// Before the first claim has worked, an answer that is not the
		// consumer API's is a wrong --url, not a passing fault: say so
		// and stop rather than retry it forever.
		var wrong *notConsumerError
		if isFatal(err) || errors.As(err, &wrong) {
			return 0, nil, fmt.Errorf("listen: claim: %w", err)
		}
		l.cannotClaim(err)
		if !sleep(ctx, jitter(retry)) {
			return 0, nil, nil
		}
		retry = min(retry*2, retryMax)
	}
}

// fail ends the listener with err, once.
func (l *listener) fail(err error) {
	select {
	case l.failed <- err:
	default:
	}
}

// leaseChanged asks for a pool with the server's new lease, once.
func (l *listener) leaseChanged(lease time.Duration) {
	select {
	case l.relearn <- lease:
	default:
	}
}

// stopPools stops the pools, their running deliveries handed back after
// the grace, and says how many jobs went back.
func (l *listener) stopPools(pools []*queue.Pool) {
	l.mu.Lock()
	l.stopping = true
	running := 0
	for _, st := range l.claims {
		if st.started {
			running++
		}
	}
	l.mu.Unlock()
	if running > 0 && l.cfg.Grace > 0 {
		l.logf("stopping: %d %s the app has may finish within %s (interrupt again to cut them short); the rest are handed back",
			running, plural(running, "request", "requests"), l.cfg.Grace)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(l.stop), l.cfg.Grace+handBackTimeout)
	defer cancel()
	if l.cfg.Abort != nil {
		// A Stop whose context ends hands back what still runs, its
		// deliveries cancelled, at once.
		go func() {
			select {
			case <-l.cfg.Abort:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	var wg sync.WaitGroup
	for _, p := range pools {
		wg.Go(func() { _ = p.Stop(ctx) })
	}
	wg.Go(func() { l.releaseHeld(ctx) })
	wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.unhanded > 0 {
		l.logf("could not hand back %d jobs: %v; they go back when their leases end", l.unhanded, redactURL(l.handErr))
	}
	if l.finished > 0 || l.handed > 0 || l.cut > 0 {
		l.logf("stopped: %s", l.stopSummary())
	}
}

// stopSummary says what the stop did with the jobs the listener held:
// which deliveries ended with their answers recorded, and which jobs went
// back to the server uncharged, cut short or never started. l.mu is held.
func (l *listener) stopSummary() string {
	var parts []string
	if l.finished > 0 {
		parts = append(parts, fmt.Sprintf("%d %s finished and answered", l.finished, plural(l.finished, "delivery", "deliveries")))
	}
	// The runs cut short go back as answers (their history kept), the
	// claims not started as hand-backs (l.handed counts those).
	if back := l.handed + l.cut; back > 0 {
		var what []string
		if l.cut > 0 {
			what = append(what, fmt.Sprintf("%d cut short", l.cut))
		}
		if l.handed > 0 {
			what = append(what, fmt.Sprintf("%d not started", l.handed))
		}
		parts = append(parts, fmt.Sprintf("handed back %d %s uncharged (%s)", back, plural(back, "job", "jobs"), strings.Join(what, ", ")))
	}
	return strings.Join(parts, "; ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// cannotClaim says once per kind of failure that the server cannot be
// reached, until it can again.
func (l *listener) cannotClaim(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.connected = false
	if msg := err.Error(); l.reported != msg {
		l.logf("cannot claim from %s: %v; retrying", loggedURL(l.cfg.URL), redactURL(err))
		l.reported = msg
	}
}

// claimed says, at the first claim that got an answer after none or a
// failure, that the listener is ready.
func (l *listener) claimed() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.connected {
		l.logf("Ready! Forwarding %s events from %s to %s (concurrency %d)", l.cfg.Target, loggedURL(l.cfg.URL), l.routesText(), l.cfg.Concurrency)
		l.connected, l.reported = true, ""
	}
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
	l.mu.Lock()
	fwd := l.fwd
	l.mu.Unlock()
	host := fwd.Host
	if fwd.Port() == "" {
		port := "80"
		if fwd.Scheme == "https" {
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

// state returns the listener's state of claim c; l.mu is held.
func (l *listener) state(c queue.Claimed) *claimState {
	st := l.claims[c]
	if st == nil {
		st = new(claimState)
		l.claims[c] = st
	}
	return st
}

// deliver is the pool's handler: it forwards one job to the local app.
// An app that refuses the connection is not the event's fault: the
// answer hands the job back, uncharged, and claims wait for the app.
func (l *listener) deliver(ctx context.Context, job *queue.Job) error {
	// What the http target does not return: whether a dial was refused
	// (the transport dials on a goroutine of its own). The status of the
	// app's answer it records in job.Code.
	var refusedDial atomic.Bool
	trace := &httptrace.ClientTrace{ConnectDone: func(_, _ string, err error) {
		if errors.Is(err, syscall.ECONNREFUSED) {
			refusedDial.Store(true)
		}
	}}
	// The claim held back the jobs no destination takes (hold.go).
	dest := l.destinationFor(job.EventType)
	err := dest.target.Deliver(httptrace.WithClientTrace(ctx, trace), job)
	if code, _ := job.Code.Value(); err == nil || code != 0 || !refusedDial.Load() || ctx.Err() != nil {
		return err
	}
	l.mu.Lock()
	l.state(job.Claimed()).refused = true
	first := !l.appDown
	l.appDown = true
	if first {
		l.fwd = dest.url
	}
	l.mu.Unlock()
	if first {
		l.logf("local app at %s refused the connection; holding deliveries until it listens", dest.url.Host)
	}
	return err
}

// The listener is the pool's observer: it prints one line per delivery.

// JobStarted implements queue.Observer.
func (l *listener) JobStarted(job *queue.Job) {
	l.mu.Lock()
	l.state(job.Claimed()).started = true
	l.mu.Unlock()
}

// LeaseLost implements queue.Observer. A job lost before it ran gets its
// line here; one lost while it ran gets it when its delivery returns.
func (l *listener) LeaseLost(job *queue.Job) {
	l.mu.Lock()
	st := l.state(job.Claimed())
	started := st.started
	if started {
		st.lost = true
	} else {
		delete(l.claims, job.Claimed())
	}
	l.mu.Unlock()
	if !started {
		l.line(job, "lease lost", 0, "not delivered: the server may hand it to another consumer")
	}
}

// JobFinished implements queue.Observer.
func (l *listener) JobFinished(job *queue.Job, c queue.Completion, _ bool, err error) {
	l.mu.Lock()
	st := l.state(job.Claimed())
	delete(l.claims, job.Claimed())
	if l.stopping && !st.lost && st.reply != nil && st.reply.Recorded {
		l.finished++
	}
	l.mu.Unlock()
	if st.lost {
		l.line(job, "lease lost", c.Duration, "not answered: the server may hand it to another consumer")
		return
	}
	code, _ := job.Code.Value()
	word, note := "retry", ""
	switch {
	case st.refused:
		word = "handed back"
	case err == nil:
		word = "done"
	case queue.IsPermanent(err):
		word = "dead"
	}
	if err != nil && !st.refused && code == 0 {
		note = queue.SafeLine(err.Error(), 200)
	}
	switch r := st.reply; {
	case r == nil:
		word = "not answered"
	case !r.Recorded:
		word = "lease lost"
	case r.Status == queue.StatusPending && word == "retry":
		word = "retry at " + r.RunAt.Local().Format(time.TimeOnly)
	case r.Status == queue.StatusDead:
		word = "dead"
	}
	shown := "error"
	if code != 0 {
		shown = fmt.Sprint(code)
	} else if st.refused {
		shown = "refused"
	}
	if d := l.destinationFor(job.EventType); d != nil && d.label != "" {
		word += "  " + d.label
	}
	l.line(job, "["+shown+"] "+word, c.Duration, note)
}

// JobHandedBack implements queue.Observer: a delivery the stop cut short,
// which the stop's line counts.
func (l *listener) JobHandedBack(job *queue.Job) {
	l.mu.Lock()
	delete(l.claims, job.Claimed())
	if l.stopping {
		l.cut++
	}
	l.mu.Unlock()
}

// StoreError implements queue.Observer. The store (apistore.go) says what
// the server refused, once per kind of failure.
func (l *listener) StoreError(string, error) {}

// line prints one delivery: time, source and target, event type,
// delivery id, the local app's status and what became of the job (and,
// with several routes, where it went), and the duration.
func (l *listener) line(job *queue.Job, outcome string, took time.Duration, note string) {
	// Each field is made safe on its own: SafeLine turns a run of spaces
	// into one, and the fields are set apart by two.
	fields := []string{l.cfg.Now().Format(time.DateTime), job.Source + " → " + cmp.Or(job.Target, l.cfg.Target), cmp.Or(job.EventType, "-"),
		job.DeliveryID, outcome, human.Latency(took)}
	if note != "" {
		fields = append(fields, note)
	}
	for i, f := range fields {
		fields[i] = queue.SafeLine(f, 0)
	}
	fmt.Fprintln(l.cfg.Out, strings.Join(fields, "  "))
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
