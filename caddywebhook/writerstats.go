package caddywebhook

import (
	"context"
	"expvar"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

// writerStatsVar is the expvar, served by Caddy's admin API at
// /debug/vars, that lists the open stores' write counters by store key
// ("sqlite:" + path, or "postgres:" + DSN fingerprint + "/" + schema):
// what the load test divides for its events per commit and WAL pages per
// commit. Nothing is counted for it: each read asks the stores.
const writerStatsVar = "webhook_writers"

// writerStatsWait bounds how long one read waits for a store's writer,
// which answers between two batches.
const writerStatsWait = 5 * time.Second

// writerStatser is a store that reports its write counters.
type writerStatser interface {
	WriterStats(ctx context.Context) (queue.WriterStats, error)
}

func init() {
	expvar.Publish(writerStatsVar, expvar.Func(writerStats))
}

// writerStats reads every open store's counters, from openStores, never
// through the usage pool's locks, so no config load waits while a writer
// finishes its batch or a store opens.
func writerStats() any {
	open := map[string]writerStatser{}
	openStores.Range(func(key, value any) bool {
		if ws, ok := value.(*sharedStore).Store.(writerStatser); ok {
			open[key.(string)] = ws
		}
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), writerStatsWait)
	defer cancel()
	out := make(map[string]queue.WriterStats, len(open))
	for k, ws := range open {
		if st, err := ws.WriterStats(ctx); err == nil {
			out[k] = st
		}
	}
	return out
}
