package postgres

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/queuetest"
)

// BenchmarkEnqueue measures accepted events per second, each with one job,
// at 1, 32 and 256 concurrent producers, with group commit (the default
// MaxBatch) and with each enqueue its own statement and commit
// (MaxBatch=1, the baseline), in one run so their ratio is measured under
// the same load. The server runs with fsync on. Batched runs also report
// the events each batch statement carried.
func BenchmarkEnqueue(b *testing.B) {
	modes := []struct {
		name     string
		maxBatch int
	}{
		{"batch=default", 0},
		{"batch=1", 1},
	}
	// Both modes of one producer count run back to back, so a change in
	// the shared machine's load touches both alike.
	for _, producers := range []int{1, 32, 256} {
		for _, mode := range modes {
			b.Run(fmt.Sprint("producers=", producers, "/", mode.name), func(b *testing.B) {
				benchEnqueue(b, mode.maxBatch, producers)
			})
		}
	}
}

func benchEnqueue(b *testing.B, maxBatch, producers int) {
	dsn := testutil.PostgresDSN(b)
	s := openStore(b, Config{DSN: dsn, Schema: testSchema(b, dsn), MaxConns: min(producers, 32), MaxBatch: maxBatch})
	payload := make([]byte, 512)
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	b.ResetTimer()
	start := time.Now()
	for p := range producers {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				e := queue.Event{Source: "bench", DeliveryID: fmt.Sprint("p", p, "-", i), EventType: "order.paid",
					Headers: []queue.Header{{Name: "Content-Type", Value: "application/json"}},
					Payload: payload, Targets: []string{"mail"}}
				if _, err := s.Enqueue(b.Context(), e); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	if s.batcher != nil {
		if n := s.batcher.batches.Load(); n > 0 {
			b.ReportMetric(float64(s.batcher.events.Load())/float64(n), "events/batch")
		}
	}
}

// BenchmarkClaimFinish measures jobs per second through claim and finish
// with a no-op handler: 4 claimers, each claiming up to 32 jobs and
// finishing them as done in one call. The jobs are inserted beforehand, in
// front of a backlog of due jobs that stay pending: a claim's cost must
// not grow with the backlog.
func BenchmarkClaimFinish(b *testing.B) {
	for _, backlog := range []int{0, 200_000} {
		b.Run(fmt.Sprint("backlog=", backlog), func(b *testing.B) {
			benchClaimFinish(b, backlog)
		})
	}
}

func benchClaimFinish(b *testing.B, backlog int) {
	const claimers, batch = 4, 32
	dsn := testutil.PostgresDSN(b)
	s := openStore(b, Config{DSN: dsn, Schema: testSchema(b, dsn)})
	admin := adminConn(b)
	schema := s.cfg.Schema
	// The benchmark's jobs are due a minute ago, the backlog's a second
	// ago: claims take the benchmark's first, and walk past none.
	_, err := admin.Exec(b.Context(), `
INSERT INTO `+schema+`.events (source, delivery_id, headers, payload, targets, created_at)
SELECT 'bench', 'd' || g, '', convert_to(repeat('x', 512), 'UTF8'), 1, now()
FROM generate_series(1, $1::int + $2::int) AS g`, b.N, backlog)
	if err != nil {
		b.Fatal(err)
	}
	_, err = admin.Exec(b.Context(), `
INSERT INTO `+schema+`.jobs (event_id, source, target, run_at, created_at)
SELECT id, 'bench', 'mail', now() - CASE WHEN id <= $1 THEN interval '1 minute' ELSE interval '1 second' END, now()
FROM `+schema+`.events`, b.N)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := admin.Exec(b.Context(), "ANALYZE "+schema+".jobs; ANALYZE "+schema+".events"); err != nil {
		b.Fatal(err)
	}
	var claimed, done atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for c := range claimers {
		owner := fmt.Sprint("claimer-", c)
		wg.Go(func() {
			for {
				// Take only what is left of b.N, so the backlog stays.
				limit := min(batch, int64(b.N)-claimed.Load())
				if limit <= 0 {
					return
				}
				now := time.Now()
				jobs, err := s.Claim(b.Context(), queue.ClaimParams{Owner: owner, Limit: int(limit), Lease: time.Minute, Now: now})
				if err != nil {
					failed.Store(err)
					return
				}
				claimed.Add(int64(len(jobs)))
				cs := make([]queue.Completion, len(jobs))
				for i, j := range jobs {
					cs[i] = queue.Completion{JobID: j.ID, Owner: owner, Fence: j.Fence, Status: queue.StatusDone, Started: now, Now: time.Now()}
				}
				rec, err := s.Finish(b.Context(), cs)
				if err != nil {
					failed.Store(err)
					return
				}
				for _, ok := range rec {
					if ok {
						done.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(err)
	}
	if got := done.Load(); got < int64(b.N) {
		b.Fatalf("finished %d jobs, want %d", got, b.N)
	}
	b.ReportMetric(float64(done.Load())/elapsed.Seconds(), "jobs/s")
}

// BenchmarkStats reads Stats with a million jobs pending: the counts are
// kept as the jobs change, so a read sums a few delta rows however many
// jobs there are.
func BenchmarkStats(b *testing.B) {
	const jobs = 1_000_000
	dsn := testutil.PostgresDSN(b)
	s := openStore(b, Config{DSN: dsn, Schema: testSchema(b, dsn)})
	schema := s.cfg.Schema
	_, err := adminConn(b).Exec(b.Context(), `
WITH ev AS (
	INSERT INTO `+schema+`.events (source, delivery_id, headers, payload, targets, created_at)
	SELECT 'bench', 'd' || g, '', '', 1, now() FROM generate_series(1, $1::int) AS g
	RETURNING id
)
INSERT INTO `+schema+`.jobs (event_id, source, target, run_at, created_at)
SELECT id, 'bench', 'mail', now(), now() FROM ev`, jobs)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		st, err := s.Stats(b.Context(), time.Now())
		if err != nil {
			b.Fatal(err)
		}
		if len(st.Counts) != 1 || st.Counts[0].Jobs != jobs {
			b.Fatalf("counts %+v, want %d pending", st.Counts, jobs)
		}
	}
}

// BenchmarkSealed measures what encryption at rest costs the store, keys
// off and on in turn (run it several times with -count 1 for alternating
// pairs): ingest at 32 producers, and end to end (every event enqueued,
// claimed and finished by 4 claimers). cpu-us/op is this process's CPU
// per event, the client's share: sealing and opening happen here, not on
// the server.
func BenchmarkSealed(b *testing.B) {
	dsn := testutil.PostgresDSN(b)
	for _, op := range []string{"ingest", "e2e"} {
		for _, keys := range []struct {
			name string
			keys queue.Keys
		}{{"off", queue.Keys{}}, {"on", queue.Keys{Ring: queuetest.Ring(b, "bench")}}} {
			b.Run("op="+op+"/keys="+keys.name, func(b *testing.B) {
				s := openStore(b, Config{DSN: dsn, Schema: testutil.FreshSchema(b, dsn), MaxConns: 32, Keys: keys.keys})
				payload := make([]byte, 512)
				var next, left atomic.Int64
				left.Store(int64(b.N))
				b.ResetTimer()
				cpu := processCPU()
				start := time.Now()
				var wg sync.WaitGroup
				var failed atomic.Value
				for range 32 {
					wg.Go(func() {
						for left.Add(-1) >= 0 {
							e := queue.Event{Source: "bench", DeliveryID: fmt.Sprint("d", next.Add(1)), EventType: "order.paid",
								Headers: []queue.Header{{Name: "Content-Type", Value: "application/json"}}, Payload: payload, Targets: []string{"mail"}}
							if _, err := s.Enqueue(b.Context(), e); err != nil {
								failed.Store(err)
								return
							}
						}
					})
				}
				wg.Wait()
				if op == "e2e" {
					left.Store(int64(b.N))
					for w := range 4 {
						wg.Go(func() {
							owner := fmt.Sprint("bench-", w)
							for left.Load() > 0 {
								jobs, err := s.Claim(b.Context(), queue.ClaimParams{Owner: owner, Limit: 32, Lease: time.Minute})
								if err != nil {
									failed.Store(err)
									return
								}
								cs := make([]queue.Completion, len(jobs))
								for i, j := range jobs {
									cs[i] = queue.Completion{JobID: j.ID, Owner: owner, Fence: j.Fence, Status: queue.StatusDone, Started: time.Now()}
								}
								if _, err := s.Finish(b.Context(), cs); err != nil {
									failed.Store(err)
									return
								}
								left.Add(-int64(len(jobs)))
							}
						})
					}
					wg.Wait()
				}
				elapsed := time.Since(start)
				b.StopTimer()
				if err := failed.Load(); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
				if used := processCPU() - cpu; cpu > 0 {
					b.ReportMetric(float64(used)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
				}
			})
		}
	}
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
