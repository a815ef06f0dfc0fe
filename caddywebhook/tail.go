package caddywebhook

import (
	"cmp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/queue"
)

// The tail: GET /webhook/tail streams one line per received event and per
// delivery attempt as they happen, like `stripe listen`. The receivers and
// the pools' observers publish to one hub in the process; each subscriber
// (one open tail request) gets the lines that match its filter through a
// bounded buffer. Publishing never waits: a subscriber whose buffer is
// full loses the line, and the count of lost lines is sent to it with the
// next line it gets. With no subscriber, publishing is one atomic load, so
// ingest and the pool pay nothing for the feature while nobody watches.
//
// A line carries what the logs already carry: ids, source, target, event
// type, outcome word, the receiver's status code, attempt number, duration
// and the delivery's error text (truncated as in the logs). Never a
// header, a body or a secret.

// tailBuffer is how many lines a subscriber may be behind before it loses
// lines.
const tailBuffer = 256

// The defaults of App.MaxTails and App.TailMaxLag.
const (
	defaultMaxTails   = 16
	defaultTailMaxLag = 10 * time.Second
)

// tailFilter selects lines; empty fields match everything. A target
// filter keeps only deliveries: a received event has no target yet.
type tailFilter struct {
	source, target, outcome string
}

func (f tailFilter) match(l *adminapi.TailLine) bool {
	return (f.source == "" || f.source == l.Source) &&
		(f.target == "" || f.target == l.Target) &&
		(f.outcome == "" || f.outcome == l.Outcome)
}

// tailHub fans lines out to the subscribers.
type tailHub struct {
	n    atomic.Int32 // subscribers, read without the lock
	mu   sync.RWMutex
	subs map[*tailSub]struct{}
}

// tailSub is one subscriber.
type tailSub struct {
	filter  tailFilter
	lines   chan adminapi.TailLine
	dropped atomic.Int64
}

// active reports whether anyone listens; publishers check it before they
// build a line.
func (h *tailHub) active() bool { return h.n.Load() > 0 }

// subscribe adds a subscriber, or returns nil when max subscribers (0:
// the default) are open already; the caller must unsubscribe the one it
// got. The subscribers open past a lowered cap stay.
func (h *tailHub) subscribe(f tailFilter, max int) *tailSub {
	s := &tailSub{filter: f, lines: make(chan adminapi.TailLine, tailBuffer)}
	h.mu.Lock()
	if len(h.subs) >= cmp.Or(max, defaultMaxTails) {
		h.mu.Unlock()
		return nil
	}
	if h.subs == nil {
		h.subs = make(map[*tailSub]struct{})
	}
	h.subs[s] = struct{}{}
	h.n.Add(1)
	h.mu.Unlock()
	return s
}

func (h *tailHub) unsubscribe(s *tailSub) {
	h.mu.Lock()
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		h.n.Add(-1)
	}
	h.mu.Unlock()
}

// publish offers l to every subscriber whose filter matches, without
// waiting for any.
func (h *tailHub) publish(l adminapi.TailLine) {
	if !h.active() {
		return
	}
	if l.Time.IsZero() {
		l.Time = time.Now().UTC()
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	for s := range h.subs {
		if !s.filter.match(&l) {
			continue
		}
		select {
		case s.lines <- l:
		default:
			s.dropped.Add(1)
		}
	}
}

// publishReceived reports what a receiver did with a request.
func (h *tailHub) publishReceived(info *requestInfo) {
	if !h.active() {
		return
	}
	h.publish(adminapi.TailLine{
		Kind:       adminapi.TailReceived,
		Source:     info.source,
		Outcome:    info.outcome.String(),
		Status:     info.status,
		DeliveryID: info.deliveryID,
		EventType:  info.eventType,
	})
}

// publishDelivery reports the end of a delivery attempt with its outcome
// word (delivered, retry, dead, lease_lost, handed_back).
func (h *tailHub) publishDelivery(job *queue.Job, word string, d time.Duration, errText string) {
	if !h.active() {
		return
	}
	h.publish(adminapi.TailLine{
		Kind:       adminapi.TailDelivery,
		Source:     job.Source,
		Target:     job.Target,
		Outcome:    word,
		DeliveryID: job.DeliveryID,
		EventType:  job.EventType,
		EventID:    job.EventID,
		JobID:      job.ID,
		Attempt:    job.Attempt,
		DurationMS: float64(d.Microseconds()) / 1000,
		Error:      queue.SafeLine(errText, maxLoggedError),
	})
}
