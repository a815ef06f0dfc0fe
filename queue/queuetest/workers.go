package queuetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

// testWorkers runs many workers over thousands of jobs, with a producer
// enqueueing while they claim, and retries on a share of the attempts. It
// checks that each job finishes done exactly once, that no job is claimed
// while another worker holds its lease, and that the counts add up.
func testWorkers(t *testing.T, s queue.Store) {
	const (
		events    = 1000
		targets   = 2
		total     = events * targets
		workers   = 8
		producers = 4 // enqueueing while the workers claim
	)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	var (
		mu        sync.Mutex
		holder    = map[int64]string{} // job -> worker holding its lease
		doneCount = map[int64]int{}
		finished  atomic.Int64
		errs      = make(chan error, workers+1)
	)
	go func() {
		var wg sync.WaitGroup
		var failed atomic.Pointer[error]
		for p := range producers {
			wg.Go(func() {
				for i := p; i < events; i += producers {
					if _, err := s.Enqueue(ctx, event("shop", fmt.Sprint("d", i), "mail", "chat")); err != nil {
						err = fmt.Errorf("enqueue: %w", err)
						failed.CompareAndSwap(nil, &err)
						return
					}
				}
			})
		}
		wg.Wait()
		if err := failed.Load(); err != nil {
			errs <- *err
			return
		}
		errs <- nil
	}()
	var wg sync.WaitGroup
	for w := range workers {
		owner := fmt.Sprint("worker-", w)
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), 1))
			for finished.Load() < total {
				jobs, err := s.Claim(ctx, queue.ClaimParams{Owner: owner, Limit: 1 + rnd.IntN(16), Lease: time.Hour, Now: time.Now()})
				if err != nil {
					errs <- fmt.Errorf("%s: claim: %w", owner, err)
					return
				}
				if len(jobs) == 0 {
					select {
					case <-s.Ready():
					case <-time.After(5 * time.Millisecond): // another worker took the signal
					case <-ctx.Done():
						errs <- fmt.Errorf("%s: %w with %d of %d finished", owner, ctx.Err(), finished.Load(), total)
						return
					}
					continue
				}
				mu.Lock()
				for _, j := range jobs {
					if h, ok := holder[j.ID]; ok {
						mu.Unlock()
						errs <- fmt.Errorf("job %d claimed by %s while %s held its lease", j.ID, owner, h)
						return
					}
					holder[j.ID] = owner
				}
				mu.Unlock()
				// The jobs are held outside the lock while their outcomes
				// are decided, as a handler would run, so that another
				// worker's claim of one of them is seen above.
				runtime.Gosched()
				cs := make([]queue.Completion, len(jobs))
				for i, j := range jobs {
					status := queue.StatusDone
					if rnd.IntN(4) == 0 && j.Attempt < 3 {
						status = queue.StatusPending
					}
					at := time.Now()
					cs[i] = queue.Completion{JobID: j.ID, Owner: owner, Fence: j.Fence, Status: status, RunAt: at, Error: "retry", Started: at, Now: at}
				}
				// The lease is released by the Finish below; forget the
				// holder first so that a legitimate re-claim is not flagged.
				mu.Lock()
				for _, j := range jobs {
					delete(holder, j.ID)
				}
				mu.Unlock()
				rec, err := s.Finish(ctx, cs)
				if err != nil {
					errs <- fmt.Errorf("%s: finish: %w", owner, err)
					return
				}
				mu.Lock()
				for i, c := range cs {
					if !rec[i] {
						mu.Unlock()
						errs <- fmt.Errorf("job %d: finish by its lease holder %s not recorded", c.JobID, owner)
						return
					}
					if c.Status == queue.StatusDone {
						doneCount[c.JobID]++
						finished.Add(1)
					}
				}
				mu.Unlock()
			}
			errs <- nil
		})
	}
	wg.Wait()
	for range workers + 1 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if len(doneCount) != total {
		t.Errorf("%d distinct jobs done, want %d", len(doneCount), total)
	}
	for id, n := range doneCount {
		if n != 1 {
			t.Errorf("job %d finished done %d times", id, n)
		}
	}
	st := stats(t, s, time.Now())
	if count(st, queue.StatusDone) != total || count(st, "") != total || st.Events != events {
		t.Errorf("Stats = %+v, want %d done jobs of %d events", st, total, events)
	}
}
