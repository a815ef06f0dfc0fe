package caddywebhook

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddywebhook/caddywebhook/caddywebhook/rules"
	"github.com/caddywebhook/caddywebhook/queue"
)

// Failure notifications, like Svix's operational webhooks: a target of the
// app's own that receives a small JSON notice when a job goes dead, when a
// circuit opens or closes, and when a route's backlog grows stale. Notices
// are events of the reserved source _notify, stored with one job for the
// notify target in the same queue as every other event, so they are
// durable, retried, dead-lettered and visible in the admin API like any
// delivery. A notice never notifies about itself: a _notify job that goes
// dead, or a _notify backlog, produces none.

// NotifyConfig is the app's failure notifications.
type NotifyConfig struct {
	// DeliverRaw is the target module that receives the notices, in the
	// webhook.targets namespace, selected by its "kind": http (a Slack or
	// Discord incoming webhook, or your own endpoint; sign_secret signs the
	// notices with Standard Webhooks) or exec. Required.
	DeliverRaw json.RawMessage `json:"deliver,omitempty" caddy:"namespace=webhook.targets inline_key=kind"`

	// Window aggregates notices: the first occurrence of a kind of notice
	// for one route (source and target) opens a window, and one notice
	// with the count of occurrences is sent when it closes, so a route
	// gets at most one notice of each kind per window. Default: 1m.
	Window caddy.Duration `json:"window,omitempty"`

	// PendingAge is the age of a route's oldest due pending job from which
	// its backlog counts as stale and a backlog.stale notice is sent, again
	// every PendingAge while it stays stale. The queue is checked once per
	// window. Default: off, no backlog notices.
	PendingAge caddy.Duration `json:"pending_age,omitempty"`

	// MaxAttempts is the attempt budget of a notice's delivery. Default:
	// the app's max_attempts (12).
	MaxAttempts int `json:"max_attempts,omitempty"`

	// Backoff spaces the attempts of a failing notice; an unset base or max
	// is the app's. Default: the app's backoff (2s, 15m).
	Backoff *BackoffConfig `json:"backoff,omitempty"`

	// Transform reshapes each notice before it is sent, as a receiver
	// target's transform does: `body` sees the notice as JSON, so a Slack
	// incoming webhook gets {"text": …}. See docs/RULES.md. Default: none,
	// the notice as JSON.
	Transform *rules.TransformConfig `json:"transform,omitempty"`
}

// The route of the notices in the queue. A receiver's source cannot begin
// with an underscore, so no sender can write into this route.
const (
	notifySource = "_notify"
	notifyTarget = "notify"
)

// Notice types.
const (
	noticeJobDead       = "job.dead"
	noticeCircuitOpened = "circuit.opened"
	noticeCircuitClosed = "circuit.closed"
	noticeBacklogStale  = "backlog.stale"
)

const (
	// notifyDefaultWindow is the default aggregation window.
	notifyDefaultWindow = time.Minute
	// noticeSampleJobs bounds the job ids a notice lists.
	noticeSampleJobs = 10
	// noticeErrorLen bounds a notice's last error, in bytes: enough for
	// an upstream's status and message, small enough for a chat line.
	// The error is made one line by queue.SafeLine.
	noticeErrorLen = 256
)

// validate checks the settings that need no module; each message names the
// option.
func (n *NotifyConfig) validate() error {
	switch {
	case len(n.DeliverRaw) == 0:
		return errors.New("notify: deliver is required (a target such as http <url>)")
	case n.Window < 0:
		return errors.New("notify: window must not be negative")
	case n.PendingAge < 0:
		return errors.New("notify: pending_age must not be negative")
	case n.MaxAttempts < 0:
		return errors.New("notify: max_attempts must not be negative")
	}
	if err := n.Backoff.validate(); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}

