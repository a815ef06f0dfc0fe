package caddywebhook

// The background drain of a replaced config's pool: a reload does not
// wait for running deliveries, and an exit stops every pool still draining
// within one grace.

import (
	"context"
	"errors"
	"maps"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/notify"
	"github.com/caddywebhook/caddywebhook/queue"
)

// stopMargin is how long Stop waits past the grace for handlers that ignore
// their cancelled context before it hands their jobs back regardless.
const stopMargin = 5 * time.Second

// drainState is one draining pool's shutdown grace, and done, closed when
// its drain has ended: the pool done, its notices stored, its store
// reference dropped.
type drainState struct {
	grace time.Duration
	done  chan struct{}
}

// drain lets pool's running deliveries finish in the background after a
// reload: the pool stops claiming at once, hands back the jobs it claimed
// ahead, and keeps extending the leases of the running ones until each
// returns (bounded by its target's timeout), so the new config's pool
// never starts them again. The drain holds its own reference to the
// store, which this app's Cleanup would otherwise close under it, and
// drops it when done. notifier, if not nil, is stopped (its open windows
// stored) after the pool, so the deaths of the drained deliveries are in
// its notices.
func (a *App) drain(pool *queue.Pool, grace time.Duration, notifier *notify.Notifier) {
	key := a.storeKey
	if _, _, err := stores.LoadOrNew(key, func() (caddy.Destructor, error) {
		return nil, errors.New("store is closed")
	}); err != nil {
		// This app holds a reference until Cleanup, so the store is open;
		// should it not be, a real stop is the safe way out.
		a.logger.Error("webhook pool cannot drain in the background; stopping it", zap.Error(err))
		ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), grace+stopMargin)
		defer cancel()
		_ = pool.Stop(ctx)
		if notifier != nil {
			_ = notifier.Stop(ctx)
		}
		return
	}
	done := make(chan struct{})
	drains.mu.Lock()
	drains.pools[pool] = drainState{grace: grace, done: done}
	drains.mu.Unlock()
	pool.Drain()
	logger := a.logger.With(zap.String("lease_owner", pool.Owner()))
	logger.Info("webhook pool draining: running deliveries finish in the background")
	go func() {
		defer close(done)
		<-pool.Done()
		if notifier != nil {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), grace+stopMargin)
			if err := notifier.Stop(ctx); err != nil {
				logger.Error("store the notices of a drained pool", zap.Error(err))
			}
			cancel()
		}
		drains.mu.Lock()
		delete(drains.pools, pool)
		drains.mu.Unlock()
		if _, err := stores.Delete(key); err != nil {
			logger.Error("close store after drain", zap.Error(err))
		}
		logger.Info("webhook pool drained")
	}()
}

// stopDrains stops every pool still draining, all at once: each gives its
// running deliveries its shutdown grace, then hands them back uncharged.
// It returns when all have stopped and their drains have ended (the
// notices of their last deliveries stored: the process exits next), or
// when ctx ends.
func stopDrains(ctx context.Context) {
	drains.mu.Lock()
	pools := maps.Clone(drains.pools)
	drains.mu.Unlock()
	var wg sync.WaitGroup
	for pool, d := range pools {
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, d.grace+stopMargin)
			defer cancel()
			_ = pool.Stop(pctx)
			select {
			case <-d.done:
			case <-ctx.Done():
			}
		})
	}
	wg.Wait()
}
