package queue_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/queuetest"
	"github.com/caddywebhook/caddywebhook/queue/sqlite"
)

// countObserver closes done once n completions are recorded.
type countObserver struct {
	queue.NopObserver
	b       *testing.B
	n       int64
	settled atomic.Int64
	done    chan struct{}
}

func (o *countObserver) JobFinished(job *queue.Job, c queue.Completion, recorded bool, err error) {
	if !recorded || c.Status != queue.StatusDone {
		o.b.Errorf("job %d: recorded %v status %s", job.ID, recorded, c.Status)
	}
	if o.settled.Add(1) == o.n {
		close(o.done)
	}
}

func (o *countObserver) StoreError(op string, err error) {
	o.b.Errorf("store error in %s: %v", op, err)
}

// BenchmarkPoolVsEnqueue measures, in one run and on one fresh file with
// synchronous=FULL, the rate at which 32 producers enqueue b.N events (one
// job each), and the rate at which a pool with a no-op handler claims and
// finishes those jobs. ratio = pool rate / enqueue rate.
//
//	go test ./queue -run '^$' -bench PoolVsEnqueue -benchtime 20000x
//
// The store's writer is bound by fsync, so both rates measure jobs per
// commit: 32 producers put at most 32 enqueues in a commit, and a pool
// carries at most Workers claims and Workers completions in flight.
func BenchmarkPoolVsEnqueue(b *testing.B) {
	const producers = 32
	for _, workers := range []int{32, 64, 128} {
		b.Run("producers=32/workers="+strconv.Itoa(workers), func(b *testing.B) {
			ctx := context.WithoutCancel(b.Context())
			s, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(b.TempDir(), "queue.db")})
			if err != nil {
				b.Fatalf("open store: %v", err)
			}
			defer s.Close()
			payload := []byte(`{"id":"evt","type":"order.paid","data":{"amount":4200,"currency":"eur"}}`)
			n := b.N

			b.ResetTimer()
			// The phases alternate in rounds, so a change in the shared
			// disk's speed during the run weighs on both rates alike.
			rounds := 4
			if n < rounds {
				rounds = 1 // the b.N=1 probe
			}
			var enqueueTime, poolTime time.Duration
			var next atomic.Int64
			cs := &queuetest.CountingStore{Store: s}
			for round := range rounds {
				last := int64(n * (round + 1) / rounds)
				start := time.Now()
				var wg sync.WaitGroup
				for range producers {
					wg.Go(func() {
						for {
							i := next.Add(1)
							if i > last {
								next.Add(-1)
								return
							}
							_, err := s.Enqueue(ctx, queue.Event{
								Source: "bench", DeliveryID: fmt.Sprint(i), EventType: "order.paid",
								Payload: payload, Targets: []string{"t"},
							})
							if err != nil {
								b.Errorf("enqueue: %v", err)
								return
							}
						}
					})
				}
				wg.Wait()
				enqueueTime += time.Since(start)

				obs := &countObserver{b: b, n: last - int64(n*round/rounds), done: make(chan struct{})}
				p, err := queue.NewPool(queue.PoolConfig{
					Store: cs, Workers: workers, Observer: obs,
					Handler: queue.HandlerFunc(func(context.Context, *queue.Job) error { return nil }),
				})
				if err != nil {
					b.Fatalf("new pool: %v", err)
				}
				start = time.Now()
				if err := p.Start(ctx); err != nil {
					b.Fatalf("start pool: %v", err)
				}
				select {
				case <-obs.done:
				case <-time.After(5 * time.Minute):
					b.Fatalf("pool finished %d of %d jobs in 5m", obs.settled.Load(), obs.n)
				}
				poolTime += time.Since(start)
				if err := p.Stop(ctx); err != nil {
					b.Fatalf("stop pool: %v", err)
				}
			}
			enqueueRate := float64(n) / enqueueTime.Seconds()
			poolRate := float64(n) / poolTime.Seconds()
			b.StopTimer()
			b.ReportMetric(enqueueRate, "enqueued/s")
			b.ReportMetric(poolRate, "finished/s")
			b.ReportMetric(poolRate/enqueueRate, "ratio")
			cs.ReportBatches(b)
		})
	}
}