// notice is the JSON body a notify target receives. It carries names,
// counts, times, job ids and a truncated last error, never a payload or a
// header of the events it reports.
type notice struct {
	// Type is job.dead, circuit.opened, circuit.closed or backlog.stale.
	Type string `json:"type"`
	// Source and Target name the route the notice is about.
	Source string `json:"source"`
	Target string `json:"target"`
	// Count is the number of occurrences aggregated into this notice.
	Count int `json:"count"`
	// FirstAt and LastAt are the first and the last occurrence.
	FirstAt time.Time `json:"first_at"`
	LastAt  time.Time `json:"last_at"`
	// JobIDs are up to 10 of the jobs concerned, the first ones (job.dead).
	JobIDs []int64 `json:"job_ids,omitempty"`
	// LastError is the last occurrence's error, truncated (job.dead).
	LastError string `json:"last_error,omitempty"`
	// Pending and OldestPendingSeconds describe a stale backlog: the
	// route's pending jobs and the age of its oldest due one.
	Pending              int64 `json:"pending,omitempty"`
	OldestPendingSeconds int64 `json:"oldest_pending_seconds,omitempty"`
}

// noticeKey is what notices are aggregated by.
type noticeKey struct {
	kind  string
	route queue.Route
}

// notifierConfig configures a notifier.
type notifierConfig struct {
	store      queue.Store
	window     time.Duration // default 1m
	pendingAge time.Duration // 0: no backlog checks
	logger     *zap.Logger   // default: zap.NewNop()
	now        func() time.Time
	events     *caddyEvents // nil: no Caddy events
}

// notifier aggregates notices per (type, route) over a window and enqueues
// each as an event of the _notify source when its window closes. Its loop
// (Start, Stop) closes windows and checks backlogs; flush and checkBacklog
// are its steps, which tests call directly.
type notifier struct {
	store      queue.Store
	window     time.Duration
	pendingAge time.Duration
	logger     *zap.Logger
	now        func() time.Time
	events     *caddyEvents // nil: no Caddy events

	mu        sync.Mutex
	open      map[noticeKey]*notice     // windows not yet closed
	stale     map[queue.Route]time.Time // backlogs reported stale, and when
	lastCheck time.Time                 // of the backlogs

	cancel context.CancelFunc
	done   chan struct{}
}

func newNotifier(cfg notifierConfig) *notifier {
	n := &notifier{
		store:      cfg.store,
		window:     cmp.Or(cfg.window, notifyDefaultWindow),
		pendingAge: cfg.pendingAge,
		logger:     cfg.logger,
		now:        cfg.now,
		events:     cfg.events,
		open:       make(map[noticeKey]*notice),
		stale:      make(map[queue.Route]time.Time),
	}
	if n.logger == nil {
		n.logger = zap.NewNop()
	}
	if n.now == nil {
		n.now = time.Now
	}
	return n
}

// JobDead records that job went dead with c. A job of the _notify source
// is ignored: a notice never notifies about itself.
func (n *notifier) JobDead(job *queue.Job, c queue.Completion) {
	if job.Source == notifySource {
		return
	}
	at := cmp.Or(c.Now, n.now())
	n.add(noticeJobDead, queue.Route{Source: job.Source, Target: job.Target}, at, func(nt *notice) {
		if len(nt.JobIDs) < noticeSampleJobs {
			nt.JobIDs = append(nt.JobIDs, job.ID)
		}
		nt.LastError = queue.SafeLine(c.Error, noticeErrorLen)
	})
}

// CircuitChanged records that the circuit breaker of route opened (open)
// or closed. It is the hook the circuit breaker calls.
func (n *notifier) CircuitChanged(route queue.Route, open bool) {
	if route.Source == notifySource {
		return
	}
	kind := noticeCircuitClosed
	if open {
		kind = noticeCircuitOpened
	}
	n.add(kind, route, n.now(), nil)
}

