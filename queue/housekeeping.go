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
	// DefaultPurgeBatch is the number of jobs deleted per Purge call:
	// small, so each delete shares the writer's transaction with the
	// enqueues around it instead of stalling them.
	DefaultPurgeBatch = 500
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
	// Batch is the number of jobs deleted per Purge call; a pass calls Purge
	// until a call deletes fewer. Default: 500.
	Batch int
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
	batch     int
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
	case cfg.Batch < 0:
		return nil, fmt.Errorf("new housekeeper: Batch is %d, must not be negative", cfg.Batch)
	}
	h := &Housekeeper{
		store:     cfg.Store,
		retention: cmp.Or(cfg.Retention, DefaultRetention),
		interval:  cmp.Or(cfg.Interval, DefaultPurgeInterval),
		batch:     cmp.Or(cfg.Batch, DefaultPurgeBatch),
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

// runOnce purges done jobs finished before now-Retention, Batch at a time,
// until a call deletes fewer than Batch, and returns the number deleted.
func (h *Housekeeper) runOnce(ctx context.Context) (int, error) {
	cutoff := h.now().Add(-h.retention)
	total, err := PurgeAll(ctx, h.store, cutoff, h.batch)
	if err != nil && ctx.Err() == nil {
		return total, fmt.Errorf("purge jobs: %w", err)
	}
	if h.obs != nil {
		h.obs.Purged(total, cutoff)
	}
	return total, ctx.Err()
}

// PurgeAll deletes the done jobs finished before cutoff, calling s.Purge
// with batch until a call deletes fewer, and returns the number deleted. It
// stops early when a call fails or ctx ends; the batches deleted by then stay
// deleted and are counted. The Housekeeper's passes and the admin API's purge
// both run through it.
func PurgeAll(ctx context.Context, s Store, cutoff time.Time, batch int) (int, error) {
	return DeleteInBatches(ctx, math.MaxInt, batch, func(n int) (int, error) {
		return s.Purge(ctx, cutoff, n)
	})
}

// DeleteInBatches is the one "delete until a short batch" loop: it calls del
// with at most batch rows to delete, and calls it again while each call
// deletes all it was asked to, until a call comes back short, limit rows are
// deleted, del fails or ctx ends (between two calls; it then returns
// ctx.Err()). It returns the sum of what del reported, which counts rows del
// deleted even when it also returned an error. PurgeAll cuts a purge into
// Purge calls with it, and a Store cuts one Purge call into short
// transactions with it.
func DeleteInBatches(ctx context.Context, limit, batch int, del func(n int) (int, error)) (int, error) {
	total := 0
	for {
		want := min(batch, limit-total)
		if want <= 0 {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, err := del(want)
		total += n
		if err != nil || n < want {
			return total, err
		}
	}
}
