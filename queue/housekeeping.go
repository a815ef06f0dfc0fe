package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// Default HousekeeperConfig settings.
const (
	// DefaultRetention keeps done jobs, and with them their events' dedupe
	// keys, for 7 days. A sender that redelivers an event we already
	// delivered must find its (source, delivery id) still stored, or the
	// redelivery is accepted as new and delivered twice. Stripe retries for
	// up to 3 days, GitHub and most others for less; a week covers them
	// with room for a sender's own outage, at the cost of keeping a week
	// of payloads on disk.
	DefaultRetention = 7 * 24 * time.Hour
	// DefaultPurgeInterval is how often done jobs are purged.
	DefaultPurgeInterval = time.Hour
)

// HousekeeperObserver receives the housekeeper's results, for metrics and
// logs.
type HousekeeperObserver interface {
	// Purged is called after each pass with the number of done jobs deleted.
	Purged(jobs int, cutoff time.Time)
	// StoreError is called when a purge fails; op is "purge".
	StoreError(op string, err error)
}

// HousekeeperConfig configures a Housekeeper. Zero fields take their
// defaults.
type HousekeeperConfig struct {
	// Store holds the jobs. Required.
	Store Store
	// Retention is how long done jobs are kept after they finish. Dead jobs
	// are never purged: they wait for a human to replay or discard them.
	// Default: 7 days (see DefaultRetention).
	Retention time.Duration
	// Interval is the time between passes; the first runs at Start.
	// Default: 1h.
	Interval time.Duration
	// Observer receives each pass's result. Default: none.
	Observer HousekeeperObserver
	// Now is the clock the retention is measured from. Default: time.Now.
	Now func() time.Time
}

// Housekeeper periodically purges done jobs older than the retention.
type Housekeeper struct {
	store     Store
	retention time.Duration
	interval  time.Duration
	obs       HousekeeperObserver
	now       func() time.Time

	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// NewHousekeeper checks cfg, fills in its defaults and returns a housekeeper
// that is not yet running.
func NewHousekeeper(cfg HousekeeperConfig) (*Housekeeper, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("new housekeeper: Store is required")
	case cfg.Retention < 0:
		return nil, fmt.Errorf("new housekeeper: Retention is %s, must not be negative", cfg.Retention)
	case cfg.Interval < 0:
		return nil, fmt.Errorf("new housekeeper: Interval is %s, must not be negative", cfg.Interval)
	}
	h := &Housekeeper{
		store:     cfg.Store,
		retention: cmp.Or(cfg.Retention, DefaultRetention),
		interval:  cmp.Or(cfg.Interval, DefaultPurgeInterval),
		obs:       cfg.Observer,
		now:       cfg.Now,
		done:      make(chan struct{}),
	}
	if h.now == nil {
		h.now = time.Now
	}
	return h, nil
}

// Start runs a pass now and then every Interval, until Stop or until ctx is
// cancelled.
func (h *Housekeeper) Start(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.started {
		return errors.New("start housekeeper: already started")
	}
	h.started = true
	ctx, h.cancel = context.WithCancel(ctx)
	go func() {
		defer close(h.done)
		t := time.NewTicker(h.interval)
		defer t.Stop()
		for {
			_, err := h.runOnce(ctx)
			if err != nil && ctx.Err() == nil && h.obs != nil {
				h.obs.StoreError("purge", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return nil
}

// Stop ends the loop, cancelling a pass in progress between two batches,
// and waits for it. It is idempotent and harmless before Start.
func (h *Housekeeper) Stop(ctx context.Context) error {
	h.mu.Lock()
	started, cancel := h.started, h.cancel
	h.mu.Unlock()
	if !started {
		return nil
	}
	cancel()
	select {
	case <-h.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop housekeeper: %w", context.Cause(ctx))
	}
}

// runOnce purges done jobs finished before now-Retention and returns the
// number deleted. One Purge call does it all: every Store cuts a purge into
// short transactions of its own (storekit.BulkInChunks), so the enqueues
// around it never wait for more than one of them.
func (h *Housekeeper) runOnce(ctx context.Context) (int, error) {
	cutoff := h.now().Add(-h.retention)
	total, err := h.store.Purge(ctx, cutoff, math.MaxInt)
	if err != nil && ctx.Err() == nil {
		return total, fmt.Errorf("purge jobs: %w", err)
	}
	if h.obs != nil {
		h.obs.Purged(total, cutoff)
	}
	return total, ctx.Err()
}
