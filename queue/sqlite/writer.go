package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

// reqKind says which write a request carries.
type reqKind uint8

const (
	kindEnqueue reqKind = iota
	kindClaim
	kindExtend
	kindFinish
	kindHandBack
	kindReplay
	kindReplayDead
	kindDiscard
	kindDiscardJobs
	kindPurge
	kindPurgeEvents
)

// Request states. The writer moves a queued request to taken just before it
// runs it; a caller whose context ends moves it to abandoned instead, and
// then the writer skips it. Whoever wins the swap decides the outcome, so
// a caller never reports a failure for a write that was committed.
const (
	stateQueued int32 = iota
	stateTaken
	stateAbandoned
	stateLeft // taken, and its caller gave up waiting at the store's Timeout
)

// request is one write sent to the writer. It is a single flat struct,
// recycled through reqPool, so a request costs no allocation beyond its
// results.
type request struct {
	kind  reqKind
	ctx   context.Context
	state atomic.Int32
	done  chan struct{} // buffered: the writer never waits for a caller
	// timer bounds the caller's wait (Config.Timeout). It stays with the
	// request through the pool, so a write costs no timer of its own.
	timer *time.Timer

	// Inputs; each kind uses a few.
	ev     queue.Event
	sealed []byte   // Enqueue: the event's sealed value, nil for a plain one; its buffer is kept across uses
	texts  []string // Finish: each completion's stored error, then its attempt's, sealed when the store seals
	claim  queue.ClaimParams
	routes string // claim.Routes as JSON, encoded by the caller
	owner  string
	claims []queue.Claimed
	extend queue.ExtendParams
	cs     []queue.Completion
	id     int64
	filter queue.Filter
	cutoff time.Time
	limit  int
	kept   string // DiscardJobs: JSON array of the jobs earlier chunks made pending

	// Outputs, valid once done has fired and err is nil.
	res      queue.EnqueueResult
	jobs     []*queue.Job
	events   []claimedEvent // Claim: the events of jobs, as stored, for the caller to open
	lost     []int64
	recorded []bool
	n        int
	promoted []int64 // DiscardJobs: the blocked jobs this chunk made pending
	ready    bool    // the write made work ready: signal Ready after commit
	err      error
}

var reqPool = sync.Pool{New: func() any { return &request{done: make(chan struct{}, 1)} }}

// newRequest returns a clean request from the pool.
func newRequest(ctx context.Context, kind reqKind) *request {
	r := reqPool.Get().(*request)
	r.kind, r.ctx = kind, ctx
	r.state.Store(stateQueued)
	return r
}

// release clears r and returns it to the pool. Only a caller that received
// r's answer may call it: an abandoned request may still be in the writer's
// hands and is left to the garbage collector.
func (r *request) release() {
	done, timer, sealed := r.done, r.timer, r.sealed[:0]
	*r = request{done: done, timer: timer, sealed: sealed}
	reqPool.Put(r)
}

// clearOutputs drops what a request produced when its work was rolled back.
func (r *request) clearOutputs() {
	r.res, r.jobs, r.events, r.lost, r.recorded, r.n, r.promoted, r.ready = queue.EnqueueResult{}, nil, nil, nil, nil, 0, nil, false
}