// add counts one occurrence of kind on route at at; update, if not nil,
// adds its details.
func (n *notifier) add(kind string, route queue.Route, at time.Time, update func(*notice)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	key := noticeKey{kind: kind, route: route}
	nt := n.open[key]
	if nt == nil {
		nt = &notice{Type: kind, Source: route.Source, Target: route.Target, FirstAt: at}
		n.open[key] = nt
	}
	nt.Count++
	if at.After(nt.LastAt) {
		nt.LastAt = at
	}
	if update != nil {
		update(nt)
	}
}

// flush enqueues the notices whose window has closed at now, or all of
// them, and returns how many it enqueued. A notice that cannot be stored
// stays for the next flush.
func (n *notifier) flush(ctx context.Context, now time.Time, all bool) (int, error) {
	n.mu.Lock()
	var due []noticeKey
	for key, nt := range n.open {
		if all || !now.Before(nt.FirstAt.Add(n.window)) {
			due = append(due, key)
		}
	}
	batch := make([]*notice, len(due))
	for i, key := range due {
		batch[i] = n.open[key]
		delete(n.open, key)
	}
	n.mu.Unlock()

	var errs []error
	sent := 0
	for i, nt := range batch {
		if err := n.enqueue(ctx, nt, now); err != nil {
			errs = append(errs, err)
			n.requeue(due[i], nt)
			continue
		}
		sent++
	}
	if err := errors.Join(errs...); err != nil {
		return sent, fmt.Errorf("enqueue notices: %w", err)
	}
	return sent, nil
}

// requeue puts back a notice that could not be stored, merging it with one
// opened meanwhile.
func (n *notifier) requeue(key noticeKey, nt *notice) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if newer := n.open[key]; newer != nil {
		nt.Count += newer.Count
		if newer.LastAt.After(nt.LastAt) {
			nt.LastAt = newer.LastAt
		}
		nt.JobIDs = append(nt.JobIDs, newer.JobIDs...)
		nt.JobIDs = nt.JobIDs[:min(len(nt.JobIDs), noticeSampleJobs)]
		nt.LastError = cmp.Or(newer.LastError, nt.LastError)
	}
	n.open[key] = nt
}

// enqueue stores one notice as an event of the _notify source for the
// notify target.
func (n *notifier) enqueue(ctx context.Context, nt *notice, now time.Time) error {
	body, err := json.Marshal(nt)
	if err != nil {
		return err
	}
	_, err = n.store.Enqueue(ctx, queue.Event{
		Source:     notifySource,
		DeliveryID: noticeID(nt, now, n.pendingAge),
		EventType:  nt.Type,
		Headers:    []queue.Header{{Name: "Content-Type", Value: "application/json"}},
		Payload:    body,
		Targets:    []string{notifyTarget},
	})
	return err
}

