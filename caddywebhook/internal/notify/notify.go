// Package notify is the engine of the app's failure notifications, like
// Svix's operational webhooks: it counts the jobs that go dead, the
// circuits that open and close and the backlogs that grow stale, per route,
// over a window, and stores one notice of each kind per window as an event
// of the reserved source _notify, with one job for the notify target, in
// the same queue as every other event. So notices are durable, retried,
// dead-lettered and visible in the admin API like any delivery. A notice
// never notifies about itself: a _notify job that goes dead, or a _notify
// backlog, produces none. The app's NotifyConfig (package caddywebhook)
// configures it, and routes the notify target.
package notify

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddywebhook/caddywebhook/queue"
)

// Source and Target are the route of the notices in the queue. A
// receiver's source cannot begin with an underscore, so no sender can
// write into this route.
const (
	Source = "_notify"
	Target = "notify"
)

// The types of notices (Notice.Type).
const (
	TypeJobDead       = "job.dead"
	TypeCircuitOpened = "circuit.opened"
	TypeCircuitClosed = "circuit.closed"
	TypeBacklogStale  = "backlog.stale"
)

const (
	// DefaultWindow is the aggregation window unless Config says.
	DefaultWindow = time.Minute
	// noticeSampleJobs bounds the job ids a notice lists.
	noticeSampleJobs = 10
	// noticeErrorLen bounds a notice's last error, in bytes: enough for
	// an upstream's status and message, small enough for a chat line.
	// The error is made one line by queue.SafeLine.
	noticeErrorLen = 256
)