// do sends r to the writer and waits for its answer, for the store's
// Timeout at most.
func (s *Store) do(ctx context.Context, r *request) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.timer == nil {
		r.timer = time.NewTimer(s.cfg.Timeout)
	} else {
		r.timer.Reset(s.cfg.Timeout)
	}
	defer r.timer.Stop()
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return queue.ErrClosed
	}
	select {
	case s.reqs <- r:
		s.mu.RUnlock()
	case <-ctx.Done():
		s.mu.RUnlock()
		return ctx.Err()
	case <-r.timer.C:
		s.mu.RUnlock()
		return fmt.Errorf("wait for the writer: %w", context.DeadlineExceeded)
	}
	var err error
	timedOut := false
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		err = ctx.Err()
		timedOut = errors.Is(err, context.DeadlineExceeded)
	case <-r.timer.C:
		err = fmt.Errorf("wait for the writer: %w", context.DeadlineExceeded)
		timedOut = true
	}
	if r.state.CompareAndSwap(stateQueued, stateAbandoned) {
		return err
	}
	// The writer has it, and its outcome is the truth: a caller that was
	// cancelled (its client went away) waits for it, so it never reports a
	// failure for a write that committed. But not past the deadline: a
	// writer stalled on its disk may give no outcome for a long time.
	if !timedOut {
		select {
		case <-r.done:
			return r.err
		case <-r.timer.C:
			err = fmt.Errorf("wait for the writer: %w", context.DeadlineExceeded)
		}
	}
	select {
	case <-r.done:
		return r.err
	default:
	}
	// Left to the writer (stateLeft keeps it out of the pool, and the
	// caller reads none of its outputs); its write may still commit.
	if r.state.CompareAndSwap(stateTaken, stateLeft) {
		return fmt.Errorf("%w (the write was begun and may still commit)", err)
	}
	<-r.done
	return r.err
}

// Checkpoint policy. SQLite's own autocheckpoint (PASSIVE, every 1000 WAL
// pages, at commit) bounds the WAL under steady load, but only while it can
// finish: readers that come and go, each holding an older snapshot, keep a
// PASSIVE checkpoint from ever copying the whole WAL, so the WAL is never
// reset and grows for as long as they overlap. So the writer also
//   - checks the WAL file's size every statEvery commits and, past
//     walTruncateAt, runs a TRUNCATE checkpoint, which waits (at most
//     truncateWait, so a long read cannot stall writes for the whole busy
//     timeout) for the readers of old snapshots to finish and then empties
//     the file;
//   - when idle (no request waiting at a tick), copies what the WAL holds
//     (PASSIVE), so the autocheckpoint seldom lands on a caller's commit,
//     and truncates now and then.
const (
	checkpointEvery = time.Second
	truncateEvery   = 5 * time.Minute
	statEvery       = 64
	walTruncateAt   = 16 << 20
	walSizeLimit    = walTruncateAt // journal_size_limit: the size kept after a reset
	// autocheckpointPages is SQLite's wal_autocheckpoint, in pages (4 KiB):
	// about 12 MiB, under walTruncateAt so a WAL that checkpoints can
	// finish never grows to need a TRUNCATE. SQLite's default is 1000.
	autocheckpointPages = 3000
	truncateWait        = time.Second
	truncateRetry       = 2 * time.Second
)

// writer owns the write connection and its prepared statements.
type writer struct {
	s     *Store
	conn  *sql.Conn
	st    stmts
	batch []*request
	live  []*request
	hbuf  []byte         // headers encoding, reused across enqueues
	row   []driver.Value // a result row, reused across statements
	ids   []byte         // claimed event ids as JSON, reused across claims

	// What the transaction's enqueues inserted, added to the counts once,
	// just before the commit (flushCounts).
	added     map[queue.Route]int64
	blocked   map[queue.Route]int64 // jobs inserted blocked, behind an ordering key
	newEvents int64
	sealed    map[string]int64 // events inserted sealed, by key id

	// The dedupe keys (dedupe.go): those this transaction added, the
	// deleted events' keys it collected, a buffer for a key's candidate
	// events, and the data version the set was read at.
	txKeys      []eventKey
	gone        []eventKey
	idBuf       []int64
	maxKeyID    int64 // the highest event id in the set
	txMaxKeyID  int64 // maxKeyID when the transaction began, for rollback
	dataVersion int64

	batches  int64 // committed batches, for the benchmarks' requests per commit
	requests int64 // requests in committed batches
	walPages int64 // pages the connection wrote to the WAL, read after each commit

	commits        int // since the last checkpoint
	sinceStat      int // commits since the WAL size was last looked at
	lastTruncate   time.Time
	truncateFailed time.Time
}

func (w *writer) init(s *Store) {
	w.s = s
	w.batch = make([]*request, 0, s.cfg.MaxBatch)
	w.live = make([]*request, 0, s.cfg.MaxBatch)
	w.hbuf = make([]byte, 0, 512)
	w.row = make([]driver.Value, 10)
	w.added = make(map[queue.Route]int64)
	w.blocked = make(map[queue.Route]int64)
	w.sealed = make(map[string]int64)
	w.lastTruncate = time.Now()
}

