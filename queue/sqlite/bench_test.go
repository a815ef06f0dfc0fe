package sqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/queuetest"
	"github.com/caddywebhook/caddywebhook/queue/storekit"
)

// The benchmarks run with synchronous=FULL, the default: every commit is
// an fsync. Run them with, for example:
//
//	go test -run '^$' -bench . -benchtime 3s ./queue/sqlite/
//
// Each reports its rate as a custom metric (events/s, jobs/s) so ratios
// can be read off one run, heap in use after a GC (heap-MiB), and the
// process's CPU time per event or job (cpu-us), which unlike the rates
// does not follow the shared disk's fsync latency.

var benchPayload = make([]byte, 512)

var benchHeaders = []queue.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "X-GitHub-Event", Value: "push"}}

// enqueueN enqueues n events from producers goroutines. ids continue from
// *next, so one store can take several rounds.
func enqueueN(b *testing.B, s *Store, producers, n int, next *atomic.Int64) {
	b.Helper()
	var left atomic.Int64
	left.Store(int64(n))
	parallel(b, producers, func(int) error {
		ev := queue.Event{Source: "bench", EventType: "push", Headers: benchHeaders, Payload: benchPayload, Targets: []string{"http"}}
		for left.Add(-1) >= 0 {
			ev.DeliveryID = "d" + strconv.FormatInt(next.Add(1), 10)
			if _, err := s.Enqueue(context.Background(), ev); err != nil {
				return err
			}
		}
		return nil
	})
}

// parallel runs f(0) to f(n-1) in n goroutines, waits for them all and
// fails b with the errors they returned.
func parallel(b *testing.B, n int, f func(i int) error) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if err := f(i); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// measure times run alone and reports its rate in unit and the process's
// CPU time per operation.
func measure(b *testing.B, unit string, run func()) {
	b.Helper()
	b.ResetTimer()
	cpu := processCPU()
	run()
	b.StopTimer()
	reportCPU(b, cpu)
	reportRate(b, unit)
}

func reportRate(b *testing.B, unit string) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), unit)
}

// reportCPU reports the process's CPU time per operation since start
// (a processCPU reading), producers and writer together.
func reportCPU(b *testing.B, start time.Duration) {
	if start == 0 {
		return
	}
	b.ReportMetric(float64(processCPU()-start)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
}

// reportBatch reports the mean requests per committed transaction.
func reportBatch(b *testing.B, s *Store) {
	var batches, requests int64
	s.onWriter(context.Background(), func(w *writer) error {
		batches, requests = w.batches, w.requests
		return nil
	})
	if batches > 0 {
		b.ReportMetric(float64(requests)/float64(batches), "reqs/commit")
	}
}

func reportHeap(b *testing.B) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	b.ReportMetric(float64(m.HeapInuse)/(1<<20), "heap-MiB")
}

// BenchmarkEnqueue compares group commit with one request per transaction
// (MaxBatch=1, the seed's design) at 1, 32 and 256 producers. Mode
// group-normal is group commit with synchronous=normal, no fsync per
// commit: the writer's CPU is then the limit, not the disk.
func BenchmarkEnqueue(b *testing.B) {
	for _, mode := range []struct {
		name        string
		maxBatch    int
		synchronous string
	}{{"group", 0, ""}, {"serial", 1, ""}, {"group-normal", 0, "normal"}} {
		for _, producers := range []int{1, 32, 256} {
			b.Run(fmt.Sprintf("mode=%s/producers=%d", mode.name, producers), func(b *testing.B) {
				s := setup(b, func(c *Config) { c.MaxBatch = mode.maxBatch; c.Synchronous = mode.synchronous })
				var next atomic.Int64
				measure(b, "events/s", func() { enqueueN(b, s, producers, b.N, &next) })
				reportBatch(b, s)
			})
		}
	}
}

// seed inserts n pending jobs (one per event, due long ago) in one
// transaction, far faster than n enqueues; the rows are what Enqueue
// writes.
func seed(b *testing.B, s *Store, n int, prefix string) {
	b.Helper()
	at := time.Now().Add(-time.Hour).UnixMilli()
	err := s.onWriter(context.Background(), func(w *writer) error {
		ctx := context.Background()
		var first int64
		if err := w.conn.QueryRowContext(ctx, "SELECT coalesce(max(id), 0) FROM events").Scan(&first); err != nil {
			return err
		}
		if _, err := w.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			return err
		}
		_, err := w.conn.ExecContext(ctx, `
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
INSERT INTO events (id, source, delivery_id, event_type, headers, payload, targets, created_at)
SELECT ?2 + i, 'bench', ?3 || i, 'push', ?4, ?5, 1, ?6 FROM n`,
			n, first, prefix, storekit.AppendHeaders(nil, benchHeaders), benchPayload, at)
		if err == nil {
			_, err = w.conn.ExecContext(ctx, `
INSERT INTO jobs (event_id, source, target, run_at, created_at)
SELECT id, 'bench', 'http', ?2, ?2 FROM events WHERE id > ?1 ORDER BY id`, first, at)
		}
		if err == nil {
			// The writer counts what Enqueue inserts; rows written
			// here are counted here.
			_, err = w.conn.ExecContext(ctx, `
INSERT INTO job_counts (source, target, status, jobs) VALUES ('bench', 'http', 'pending', ?1)
ON CONFLICT DO UPDATE SET jobs = jobs + excluded.jobs;
UPDATE event_count SET events = events + ?1 WHERE id = 1`, n)
		}
		if err != nil {
			w.conn.ExecContext(ctx, "ROLLBACK")
			return err
		}
		if _, err = w.conn.ExecContext(ctx, "COMMIT"); err != nil {
			return err
		}
		// Move the seed out of the WAL now, not in the measured time.
		return w.checkpoint("TRUNCATE")
	})
	if err != nil {
		b.Fatalf("seed %d jobs: %v", n, err)
	}
}

