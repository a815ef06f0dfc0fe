package consumer

import (
	"context"
	"sync"
)

// One `caddy webhook listen` may consume several pull targets (--target
// a,b): a listener each, with its own pools, leases, held claims and
// hand-backs, as though each ran alone, sharing the config, the output
// and the process. Each delivery line names its target.

// listenAll runs a listener per target of cfg.Targets until ctx ends,
// then stops them all; the first error one returns (a refused token, a
// target the token may not consume) stops the others and is returned.
func listenAll(ctx context.Context, cfg ListenConfig) error {
	var ls []*listener
	for _, target := range cfg.Targets {
		c := cfg
		c.Target, c.Targets = target, nil
		l, err := newListener(c)
		if err != nil {
			for _, l := range ls {
				closeDestinations(l.dests)
			}
			return err
		}
		ls = append(ls, l)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for _, l := range ls {
		wg.Go(func() {
			defer closeDestinations(l.dests)
			if err := l.run(ctx); err != nil {
				once.Do(func() { first = err })
				cancel()
			}
		})
	}
	wg.Wait()
	return first
}