// connect takes a connection from the write pool and prepares every
// statement on its driver connection once.
func (w *writer) connect(ctx context.Context) error {
	conn, err := w.s.wdb.Conn(ctx)
	if err != nil {
		return fmt.Errorf("open write connection: %w", err)
	}
	// secure_delete follows the store's keys: ON whenever it has a ring.
	if err := setSecureDelete(ctx, conn, w.s.sealer.Load().Keys()); err != nil {
		discard(conn, &w.st)
		return err
	}
	// The temporary objects of the dedupe keys, before the statements
	// that name them are prepared.
	for _, q := range []string{sqlGoneKeysTable, sqlGoneKeysHook} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			discard(conn, &w.st)
			return fmt.Errorf("prepare statements: %w", err)
		}
	}
	err = conn.Raw(func(dc any) error {
		pc, ok := dc.(driver.ConnPrepareContext)
		if !ok {
			return fmt.Errorf("driver connection %T cannot prepare with a context", dc)
		}
		return w.st.prepare(ctx, pc)
	})
	if err != nil {
		discard(conn, &w.st)
		return fmt.Errorf("prepare statements: %w", err)
	}
	w.conn = conn
	// A new connection, after a failure too: the set is read again from
	// what the database holds.
	if err := conn.Raw(func(any) error { return w.loadKeys() }); err != nil {
		w.disconnect()
		return err
	}
	return nil
}

// disconnect closes the statements and the connection, discarding the
// driver connection so that the next connect opens a fresh one: after a
// failure we do not trust its state.
func (w *writer) disconnect() error {
	if w.conn == nil {
		return nil
	}
	err := discard(w.conn, &w.st)
	w.conn = nil
	return err
}

// discard closes st and conn and makes database/sql drop the driver
// connection instead of pooling it.
func discard(conn *sql.Conn, st *stmts) error {
	conn.Raw(func(any) error {
		st.close()
		return driver.ErrBadConn
	})
	if err := conn.Close(); err != nil && !errors.Is(err, sql.ErrConnDone) {
		return err
	}
	return nil
}

// run is the writer goroutine: take what is waiting, run it as one
// transaction, repeat; checkpoint when idle; on quit, drain and exit.
func (w *writer) run() {
	defer close(w.s.done)
	tick := time.NewTicker(checkpointEvery)
	defer tick.Stop()
	for {
		select {
		case r := <-w.s.reqs:
			w.batch = append(w.batch[:0], r)
			w.fill()
			w.runBatch()
		case c := <-w.s.ctl:
			c.err = w.control(c.f)
			c.done <- struct{}{}
		case <-tick.C:
			if len(w.s.reqs) == 0 {
				w.idle()
			}
		case <-w.s.quit:
			// Close holds the lock while it marks the store closed, so
			// nothing more can arrive: run what is queued and stop.
			for len(w.s.reqs) > 0 {
				w.batch = w.batch[:0]
				w.fill()
				w.runBatch()
			}
			if w.conn != nil && w.commits > 0 {
				w.checkpoint("TRUNCATE")
			}
			return
		}
	}
}

// fill adds waiting requests to the batch, up to MaxBatch, without waiting.
func (w *writer) fill() {
	for len(w.batch) < w.s.cfg.MaxBatch {
		select {
		case r := <-w.s.reqs:
			w.batch = append(w.batch, r)
		default:
			return
		}
	}
}