// Notice is the JSON body a notify target receives. It carries names,
// counts, times, job ids and a truncated last error, never a payload or a
// header of the events it reports.
type Notice struct {
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

// Config configures a Notifier.
type Config struct {
	Store      queue.Store
	Window     time.Duration // default DefaultWindow
	PendingAge time.Duration // 0: no backlog checks
	Logger     *zap.Logger   // default: zap.NewNop()
	Now        func() time.Time
	// BacklogStale, if not nil, is told of each route found stale, before
	// its notice is counted (the app emits a Caddy event).
	BacklogStale func(queue.Count)
}

// Notifier aggregates notices per (type, route) over a window and enqueues
// each as an event of the _notify source when its window closes. Its loop
// (Start, Stop) closes windows and checks backlogs; Flush and checkBacklog
// are its steps, which tests call directly.
type Notifier struct {
	store      queue.Store
	window     time.Duration
	pendingAge time.Duration
	logger     *zap.Logger
	now        func() time.Time
	onStale    func(queue.Count) // nil: nobody to tell

	mu        sync.Mutex
	open      map[noticeKey]*Notice     // windows not yet closed
	stale     map[queue.Route]time.Time // backlogs reported stale, and when
	lastCheck time.Time                 // of the backlogs

	cancel context.CancelFunc
	done   chan struct{}
}

// New returns the Notifier of cfg; Start runs its loop.
func New(cfg Config) *Notifier {
	n := &Notifier{
		store:      cfg.Store,
		window:     cmp.Or(cfg.Window, DefaultWindow),
		pendingAge: cfg.PendingAge,
		logger:     cfg.Logger,
		now:        cfg.Now,
		onStale:    cfg.BacklogStale,
		open:       make(map[noticeKey]*Notice),
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
func (n *Notifier) JobDead(job *queue.Job, c queue.Completion) {
	if job.Source == Source {
		return
	}
	at := cmp.Or(c.Now, n.now())
	n.add(TypeJobDead, queue.Route{Source: job.Source, Target: job.Target}, at, func(nt *Notice) {
		if len(nt.JobIDs) < noticeSampleJobs {
			nt.JobIDs = append(nt.JobIDs, job.ID)
		}
		nt.LastError = queue.SafeLine(c.Error, noticeErrorLen)
	})
}

// CircuitChanged records that the circuit breaker of route opened (open)
// or closed. It is the hook the circuit breaker calls.
func (n *Notifier) CircuitChanged(route queue.Route, open bool) {
	if route.Source == Source {
		return
	}
	kind := TypeCircuitClosed
	if open {
		kind = TypeCircuitOpened
	}
	n.add(kind, route, n.now(), nil)
}

// add counts one occurrence of kind on route at at; update, if not nil,
// adds its details.
func (n *Notifier) add(kind string, route queue.Route, at time.Time, update func(*Notice)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	key := noticeKey{kind: kind, route: route}
	nt := n.open[key]
	if nt == nil {
		nt = &Notice{Type: kind, Source: route.Source, Target: route.Target, FirstAt: at}
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

// Flush enqueues the notices whose window has closed at now, or all of
// them, and returns how many it enqueued. A notice that cannot be stored
// stays for the next flush.
func (n *Notifier) Flush(ctx context.Context, now time.Time, all bool) (int, error) {
	n.mu.Lock()
	var due []noticeKey
	for key, nt := range n.open {
		if all || !now.Before(nt.FirstAt.Add(n.window)) {
			due = append(due, key)
		}
	}
	batch := make([]*Notice, len(due))
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
func (n *Notifier) requeue(key noticeKey, nt *Notice) {
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
func (n *Notifier) enqueue(ctx context.Context, nt *Notice, now time.Time) error {
	body, err := json.Marshal(nt)
	if err != nil {
		return err
	}
	_, err = n.store.Enqueue(ctx, queue.Event{
		Source:     Source,
		DeliveryID: noticeID(nt, now, n.pendingAge),
		EventType:  nt.Type,
		Headers:    []queue.Header{{Name: "Content-Type", Value: "application/json"}},
		Payload:    body,
		Targets:    []string{Target},
	})
	return err
}

// noticeID is a notice's delivery id. A backlog.stale notice's id names
// its route and period, so that Caddy instances sharing a queue, which all
// see the same backlog, store it once; other notices report what one
// instance saw, and get a random id.
func noticeID(nt *Notice, now time.Time, period time.Duration) string {
	if nt.Type == TypeBacklogStale && period > 0 {
		return fmt.Sprintf("ntc_%s_%s_%s_%d", nt.Type, nt.Source, nt.Target, now.UnixNano()/int64(period))
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "ntc_" + nt.Type + "_" + hex.EncodeToString(b[:])
}

// checkBacklog reads the queue's stats and records a backlog.stale notice
// for each route whose oldest due pending job is PendingAge old or older,
// unless it was reported less than PendingAge ago.
func (n *Notifier) checkBacklog(ctx context.Context, now time.Time) error {
	if n.pendingAge <= 0 {
		return nil
	}
	st, err := n.store.Stats(ctx, now)
	if err != nil {
		return fmt.Errorf("check backlog: %w", err)
	}
	stale := make(map[queue.Route]queue.Count)
	for _, c := range st.Counts {
		if c.Status == queue.StatusPending && c.Source != Source && c.OldestPending >= n.pendingAge {
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
		if n.onStale != nil {
			n.onStale(c)
		}
		n.add(TypeBacklogStale, queue.Route{Source: c.Source, Target: c.Target}, now, func(nt *Notice) {
			nt.Pending = c.Jobs
			nt.OldestPendingSeconds = int64(c.OldestPending / time.Second)
		})
	}
	return nil
}

// runOnce is one step of the loop at now: the backlog check, once per
// window, then the flush of the windows that closed.
func (n *Notifier) runOnce(ctx context.Context, now time.Time) {
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
	if _, err := n.Flush(ctx, now, false); err != nil && ctx.Err() == nil {
		n.logger.Error("notify: store notices; they are kept for the next try", zap.Error(err))
	}
}

// tick returns the loop's interval: a tenth of the window, so a notice goes
// out at most that late, and within 10ms and 5s.
func (n *Notifier) tick() time.Duration {
	return min(max(n.window/10, 10*time.Millisecond), 5*time.Second)
}

// Start runs the loop until Stop or until ctx is cancelled.
func (n *Notifier) Start(ctx context.Context) {
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
func (n *Notifier) Stop(ctx context.Context) error {
	if n.cancel != nil {
		n.cancel()
		select {
		case <-n.done:
		case <-ctx.Done():
			return fmt.Errorf("stop notifier: %w", context.Cause(ctx))
		}
	}
	if _, err := n.Flush(ctx, n.now(), true); err != nil {
		return fmt.Errorf("stop notifier: %w", err)
	}
	return nil
}