// claimFinishN claims and finishes n jobs with workers concurrent loops,
// each claiming up to batch jobs and finishing them done in one call, as
// the pool does with no handler work.
func claimFinishN(b *testing.B, s *Store, workers, batch, n int) {
	b.Helper()
	var left atomic.Int64
	left.Store(int64(n))
	parallel(b, workers, func(w int) error {
		owner := fmt.Sprint("bench-", w)
		cs := make([]queue.Completion, 0, batch)
		for {
			// Reserve up to batch of the jobs left, so that the
			// workers together claim exactly n.
			after := left.Add(-int64(batch))
			want := min(int64(batch), after+int64(batch))
			if want <= 0 {
				return nil
			}
			now := time.Now()
			jobs, err := s.Claim(context.Background(), queue.ClaimParams{Owner: owner, Limit: int(want), Lease: time.Minute, Now: now})
			if err != nil {
				return err
			}
			if int64(len(jobs)) != want {
				return fmt.Errorf("claimed %d jobs, want %d", len(jobs), want)
			}
			cs = cs[:0]
			for _, j := range jobs {
				cs = append(cs, queue.Completion{JobID: j.ID, Owner: owner, Fence: j.Fence, Status: queue.StatusDone, Started: now, Duration: time.Millisecond, Now: now})
			}
			if _, err := s.Finish(context.Background(), cs); err != nil {
				return err
			}
		}
	})
}

// The backlog store is seeded once per process and shared by the backlog
// benchmarks: seeding a million rows takes seconds.
var (
	backlogOnce  sync.Once
	backlogStore *Store
	backlogNext  atomic.Int64
	backlogDir   string
)

// TestMain removes the shared backlog store after the benchmarks.
func TestMain(m *testing.M) {
	code := m.Run()
	if backlogStore != nil {
		backlogStore.Close()
	}
	if backlogDir != "" {
		os.RemoveAll(backlogDir)
	}
	os.Exit(code)
}

const backlog = 1_000_000

func backlogged(b *testing.B) *Store {
	backlogOnce.Do(func() {
		dir, err := os.MkdirTemp("", "queue-sqlite-bench-")
		if err != nil {
			b.Fatal(err)
		}
		backlogDir = dir
		s, err := Open(context.Background(), Config{Path: filepath.Join(dir, "backlog.db")})
		if err != nil {
			b.Fatal(err)
		}
		seed(b, s, backlog, "backlog-")
		backlogStore = s
	})
	if backlogStore == nil {
		b.Fatal("backlog store failed to open")
	}
	return backlogStore
}

// BenchmarkClaimFinish measures claim + finish throughput with no handler,
// on a queue holding just the jobs claimed and on one with a backlog of a
// million pending jobs.
func BenchmarkClaimFinish(b *testing.B) {
	const workers, batch = 4, 64
	b.Run("backlog=0", func(b *testing.B) {
		s := setup(b)
		seed(b, s, b.N, "d")
		measure(b, "jobs/s", func() { claimFinishN(b, s, workers, batch, b.N) })
		reportHeap(b)
	})
	b.Run(fmt.Sprintf("backlog=%d", backlog), func(b *testing.B) {
		s := backlogged(b)
		// Claims take from the head of the backlog; the rest stay pending.
		measure(b, "jobs/s", func() { claimFinishN(b, s, workers, batch, b.N) })
		reportHeap(b)
	})
}

// BenchmarkEnqueueBacklog measures enqueue at 32 producers on an empty
// queue and on one with a million pending jobs.
func BenchmarkEnqueueBacklog(b *testing.B) {
	const producers = 32
	b.Run("backlog=0", func(b *testing.B) {
		s := setup(b)
		var next atomic.Int64
		measure(b, "events/s", func() { enqueueN(b, s, producers, b.N, &next) })
		reportHeap(b)
	})
	b.Run(fmt.Sprintf("backlog=%d", backlog), func(b *testing.B) {
		s := backlogged(b)
		measure(b, "events/s", func() { enqueueN(b, s, producers, b.N, &backlogNext) })
		reportHeap(b)
	})
}