// runBatch runs the batch as one transaction and answers every request.
func (w *writer) runBatch() {
	s := w.s
	w.live = w.live[:0]
	for i, r := range w.batch {
		w.batch[i] = nil
		if !r.state.CompareAndSwap(stateQueued, stateTaken) {
			continue // abandoned by its caller before it ran
		}
		if err := r.ctx.Err(); err != nil {
			r.err = err
			r.done <- struct{}{}
			continue
		}
		w.live = append(w.live, r)
	}
	if len(w.live) == 0 {
		return
	}
	reset, err := w.transact()
	if err != nil {
		for _, r := range w.live {
			r.clearOutputs()
			r.err = err
		}
	} else if !reset {
		w.batches++
		w.requests += int64(len(w.live))
		s.written.publish(w)
		w.commits++
		if w.sinceStat++; w.sinceStat >= statEvery {
			w.sinceStat = 0
			if w.walSize() > walTruncateAt {
				w.checkpoint("TRUNCATE")
			}
		}
	}
	if reset {
		// A failed BEGIN, COMMIT or rollback (disk full, read-only file,
		// I/O error) may leave the connection in a state we cannot see;
		// start the next batch on a fresh one. The driver reopens the
		// file, so the store recovers by itself once the cause is gone.
		w.disconnect()
	}
	// Signal before answering, so a caller that returns from its write
	// already finds Ready signalled.
	for _, r := range w.live {
		if r.err == nil && r.ready {
			s.signalReady()
			break
		}
	}
	bulk := false
	for i, r := range w.live {
		w.live[i] = nil
		bulk = bulk || r.kind.bulk()
		r.done <- struct{}{}
	}
	// The callers just answered were readied on the writer's own P (the
	// scheduler's per-core run queue), the last of them in the slot it
	// runs next; another P takes them only once it has nothing else to
	// run, which on two busy cores is seldom. Without a yield they wait
	// behind the next batch's SQL and fsync, and each is a worker about to
	// deliver or a handler about to answer. Yielding lets them run first:
	// e2e +17 % and ingest +7 % on 2 cores (docs/BENCHMARKS-LOG.md); what
	// arrives meanwhile joins the writer's next batch.
	//
	// Not after a chunk of a bulk write: its caller sends the next chunk
	// as soon as it runs, so a yield would put a chunk in every batch and
	// make every enqueue wait behind one (ingest during a replay of
	// 500,000 dead jobs went 28 % slower). Without it the next batch
	// starts with what was already waiting, and chunks alternate with
	// batches of other writes as before.
	if !bulk {
		runtime.Gosched()
	}
}

// bulk reports whether a request of this kind is one chunk of a bulk
// write (storekit.BulkInChunks), whose caller sends the next at once.
func (k reqKind) bulk() bool {
	switch k {
	case kindReplayDead, kindDiscardJobs, kindPurge, kindPurgeEvents:
		return true
	}
	return false
}

// transact runs w.live in one transaction and commits. A request's own
// failure is stored in it; err fails the whole batch. reset asks for a
// fresh connection.
//
// The requests first run without savepoints: a savepoint per request made
// SQLite copy every page a request touched into its sub-journal, and with
// the SAVEPOINT and RELEASE statements cost about 7 % of the writer's CPU
// per enqueue. A failure is rare, but the failed request's writes may
// be partial, so the whole transaction is rolled back, the request keeps
// its error, and the others run again in a new transaction, each in its
// own savepoint, so that a further failure sinks no neighbour either (see
// isolated).
func (w *writer) transact() (reset bool, err error) {
	if w.conn == nil {
		if err := w.connect(context.Background()); err != nil {
			return true, err
		}
	}
	// The statements run on the driver connection (see stmt), which
	// database/sql lends only inside Raw.
	rerr := w.conn.Raw(func(dc any) error {
		reset, err = w.runTx()
		if err == nil && !reset {
			if pages, ok := walPages(dc); ok {
				w.walPages = pages
			}
		}
		return nil
	})
	if rerr != nil {
		return true, fmt.Errorf("write connection: %w", rerr)
	}
	return reset, err
}

// runTx is transact's body, run inside the connection's Raw.
func (w *writer) runTx() (reset bool, err error) {
	now := w.s.cfg.Now()
	if err := w.begin(); err != nil {
		return true, err
	}
	failed := -1
	for i, r := range w.live {
		if r.err = w.exec(r, now); r.err != nil {
			failed = i
			break
		}
	}
	if failed >= 0 {
		// Those before the failure ran, but their writes are rolled back.
		for _, done := range w.live[:failed+1] {
			done.clearOutputs()
		}
		if err := w.rollback(); err != nil {
			// After some errors (SQLITE_FULL, SQLITE_IOERR) SQLite has
			// already rolled back and this ROLLBACK fails; the connection
			// is renewed to be sure. The error took the whole
			// transaction with it: every request is told why.
			if len(w.live) == 1 {
				return true, nil
			}
			return true, fmt.Errorf("transaction aborted: %w", w.live[failed].err)
		}
		if len(w.live) == 1 {
			// A full disk or an I/O error may have left the connection
			// in a state we cannot see even when the ROLLBACK succeeds
			// (SQLite rolls back the statement, and the transaction or
			// not, as it chooses): renew it too.
			return storageFault(w.live[failed].err), nil
		}
		return w.isolated(now)
	}
	return w.commit()
}

