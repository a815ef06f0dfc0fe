package postgres

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/queuetest"
)

// The work side of a queue on PostgreSQL, in the shape of River's own
// benchmark so that the two can be run side by side on one server:
// 512-byte payloads, 32 producers, a pool of 32 or 100 workers with a
// no-op handler.
//
//	eval "$(.ci/start-postgres)"
//	go test -run '^$' -bench 'Work/drain' -benchtime 50000x ./queue/postgres/    # a backlog of 50,000
//	go test -run '^$' -bench 'Work/steady' -benchtime 20000x ./queue/postgres/   # 20 s at 1,000 jobs/s
//
// drain enqueues b.N jobs from 32 producers (reported as insert-events/s),
// then starts the pool and times it until the last job is recorded done.
// steady runs the pool while 32 producers enqueue 1,000 jobs a second in
// all, and reports the time from enqueue to the handler's start. Both
// report what the server spent per job, from its own counters read before
// and after: commits (pg_stat_database), WAL records, bytes and syncs
// (pg_stat_wal), statements, top-level and nested, when the database has
// pg_stat_statements, and the server's CPU time when it runs on this
// machine (every process of its postmaster, from /proc); and this
// process's own CPU time a job (the pool, the producers, the driver). Every run checks
// that no job ran twice and that no store call failed (a deadlock fails
// one).
func BenchmarkWork(b *testing.B) {
	for _, workers := range []int{32, 100} {
		b.Run(fmt.Sprint("drain/workers=", workers), func(b *testing.B) { benchDrain(b, workers) })
	}
	b.Run("steady/workers=32", func(b *testing.B) { benchSteady(b, 32, 1000) })
}

// workHarness is one run's store, pool and bookkeeping.
type workHarness struct {
	s     *Store
	pool  *queue.Pool
	admin *pgx.Conn
	ts    *queuetest.CountingStore

	mu       sync.Mutex
	runs     map[int64]int32
	twice    int
	lag      []time.Duration // enqueue to handler start
	done     atomic.Int64
	allDone  chan struct{}
	want     int64
	failures atomic.Int64
	firstErr atomic.Value
}

func newWorkHarness(b *testing.B, workers int, want int64) *workHarness {
	dsn := testutil.PostgresDSN(b)
	h := &workHarness{
		s:       openStore(b, Config{DSN: dsn, Schema: testSchema(b, dsn), MaxConns: 40}),
		admin:   adminConn(b),
		runs:    make(map[int64]int32, want),
		allDone: make(chan struct{}),
		want:    want,
	}
	h.ts = &queuetest.CountingStore{Store: h.s}
	p, err := queue.NewPool(queue.PoolConfig{
		Store: h.ts, Workers: workers, Observer: h,
		Handler: queue.HandlerFunc(func(_ context.Context, job *queue.Job) error {
			lag := time.Since(job.CreatedAt)
			h.mu.Lock()
			h.runs[job.ID]++
			if h.runs[job.ID] == 2 {
				h.twice++
			}
			h.lag = append(h.lag, lag)
			h.mu.Unlock()
			return nil
		}),
	})
	if err != nil {
		b.Fatal(err)
	}
	h.pool = p
	return h
}

func (h *workHarness) JobStarted(*queue.Job)    {}
func (h *workHarness) JobHandedBack(*queue.Job) {}
func (h *workHarness) LeaseLost(*queue.Job)     {}
func (h *workHarness) StoreError(_ string, err error) {
	h.failures.Add(1)
	h.firstErr.CompareAndSwap(nil, err)
}
func (h *workHarness) JobFinished(_ *queue.Job, _ queue.Completion, recorded bool, _ error) {
	if recorded && h.done.Add(1) == h.want {
		close(h.allDone)
	}
}

func (h *workHarness) start(b *testing.B) {
	if err := h.pool.Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = h.pool.Stop(ctx)
	})
}