// BenchmarkEnqueueUUID is the load test's ingest phase without HTTP: 32
// producers, delivery ids shaped like GitHub's (random UUIDs), which land
// anywhere in the key set, as in production, where BenchmarkEnqueue's
// counter ids are sequential.
func BenchmarkEnqueueUUID(b *testing.B) {
	for _, mode := range []string{"full", "normal"} {
		b.Run("sync="+mode, func(b *testing.B) {
			s := setup(b, func(c *Config) { c.Synchronous = mode })
			const producers = 32
			var left atomic.Int64
			left.Store(int64(b.N))
			measure(b, "events/s", func() {
				parallel(b, producers, func(p int) error {
					rng := rand.New(rand.NewPCG(uint64(p), 1))
					ev := queue.Event{Source: "github", EventType: "push", Headers: benchHeaders, Payload: benchPayload, Targets: []string{"http"}}
					var id [36]byte
					for left.Add(-1) >= 0 {
						ev.DeliveryID = uuid(&id, rng)
						if _, err := s.Enqueue(context.Background(), ev); err != nil {
							return err
						}
					}
					return nil
				})
			})
			reportBatch(b, s)
		})
	}
}

// uuid formats a random version-4 UUID into id.
func uuid(id *[36]byte, rng *rand.Rand) string {
	const hexDigits = "0123456789abcdef"
	hi, lo := rng.Uint64(), rng.Uint64()
	j := 0
	for i := range 32 {
		if i == 8 || i == 12 || i == 16 || i == 20 {
			id[j] = '-'
			j++
		}
		var v uint64
		if i < 16 {
			v = hi >> (60 - 4*i)
		} else {
			v = lo >> (60 - 4*(i-16))
		}
		id[j] = hexDigits[v&0xf]
		j++
	}
	return string(id[:])
}

// BenchmarkStats reads Stats with a million jobs pending: the counts are
// kept as the jobs change, so a read costs the same as on an empty queue.
func BenchmarkStats(b *testing.B) {
	s := backlogged(b)
	for b.Loop() {
		st, err := s.Stats(context.Background(), time.Now())
		if err != nil {
			b.Fatal(err)
		}
		if n := st.Counts[0].Jobs; n < backlog {
			b.Fatalf("%d jobs counted, want at least %d", n, backlog)
		}
	}
}

// BenchmarkKeySet measures what the dedupe key set costs the writer for
// each event it stores, in a set holding keys events: the lookup for a
// duplicate, which finds none but the events of keys that share its tag
// (see keySet), the add, and the removal of the oldest key, as a purge
// makes it, so the set keeps its size.
func BenchmarkKeySet(b *testing.B) {
	for _, keys := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			k := newKeySet(keys)
			b.Cleanup(k.release)
			hashes := make([]uint64, keys+b.N)
			for i := range hashes {
				hashes[i] = keyHash("github", "lt-1-"+strconv.Itoa(i))
			}
			for i := range keys {
				k.add(hashes[i], int64(i+1))
			}
			var buf []int64
			falseHits := 0
			b.ResetTimer()
			for i := range b.N {
				n := keys + i
				buf = k.candidates(buf[:0], hashes[n])
				falseHits += len(buf)
				k.add(hashes[n], int64(n+1))
				k.remove(hashes[i], int64(i+1))
			}
			// A new key shares its tag with one of n stored keys one time
			// in 2^32/n: each such candidate costs the writer a read of
			// an event by id.
			b.ReportMetric(float64(falseHits)/float64(b.N), "false-candidates/op")
		})
	}
}

// BenchmarkSealed measures what encryption at rest costs the store, keys
// off and on in turn, so that -count 6 gives alternating pairs of one run:
// ingest (32 producers, as BenchmarkEnqueue) and end to end (every event
// enqueued, claimed and finished), each with synchronous=normal so the
// CPU, not the shared disk's fsync, is what the figures show. cpu-us/op is
// the process's CPU per event.
func BenchmarkSealed(b *testing.B) {
	for _, op := range []string{"ingest", "e2e"} {
		for _, keys := range []struct {
			name string
			keys queue.Keys
		}{{"off", queue.Keys{}}, {"on", queue.Keys{Ring: queuetest.Ring(b, "bench")}}} {
			b.Run("op="+op+"/keys="+keys.name, func(b *testing.B) {
				s := setup(b, func(c *Config) { c.Synchronous = "normal"; c.Keys = keys.keys })
				var next atomic.Int64
				measure(b, "events/s", func() {
					enqueueN(b, s, 32, b.N, &next)
					if op == "e2e" {
						claimFinishN(b, s, 4, 64, b.N)
					}
				})
			})
		}
	}
}
