package queuetest

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/caddywebhook/caddywebhook/queue"
)

// CountingStore counts a pool's Claim and Finish calls on a real store,
// and their jobs, for a benchmark to report the batch sizes the pool
// reaches.
type CountingStore struct {
	queue.Store
	claims, claimed, finishes, finished atomic.Int64
}

func (c *CountingStore) Claim(ctx context.Context, p queue.ClaimParams) ([]*queue.Job, error) {
	jobs, err := c.Store.Claim(ctx, p)
	c.claims.Add(1)
	c.claimed.Add(int64(len(jobs)))
	return jobs, err
}

func (c *CountingStore) Finish(ctx context.Context, cs []queue.Completion) ([]bool, error) {
	c.finishes.Add(1)
	c.finished.Add(int64(len(cs)))
	return c.Store.Finish(ctx, cs)
}

// ReportBatches reports the jobs per Claim and per Finish as b's metrics
// jobs/claim and jobs/finish.
func (c *CountingStore) ReportBatches(b *testing.B) {
	b.ReportMetric(float64(c.claimed.Load())/float64(c.claims.Load()), "jobs/claim")
	b.ReportMetric(float64(c.finished.Load())/float64(c.finishes.Load()), "jobs/finish")
}
