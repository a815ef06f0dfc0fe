package caddywebhook

// The store: opened when the app first needs it, shared across reloads
// through the usage pool (process.go), and wrapped so that every write
// that makes jobs claimable wakes the consumers of pull targets.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddywebhook/caddywebhook/queue"
)

// sharedStore is a store in the usage pool; it closes when the last app
// holding it is cleaned up.
type sharedStore struct {
	queue.Store
	settings string     // the Storage settings it was opened with
	wakers   pullWakers // the consumers waiting for pull targets' jobs (pull.go)
	rekey    rekeyRun   // its rekey, running or the last one (rekey.go)
}

// Destruct implements caddy.Destructor. A rekey still running stops
// first; it resumes where it stopped when started again.
func (s *sharedStore) Destruct() error {
	s.rekey.stop()
	return s.Close()
}

// queueStore returns the store, opening (or sharing) it on first use.
func (a *App) queueStore() (*sharedStore, error) {
	if s := a.opened.Load(); s != nil {
		return s, nil
	}
	a.storeMu.Lock()
	defer a.storeMu.Unlock()
	if s := a.opened.Load(); s != nil {
		return s, nil
	}
	if a.released {
		return nil, queue.ErrClosed
	}
	st := a.storage
	key, settings := st.StoreKey(), st.StoreSettings()
	val, loaded, err := stores.LoadOrNew(key, func() (caddy.Destructor, error) {
		s, err := st.OpenStore(a.ctx, a.storeKeys())
		if err != nil {
			return nil, err
		}
		return &sharedStore{Store: s, settings: settings}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("webhook: open store %s: %w", st.StoreName(), err)
	}
	shared := val.(*sharedStore)
	if loaded {
		// Opened by an earlier config, with its keys: this one's apply
		// from now on, or the config fails to load.
		if err := a.useKeys(shared); err != nil {
			_, _ = stores.Delete(key)
			return nil, err
		}
	}
	a.storeKey = key
	if shared.settings != settings {
		a.logger.Warn("storage settings change when Caddy restarts: the open store is shared across reloads",
			zap.String("store", st.StoreName()),
			zap.String("configured", settings),
			zap.String("in_effect", shared.settings))
	}
	a.opened.Store(shared)
	return shared, nil
}

// openedStore returns the store if it is open, else nil.
func (a *App) openedStore() queue.Store {
	if s := a.opened.Load(); s != nil {
		return s.Store
	}
	return nil
}

// pullWakers wake the consumers waiting for a pull target's jobs when this
// process makes some claimable. It lives with the store, shared across
// reloads, so an event enqueued through the new config wakes a consumer
// still waiting on the old one's. With no consumer waiting, waking costs
// one atomic load.
type pullWakers struct {
	waiting atomic.Int64 // channels handed out and not yet closed
	mu      sync.Mutex
	chans   map[string]chan struct{}
}

// wait returns the channel the next wake of target closes.
func (w *pullWakers) wait(target string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.chans[target]; ok {
		return ch
	}
	if w.chans == nil {
		w.chans = make(map[string]chan struct{})
	}
	ch := make(chan struct{})
	w.chans[target] = ch
	w.waiting.Add(1)
	return ch
}

// wake wakes the consumers of targets; none wakes every pull target's.
func (w *pullWakers) wake(targets ...string) {
	if w.waiting.Load() == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(targets) == 0 {
		for target, ch := range w.chans {
			close(ch)
			delete(w.chans, target)
			w.waiting.Add(-1)
		}
		return
	}
	for _, target := range targets {
		if ch, ok := w.chans[target]; ok {
			close(ch)
			delete(w.chans, target)
			w.waiting.Add(-1)
		}
	}
}

// The writes of a shared store that make jobs claimable wake the
// consumers waiting for them: an enqueue, a hand-back, a replay, a resend,
// a job added to an event.

// Enqueue implements queue.Store, and wakes the consumers of the event's
// targets.
func (s *sharedStore) Enqueue(ctx context.Context, ev queue.Event) (queue.EnqueueResult, error) {
	res, err := s.Store.Enqueue(ctx, ev)
	if err == nil && res.Jobs > 0 {
		s.wakers.wake(ev.Targets...)
	}
	return res, err
}

// HandBack implements queue.Store, and wakes the consumers.
func (s *sharedStore) HandBack(ctx context.Context, owner string, claims []queue.Claimed) error {
	err := s.Store.HandBack(ctx, owner, claims)
	if err == nil && len(claims) > 0 {
		s.wakers.wake()
	}
	return err
}

// Replay implements queue.Store, and wakes the consumers.
func (s *sharedStore) Replay(ctx context.Context, id int64) error {
	err := s.Store.Replay(ctx, id)
	if err == nil {
		s.wakers.wake()
	}
	return err
}

// ReplayDead implements queue.Store, and wakes the consumers.
func (s *sharedStore) ReplayDead(ctx context.Context, f queue.Filter) (int, error) {
	n, err := s.Store.ReplayDead(ctx, f)
	if n > 0 {
		s.wakers.wake()
	}
	return n, err
}

// Resend implements queue.Store, and wakes the consumers.
func (s *sharedStore) Resend(ctx context.Context, id int64) error {
	err := s.Store.Resend(ctx, id)
	if err == nil {
		s.wakers.wake()
	}
	return err
}

// Requeue implements queue.Store, and wakes the consumers.
func (s *sharedStore) Requeue(ctx context.Context, items []queue.Requeue) ([]int64, error) {
	ids, err := s.Store.Requeue(ctx, items)
	if slices.ContainsFunc(ids, func(id int64) bool { return id != 0 }) {
		s.wakers.wake()
	}
	return ids, err
}

// AddJob implements queue.Store, and wakes the consumers of target.
func (s *sharedStore) AddJob(ctx context.Context, eventID int64, target string) (int64, error) {
	id, err := s.Store.AddJob(ctx, eventID, target)
	if err == nil {
		s.wakers.wake(target)
	}
	return id, err
}