// isolated runs again, in a new transaction, the requests of w.live that
// have not failed, each in its own savepoint, and commits: the slow path
// after a failure. now is the batch's clock reading, as in the first run.
func (w *writer) isolated(now time.Time) (reset bool, err error) {
	if err := w.begin(); err != nil {
		return true, err
	}
	for _, r := range w.live {
		if r.err != nil {
			continue // failed in the first run; keeps its error
		}
		r.clearOutputs()
		if _, err := w.st.savepoint.Exec(); err != nil {
			w.rollback()
			return true, fmt.Errorf("savepoint: %w", err)
		}
		keys, maxKeyID := len(w.txKeys), w.maxKeyID
		if r.err = w.exec(r, now); r.err != nil {
			r.clearOutputs()
			w.dropTxKeys(keys)
			w.maxKeyID = maxKeyID
			if _, err := w.st.rollbackTo.Exec(); err != nil {
				// The error took the whole transaction with it
				// (SQLite rolls back by itself after SQLITE_FULL,
				// SQLITE_IOERR): every request in the batch is lost,
				// and each is told why.
				w.rollback()
				return true, fmt.Errorf("transaction aborted: %w", r.err)
			}
		}
		if _, err := w.st.release.Exec(); err != nil {
			w.rollback()
			return true, fmt.Errorf("release savepoint: %w", err)
		}
	}
	return w.commit()
}

// begin opens the transaction of a batch and brings the key set up to
// date (syncKeys).
func (w *writer) begin() error {
	w.txMaxKeyID = w.maxKeyID
	if _, err := w.st.begin.Exec(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := w.syncKeys(); err != nil {
		w.rollback()
		return err
	}
	w.txMaxKeyID = w.maxKeyID // syncKeys may have read the set again
	return nil
}

// commit adds the transaction's counts, collects its deleted events' keys
// and commits; any failure rolls it back and asks for a fresh connection.
func (w *writer) commit() (reset bool, err error) {
	if err := w.flushCounts(); err != nil {
		w.rollback()
		return true, err
	}
	if err := w.collectGone(); err != nil {
		w.rollback()
		return true, err
	}
	if _, err := w.st.commit.Exec(); err != nil {
		// SQLite may already have rolled back; this makes sure.
		w.rollback()
		return true, fmt.Errorf("commit: %w", err)
	}
	w.committed()
	return false, nil
}

// rollback rolls the transaction back and takes back what the writer noted
// for its commit: the keys its inserts added to the set, the highest event
// id, the counts. Every way a transaction ends without COMMIT goes through
// it, so no transaction's keys outlive it.
func (w *writer) rollback() error {
	_, err := w.st.rollback.Exec()
	w.dropTxKeys(0)
	w.maxKeyID = w.txMaxKeyID
	w.clearCounts()
	return err
}

// clearCounts forgets the enqueues counted for a transaction that was
// rolled back.
func (w *writer) clearCounts() {
	clear(w.added)
	clear(w.blocked)
	clear(w.sealed)
	w.newEvents = 0
}

// flushCounts adds the jobs and events the transaction's enqueues
// inserted to job_counts and event_count: one upsert per route and one
// for the events, however many enqueues the batch holds. Every other
// change to the counts is made by the schema's triggers. A per-row
// INSERT trigger would cost each enqueue two more statements on the hot
// path.
func (w *writer) flushCounts() error {
	for rt, n := range w.added {
		if _, err := w.st.countJobs.Exec(rt.Source, rt.Target, n, string(queue.StatusPending)); err != nil {
			return fmt.Errorf("count jobs: %w", err)
		}
	}
	for rt, n := range w.blocked {
		if _, err := w.st.countJobs.Exec(rt.Source, rt.Target, n, string(queue.StatusBlocked)); err != nil {
			return fmt.Errorf("count jobs: %w", err)
		}
	}
	if w.newEvents > 0 {
		if _, err := w.st.countEvents.Exec(w.newEvents); err != nil {
			return fmt.Errorf("count events: %w", err)
		}
	}
	for id, n := range w.sealed {
		if _, err := w.st.countSealed.Exec(id, n); err != nil {
			return fmt.Errorf("count sealed values: %w", err)
		}
	}
	w.clearCounts()
	return nil
}

// ctlReq runs f on the writer between batches, outside any transaction.
type ctlReq struct {
	f    func(w *writer) error
	err  error
	done chan struct{}
}

// onWriter runs f on the writer goroutine between batches, for checkpoints
// and for tests that need the write connection.
func (s *Store) onWriter(ctx context.Context, f func(w *writer) error) error {
	c := &ctlReq{f: f, done: make(chan struct{}, 1)}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return queue.ErrClosed
	}
	select {
	case s.ctl <- c:
		s.mu.RUnlock()
	case <-ctx.Done():
		s.mu.RUnlock()
		return ctx.Err()
	}
	<-c.done
	return c.err
}