// produce enqueues n events from producers goroutines, at most rate a
// second in all (0: as fast as they go).
func (h *workHarness) produce(b *testing.B, n int64, producers int, rate float64) {
	payload := make([]byte, 512)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for p := range producers {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > n {
					return
				}
				if rate > 0 {
					if d := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); d > 0 {
						time.Sleep(d) // pacing the producers, not waiting for a state
					}
				}
				e := queue.Event{Source: "bench", DeliveryID: fmt.Sprint("p", p, "-", i), EventType: "order.paid",
					Headers: []queue.Header{{Name: "Content-Type", Value: "application/json"}},
					Payload: payload, Targets: []string{"mail"}}
				if _, err := h.s.Enqueue(context.WithoutCancel(b.Context()), e); err != nil {
					h.StoreError("enqueue", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// wait waits for every job to be recorded done and checks the run.
func (h *workHarness) wait(b *testing.B) {
	select {
	case <-h.allDone:
	case <-time.After(10 * time.Minute):
		b.Fatalf("%d of %d jobs done after 10 minutes", h.done.Load(), h.want)
	}
}

func (h *workHarness) check(b *testing.B) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.twice > 0 {
		b.Errorf("%d of %d jobs ran more than once", h.twice, h.want)
	}
	if n := h.failures.Load(); n > 0 {
		b.Errorf("%d store calls failed, the first: %v", n, h.firstErr.Load())
	}
	b.ReportMetric(float64(h.twice), "ran-twice")
	h.ts.ReportBatches(b)
}

func benchDrain(b *testing.B, workers int) {
	n := int64(b.N)
	h := newWorkHarness(b, workers, n)
	insert := time.Now()
	h.produce(b, n, 32, 0)
	inserted := float64(n) / time.Since(insert).Seconds()
	before := readServer(b, h.admin)
	b.ResetTimer()
	started := time.Now()
	h.start(b)
	h.wait(b)
	elapsed := time.Since(started)
	b.StopTimer()
	readServer(b, h.admin).since(before).report(b, n)
	b.ReportMetric(float64(n)/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(inserted, "insert-events/s")
	h.check(b)
}

func benchSteady(b *testing.B, workers int, rate float64) {
	n := int64(b.N)
	h := newWorkHarness(b, workers, n)
	h.start(b)
	before := readServer(b, h.admin)
	b.ResetTimer()
	h.produce(b, n, 32, rate)
	h.wait(b)
	b.StopTimer()
	readServer(b, h.admin).since(before).report(b, n)
	h.mu.Lock()
	slices.Sort(h.lag)
	if len(h.lag) > 0 {
		b.ReportMetric(float64(h.lag[len(h.lag)/2].Microseconds())/1000, "p50-start-ms")
		b.ReportMetric(float64(h.lag[len(h.lag)*99/100].Microseconds())/1000, "p99-start-ms")
	}
	h.mu.Unlock()
	h.check(b)
}

// serverCounters are what a PostgreSQL server reports of its own work.
// Statements need the pg_stat_statements extension in the database, CPU a
// server on this machine; without them they are reported as missing.
type serverCounters struct {
	commits, deadlocks           int64
	walRecords, walBytes, walSyn int64
	topCalls, nestedCalls        int64
	stmts                        bool
	cpu                          time.Duration
	cpuOK                        bool
	self                         time.Duration // this process's CPU time: the pool, the producers, the driver
}

func readServer(tb testing.TB, conn *pgx.Conn) serverCounters {
	tb.Helper()
	ctx := context.Background()
	var c serverCounters
	if err := conn.QueryRow(ctx, `SELECT xact_commit, deadlocks FROM pg_stat_database WHERE datname = current_database()`).
		Scan(&c.commits, &c.deadlocks); err != nil {
		tb.Fatalf("read pg_stat_database: %v", err)
	}
	if err := conn.QueryRow(ctx, `SELECT wal_records, wal_bytes::bigint, wal_sync FROM pg_stat_wal`).
		Scan(&c.walRecords, &c.walBytes, &c.walSyn); err != nil {
		tb.Fatalf("read pg_stat_wal: %v", err)
	}
	err := conn.QueryRow(ctx, `SELECT coalesce(sum(calls) FILTER (WHERE toplevel), 0)::bigint, coalesce(sum(calls) FILTER (WHERE NOT toplevel), 0)::bigint
FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&c.topCalls, &c.nestedCalls)
	c.stmts = err == nil
	var pid int64
	if err := conn.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'`).Scan(&pid); err == nil {
		c.cpu, c.cpuOK = postmasterCPU(pid)
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		c.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return c
}

func (a serverCounters) since(b serverCounters) serverCounters {
	return serverCounters{
		commits: a.commits - b.commits, deadlocks: a.deadlocks - b.deadlocks,
		walRecords: a.walRecords - b.walRecords, walBytes: a.walBytes - b.walBytes, walSyn: a.walSyn - b.walSyn,
		topCalls: a.topCalls - b.topCalls, nestedCalls: a.nestedCalls - b.nestedCalls, stmts: a.stmts && b.stmts,
		cpu: a.cpu - b.cpu, cpuOK: a.cpuOK && b.cpuOK, self: a.self - b.self,
	}
}

func (c serverCounters) report(b *testing.B, jobs int64) {
	per := func(v int64) float64 { return float64(v) / float64(jobs) }
	b.ReportMetric(per(c.commits), "commits/job")
	b.ReportMetric(per(c.walRecords), "wal-records/job")
	b.ReportMetric(per(c.walBytes), "wal-bytes/job")
	b.ReportMetric(per(c.walSyn), "wal-syncs/job")
	b.ReportMetric(float64(c.deadlocks), "deadlocks")
	if c.stmts {
		b.ReportMetric(per(c.topCalls), "stmts/job")
		b.ReportMetric(per(c.nestedCalls), "nested/job")
	}
	if c.cpuOK {
		b.ReportMetric(float64(c.cpu.Microseconds())/float64(jobs), "server-us/job")
	}
	b.ReportMetric(float64(c.self.Microseconds())/float64(jobs), "client-us/job")
}

// postmasterCPU sums the CPU time of the server whose checkpointer is pid:
// its postmaster (its own time and that of the children it reaped) and the
// postmaster's live children.
func postmasterCPU(checkpointer int64) (time.Duration, bool) {
	fields := func(pid string) []string {
		b, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			return nil
		}
		s := string(b)
		end := strings.LastIndexByte(s, ')')
		if end < 0 {
			return nil
		}
		return strings.Fields(s[end+1:]) // from the state, field 3
	}
	ticks := func(f []string, from, to int) int64 {
		var n int64
		for _, v := range f[from:to] {
			x, _ := strconv.ParseInt(v, 10, 64)
			n += x
		}
		return n
	}
	cf := fields(strconv.FormatInt(checkpointer, 10))
	if len(cf) < 15 {
		return 0, false
	}
	postmaster := cf[1] // ppid, field 4
	pf := fields(postmaster)
	if len(pf) < 15 {
		return 0, false
	}
	total := ticks(pf, 11, 15) // utime, stime, cutime, cstime
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		f := fields(e.Name())
		if len(f) >= 15 && f[1] == postmaster {
			total += ticks(f, 11, 13)
		}
	}
	// USER_HZ is 100 on Linux.
	return time.Duration(total) * 10 * time.Millisecond, true
}