// noticeID is a notice's delivery id. A backlog.stale notice's id names
// its route and period, so that Caddy instances sharing a queue, which all
// see the same backlog, store it once; other notices report what one
// instance saw, and get a random id.
func noticeID(nt *notice, now time.Time, period time.Duration) string {
	if nt.Type == noticeBacklogStale && period > 0 {
		return fmt.Sprintf("ntc_%s_%s_%s_%d", nt.Type, nt.Source, nt.Target, now.UnixNano()/int64(period))
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "ntc_" + nt.Type + "_" + hex.EncodeToString(b[:])
}

// checkBacklog reads the queue's stats and records a backlog.stale notice
// for each route whose oldest due pending job is PendingAge old or older,
// unless it was reported less than PendingAge ago.
func (n *notifier) checkBacklog(ctx context.Context, now time.Time) error {
	if n.pendingAge <= 0 {
		return nil
	}
	st, err := n.store.Stats(ctx, now)
	if err != nil {
		return fmt.Errorf("check backlog: %w", err)
	}
	stale := make(map[queue.Route]queue.Count)
	for _, c := range st.Counts {
		if c.Status == queue.StatusPending && c.Source != notifySource && c.OldestPending >= n.pendingAge {
			stale[queue.Route{Source: c.Source, Target: c.Target}] = c
		}
	}
	n.mu.Lock()
	for route := range n.stale {
		if _, ok := stale[route]; !ok {
			delete(n.stale, route) // recovered: report it again if it recurs
		}
	}
	var report []queue.Count
	for route, c := range stale {
		if last, ok := n.stale[route]; !ok || now.Sub(last) >= n.pendingAge {
			n.stale[route] = now
			report = append(report, c)
		}
	}
	n.mu.Unlock()
	for _, c := range report {
		n.events.backlogStale(c)
		n.add(noticeBacklogStale, queue.Route{Source: c.Source, Target: c.Target}, now, func(nt *notice) {
			nt.Pending = c.Jobs
			nt.OldestPendingSeconds = int64(c.OldestPending / time.Second)
		})
	}
	return nil
}

// runOnce is one step of the loop at now: the backlog check, once per
// window, then the flush of the windows that closed.
func (n *notifier) runOnce(ctx context.Context, now time.Time) {
	n.mu.Lock()
	check := n.pendingAge > 0 && now.Sub(n.lastCheck) >= n.window
	if check {
		n.lastCheck = now
	}
	n.mu.Unlock()
	if check {
		if err := n.checkBacklog(ctx, now); err != nil && ctx.Err() == nil {
			n.logger.Error("notify: check backlog", zap.Error(err))
		}
	}
	if _, err := n.flush(ctx, now, false); err != nil && ctx.Err() == nil {
		n.logger.Error("notify: store notices; they are kept for the next try", zap.Error(err))
	}
}

// tick returns the loop's interval: a tenth of the window, so a notice goes
// out at most that late, and within 10ms and 5s.
func (n *notifier) tick() time.Duration {
	return min(max(n.window/10, 10*time.Millisecond), 5*time.Second)
}

// Start runs the loop until Stop or until ctx is cancelled.
func (n *notifier) Start(ctx context.Context) {
	ctx, n.cancel = context.WithCancel(ctx)
	n.done = make(chan struct{})
	go func() {
		defer close(n.done)
		t := time.NewTicker(n.tick())
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				n.runOnce(ctx, n.now())
			}
		}
	}()
}

// Stop ends the loop and stores the notices of every open window at once,
// so a reload or a shutdown loses none.
func (n *notifier) Stop(ctx context.Context) error {
	if n.cancel != nil {
		n.cancel()
		select {
		case <-n.done:
		case <-ctx.Done():
			return fmt.Errorf("stop notifier: %w", context.Cause(ctx))
		}
	}
	if _, err := n.flush(ctx, n.now(), true); err != nil {
		return fmt.Errorf("stop notifier: %w", err)
	}
	return nil
}

// provisionNotify loads the notify target and registers its route.
func (a *App) provisionNotify(ctx caddy.Context) error {
	if a.Notify == nil {
		return nil
	}
	if err := a.Notify.validate(); err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	mod, err := ctx.LoadModule(a.Notify, "DeliverRaw")
	if err != nil {
		return fmt.Errorf("webhook: notify: %w", err)
	}
	t, ok := mod.(Target)
	if !ok {
		return fmt.Errorf("webhook: notify: module %T is not a webhook target", mod)
	}
	tr, err := compileTransform(a.Notify.Transform)
	if err != nil {
		return fmt.Errorf("webhook: notify: %w", err)
	}
	route := queue.Route{Source: notifySource, Target: notifyTarget}
	a.routes[route] = withTransform(t, tr)
	a.rules[route] = routeRules{transform: tr}
	a.policies[route] = retryPolicy{maxAttempts: a.Notify.MaxAttempts, backoff: a.Notify.Backoff}
	return nil
}

// reservedSource reports whether a receiver may not use source: names
// beginning with an underscore belong to the app's own events.
func reservedSource(source string) bool { return strings.HasPrefix(source, "_") }