// control runs f with a connection, then brings the dedupe keys up to
// date with what f wrote.
func (w *writer) control(f func(w *writer) error) error {
	if w.conn == nil {
		if err := w.connect(context.Background()); err != nil {
			return err
		}
	}
	err := f(w)
	if w.conn != nil {
		if kerr := w.conn.Raw(func(any) error { return w.afterControl() }); kerr != nil && err == nil {
			err = kerr
		}
	}
	return err
}

// idle runs between batches when no request waits.
func (w *writer) idle() {
	if w.conn == nil || w.commits == 0 {
		return
	}
	mode := "PASSIVE"
	if time.Since(w.lastTruncate) >= truncateEvery || w.walSize() > walTruncateAt {
		mode = "TRUNCATE"
	}
	w.checkpoint(mode)
}

// checkpoint copies the WAL into the database. A failed checkpoint loses
// nothing (the pages stay in the WAL, durable) and a later one retries, so
// its error only goes to the internal callers that ask.
//
// TRUNCATE waits for readers of old snapshots through the busy handler.
// The writer must not stall behind a long read for the whole busy
// timeout, so the wait is capped at truncateWait; a TRUNCATE that could
// not finish is not retried before truncateRetry.
func (w *writer) checkpoint(mode string) error {
	ctx := context.Background()
	if mode == "TRUNCATE" {
		if time.Since(w.truncateFailed) < truncateRetry {
			mode = "PASSIVE"
		} else {
			if _, err := w.conn.ExecContext(ctx, "PRAGMA busy_timeout = "+strconv.FormatInt(truncateWait.Milliseconds(), 10)); err != nil {
				return fmt.Errorf("checkpoint: %w", err)
			}
			defer w.conn.ExecContext(ctx, "PRAGMA busy_timeout = "+strconv.FormatInt(w.s.cfg.BusyTimeout.Milliseconds(), 10))
		}
	}
	var busy, log, done int64
	err := w.conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &log, &done)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	w.commits = 0
	if mode == "TRUNCATE" {
		if busy != 0 {
			w.truncateFailed = time.Now()
			return fmt.Errorf("checkpoint: readers kept the WAL from being truncated")
		}
		w.lastTruncate = time.Now()
	}
	return nil
}

// walSize is the size of the WAL file, 0 if it cannot be read.
func (w *writer) walSize() int64 {
	fi, err := os.Stat(w.s.path + "-wal")
	if err != nil {
		return 0
	}
	return fi.Size()
}

// storageFault reports whether err is SQLite's SQLITE_FULL or SQLITE_IOERR
// (in any extended form): the disk, not the request, failed.
func storageFault(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	code := se.Code() & 0xff // the primary code of an extended one
	return code == sqlite3.SQLITE_IOERR || code == sqlite3.SQLITE_FULL
}
