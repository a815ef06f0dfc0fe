package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Group commit of enqueues.
//
// PostgreSQL flushes the WAL once per commit, and on a small server that
// flush, not the insert, bounds how many single-event commits a second it
// takes. So concurrent Enqueue calls are gathered into one statement and
// one commit. One write is in flight at a time, marked by a token. A
// caller that finds no write in flight takes the token and writes its
// event itself, at once, on its own goroutine: a lone enqueue waits for
// nobody and costs no hand-off. Callers that arrive while a write is in
// flight hand their requests to the batcher goroutine, which takes the
// token when that write ends and writes every request then waiting, up to
// Config.MaxBatch, as one batch. Writes use one pooled connection at a
// time, so batching never needs more connections than one enqueue did.

// sqlEnqueueBatch inserts a batch of events and, for those that are new,
// their jobs, in one statement. $1-$7 are the events' columns, one row of
// the arrays per event; $8/$9 are the jobs, each naming its event by its
// position (1-based) in the arrays, events in order and each event's
// targets in order; $10 is the events' trace contexts (” stores NULL)
// and $11 their sealed values (NULL for a plain event), numbered last so
// the others kept their numbers. A duplicate of a stored
// event returns no row. Each
// new event returns its position and its id; it has all its jobs, since
// PostgreSQL runs a data-modifying WITH query to completion whether or
// not the rest of the statement reads it, and the statement commits whole
// or not at all. The caller sends distinct (source, delivery_id) pairs
// only.
const sqlEnqueueBatch = `WITH input AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::bytea[], $6::integer[], $7::timestamptz[], $10::text[], $11::bytea[])
		WITH ORDINALITY AS i (source, delivery_id, event_type, headers, payload, targets, at, trace, sealed, n)
), ev AS (
	INSERT INTO events (source, delivery_id, event_type, headers, payload, targets, created_at, trace, sealed)
	SELECT source, delivery_id, event_type, headers, payload, targets, at, nullif(trace, ''), sealed FROM input ORDER BY n
	ON CONFLICT (source, delivery_id) DO NOTHING
	RETURNING id, source, delivery_id, created_at
), jb AS (
	INSERT INTO jobs (event_id, source, target, run_at, created_at)
	SELECT ev.id, ev.source, t.target, ev.created_at, ev.created_at
	FROM unnest($8::integer[], $9::text[]) WITH ORDINALITY AS t (event, target, m)
	JOIN input ON input.n = t.event
	JOIN ev ON ev.source = input.source AND ev.delivery_id = input.delivery_id
	ORDER BY t.m
	RETURNING 1
)
SELECT input.n, ev.id
FROM ev JOIN input ON input.source = ev.source AND input.delivery_id = ev.delivery_id`

// sqlEventIDs finds the stored ids of the batch's duplicates, through the
// events' unique index.
const sqlEventIDs = `SELECT k.n, e.id
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k (source, delivery_id, n)
JOIN events AS e ON e.source = k.source AND e.delivery_id = k.delivery_id`

// DefaultMaxBatch is Config.MaxBatch's default. At 128 the commit's share
// of an event's cost is already small (a batch of 128 costs one WAL flush
// and one round trip instead of 128), while one batch's statement stays
// short, so the latency every caller in it waits for stays a few
// milliseconds and its arrays a few hundred kilobytes of ordinary
// payloads. Measured at 256 producers on 2 cores: caps of 32 and 64 gave
// 6,000-9,000 events/s, 128 gave 11,000-13,000, and 256 or 512 no more,
// the server's CPU being then the limit.
const DefaultMaxBatch = 128

// maxBatchBytes bounds the payload and header bytes one batch gathers, so
// a batch of large payloads (up to a receiver's max_body each) does not
// become one statement of hundreds of megabytes on the server: no request
// joins a batch that already holds this much, so a batch exceeds it by at
// most its last request.
const maxBatchBytes = 8 << 20

// Request states. The batcher moves a queued request to taken just before
// it sends the statement; a caller whose context ends first moves it to
// abandoned, and the batcher drops it. Whoever wins the swap decides the
// outcome, so a caller never reports a failure for a write that was sent
// and may have committed, nor a success for one never sent.
const (
	stateQueued int32 = iota
	stateTaken
	stateAbandoned
)

// enqueueArgs are one event as the statements take it.
type enqueueArgs struct {
	source, deliveryID, eventType string
	trace                         string // queue.Event.Trace; '' stores NULL
	headers, payload              []byte
	sealed                        []byte // the sealed value; nil stores NULL (a plain event)
	targets                       []string
	at                            time.Time
}

// size is what the request adds to a batch's arrays, roughly.
func (a *enqueueArgs) size() int {
	n := len(a.source) + len(a.deliveryID) + len(a.eventType) + len(a.trace) + len(a.headers) + len(a.payload) + len(a.sealed)
	for _, t := range a.targets {
		n += len(t)
	}
	return n
}

// enqueueReq is one Enqueue waiting for its batch.
type enqueueReq struct {
	ctx   context.Context
	args  enqueueArgs
	state atomic.Int32
	done  chan struct{} // buffered: the batcher never waits for a caller
	res   queue.EnqueueResult
	err   error
}

// answer hands r its outcome.
func (r *enqueueReq) answer(res queue.EnqueueResult, err error) {
	r.res, r.err = res, err
	r.done <- struct{}{}
}

// batcher gathers concurrent enqueues into batches and writes each batch
// with one statement and one commit.
type batcher struct {
	s     *Store
	max   int
	token chan struct{}    // buffered 1: full while a write is in flight
	reqs  chan *enqueueReq // buffered: the next batch waits here
	quit  chan struct{}
	wg    sync.WaitGroup

	// mu orders hand-overs before stop: a caller holds it shared while it
	// hands a request over, and stop takes it to set stopped, so no
	// request enters reqs after the writer has drained it.
	mu      sync.RWMutex
	stopped bool

	// Counters for tests and benchmarks: requests handed over and not yet
	// gathered into a batch (counted after the hand-over, so it may dip
	// below zero for a moment), committed writes (a lone event's or a
	// batch's) and the events they stored or found.
	queued, batches, events atomic.Int64
}

func newBatcher(s *Store, maxBatch int) *batcher {
	b := &batcher{
		s:     s,
		max:   maxBatch,
		token: make(chan struct{}, 1),
		reqs:  make(chan *enqueueReq, maxBatch),
		quit:  make(chan struct{}),
	}
	// One write in flight at a time: on a small server a second writer
	// only splits the waiting callers into smaller batches, so more
	// commits for the same events (measured on 2 cores: 7,200 events/s at
	// 32 producers with two batch writers, 10,000-11,000 with one).
	b.wg.Go(func() { new(batchWriter).run(b) })
	return b
}

// stop ends the batcher once every request handed over is answered.
// Later calls return queue.ErrClosed.
func (b *batcher) stop() {
	b.mu.Lock()
	b.stopped = true
	b.mu.Unlock()
	close(b.quit)
	b.wg.Wait()
}

// enqueue writes the event at once if no write is in flight, and
// otherwise hands it to the batcher and waits for its batch's answer.
func (b *batcher) enqueue(ctx context.Context, args enqueueArgs) (queue.EnqueueResult, error) {
	select {
	case b.token <- struct{}{}:
		res, err := b.s.enqueueOne(ctx, b.s.pool, &args)
		<-b.token
		if err == nil {
			b.batches.Add(1)
			b.events.Add(1)
			if res.Jobs > 0 {
				b.s.madeReady()
			}
		}
		return res, err
	default:
	}
	r := &enqueueReq{ctx: ctx, args: args, done: make(chan struct{}, 1)}
	b.mu.RLock()
	if b.stopped {
		b.mu.RUnlock()
		return queue.EnqueueResult{}, queue.ErrClosed
	}
	select {
	case b.reqs <- r:
		b.mu.RUnlock()
		b.queued.Add(1)
	case <-ctx.Done():
		b.mu.RUnlock()
		return queue.EnqueueResult{}, ctx.Err()
	}
	select {
	case <-r.done:
		return r.res, r.err
	case <-ctx.Done():
		if r.state.CompareAndSwap(stateQueued, stateAbandoned) {
			return queue.EnqueueResult{}, ctx.Err()
		}
		// The batch was sent: its outcome is the truth, and a caller that
		// was cancelled (its client went away) waits for it. One whose
		// deadline passed does not: a server that stopped answering would
		// hold it until the last request of the batch gave up. The event
		// may be stored all the same; the sender's retry then finds it a
		// duplicate.
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			<-r.done
			return r.res, r.err
		}
		select {
		case <-r.done:
			return r.res, r.err
		default:
			return queue.EnqueueResult{}, fmt.Errorf("enqueue: %w (the write was sent and may still commit)", ctx.Err())
		}
	}
}

// batchWriter is the goroutine that writes batches, with its buffers.
type batchWriter struct {
	batch []*enqueueReq
	cols  batchColumns
}

func (w *batchWriter) run(b *batcher) {
	for {
		select {
		case r := <-b.reqs:
			w.batchFrom(b, r)
		case <-b.quit:
			// No request enters reqs any more: write those handed over.
			for {
				select {
				case r := <-b.reqs:
					w.batchFrom(b, r)
				default:
					return
				}
			}
		}
	}
}

// batchFrom writes a batch that starts with r once the write in flight,
// if any, has ended; the requests that arrive meanwhile join it.
func (w *batchWriter) batchFrom(b *batcher, r *enqueueReq) {
	b.token <- struct{}{}
	w.collect(b, r)
	w.write(b)
	<-b.token
}

// collect starts a batch with r and adds the requests already waiting,
// without waiting for more, up to the batch's caps.
func (w *batchWriter) collect(b *batcher, r *enqueueReq) {
	w.batch = append(w.batch[:0], r)
	size := r.args.size()
gather:
	for len(w.batch) < b.max && size < maxBatchBytes {
		select {
		case r := <-b.reqs:
			w.batch = append(w.batch, r)
			size += r.args.size()
		default:
			break gather
		}
	}
	b.queued.Add(-int64(len(w.batch)))
}

// write takes the batch's live requests, writes them and answers every
// one.
func (w *batchWriter) write(b *batcher) {
	live := w.batch[:0]
	for _, r := range w.batch {
		if err := r.ctx.Err(); err != nil {
			if r.state.CompareAndSwap(stateQueued, stateAbandoned) {
				r.answer(queue.EnqueueResult{}, err)
			}
			continue
		}
		if r.state.CompareAndSwap(stateQueued, stateTaken) {
			live = append(live, r)
		}
	}
	clear(w.batch[len(live):]) // no stale pointers kept alive
	w.batch = live
	if len(live) == 0 {
		return
	}
	// The statement runs until the last caller waiting for it gives up:
	// one caller's deadline must not cancel its neighbours' writes, and a
	// batch nobody waits for any more need not hang on a dead server.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var waiting atomic.Int64
	waiting.Store(int64(len(live)))
	stops := make([]func() bool, len(live))
	for i, r := range live {
		stops[i] = context.AfterFunc(r.ctx, func() {
			if waiting.Add(-1) == 0 {
				cancel()
			}
		})
	}
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	results, errs := b.s.enqueueBatch(ctx, live, &w.cols)
	ready := false
	for i := range live {
		if errs[i] == nil && results[i].Jobs > 0 {
			ready = true
		}
	}
	if ready {
		b.s.madeReady()
	}
	for i, r := range live {
		r.answer(results[i], errs[i])
	}
	clear(w.batch)
}

// batchColumns holds a batch as the arrays sqlEnqueueBatch unnests.
type batchColumns struct {
	sources, deliveryIDs, eventTypes []string
	traces                           []string
	headers, payloads, sealeds       [][]byte
	targets                          []int32
	ats                              []time.Time
	jobEvents                        []int32
	jobTargets                       []string
	rows                             []int // the live index each sent row stands for
}

// reset empties c, dropping its references to the last batch's values.
func (c *batchColumns) reset() {
	clear(c.sources)
	clear(c.deliveryIDs)
	clear(c.eventTypes)
	clear(c.traces)
	clear(c.headers)
	clear(c.payloads)
	clear(c.sealeds)
	clear(c.jobTargets)
	c.sources, c.deliveryIDs, c.eventTypes = c.sources[:0], c.deliveryIDs[:0], c.eventTypes[:0]
	c.traces = c.traces[:0]
	c.headers, c.payloads, c.sealeds = c.headers[:0], c.payloads[:0], c.sealeds[:0]
	c.targets, c.ats = c.targets[:0], c.ats[:0]
	c.jobEvents, c.jobTargets = c.jobEvents[:0], c.jobTargets[:0]
	c.rows = c.rows[:0]
}

// add appends a's row, standing for the batch's request i.
func (c *batchColumns) add(i int, a *enqueueArgs) {
	c.rows = append(c.rows, i)
	n := int32(len(c.rows)) // the row's 1-based position
	c.sources = append(c.sources, a.source)
	c.deliveryIDs = append(c.deliveryIDs, a.deliveryID)
	c.eventTypes = append(c.eventTypes, a.eventType)
	c.traces = append(c.traces, a.trace)
	c.headers = append(c.headers, a.headers)
	c.payloads = append(c.payloads, a.payload)
	c.sealeds = append(c.sealeds, a.sealed)
	c.targets = append(c.targets, int32(len(a.targets)))
	c.ats = append(c.ats, a.at)
	for _, t := range a.targets {
		c.jobEvents = append(c.jobEvents, n)
		c.jobTargets = append(c.jobTargets, t)
	}
}

// eventKey is an event's dedupe key.
type eventKey struct{ source, deliveryID string }

// enqueueBatch writes reqs with one statement on one connection and
// returns each request's outcome, exactly what a lone Enqueue of it would
// have returned. A request whose delivery id repeats an earlier one of
// the batch is not sent: it is a duplicate of that one. If the statement
// fails while the connection stays usable (the server refused a value, a
// trigger raised), each request is written alone, in order, so only the
// ones at fault fail; if the connection or the context fails, every
// request fails with it.
func (s *Store) enqueueBatch(ctx context.Context, reqs []*enqueueReq, c *batchColumns) ([]queue.EnqueueResult, []error) {
	results := make([]queue.EnqueueResult, len(reqs))
	errs := make([]error, len(reqs))
	failAll := func(err error) ([]queue.EnqueueResult, []error) {
		for i := range errs {
			results[i], errs[i] = queue.EnqueueResult{}, err
		}
		return results, errs
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return failAll(s.fail("enqueue", err))
	}
	defer conn.Release()

	// first[i] is the request whose result request i shares: itself, or
	// the first of the batch with its key.
	first := make([]int, len(reqs))
	seen := make(map[eventKey]int, len(reqs))
	// Rows go in key order, so two batches (in this instance or another)
	// that hold some of the same keys take their unique-index locks in
	// the same order and cannot deadlock.
	order := make([]int, 0, len(reqs))
	for i, r := range reqs {
		k := eventKey{r.args.source, r.args.deliveryID}
		if j, ok := seen[k]; ok {
			first[i] = j
			continue
		}
		seen[k], first[i] = i, i
		order = append(order, i)
	}
	slices.SortFunc(order, func(a, b int) int {
		x, y := &reqs[a].args, &reqs[b].args
		return cmp.Or(cmp.Compare(x.source, y.source), cmp.Compare(x.deliveryID, y.deliveryID))
	})
	b := s.batcher
	if len(order) == 1 {
		// One event (a lone caller, or copies of one delivery): the
		// single-event statement, exactly as with MaxBatch 1.
		i := order[0]
		results[i], errs[i] = s.enqueueOne(ctx, conn, &reqs[i].args)
		if errs[i] == nil {
			b.batches.Add(1)
			b.events.Add(1)
		}
		shareFirst(first, results, errs)
		return results, errs
	}
	c.reset()
	for _, i := range order {
		c.add(i, &reqs[i].args)
	}
	defer c.reset()

	stored := make([]bool, len(reqs))
	rows, err := conn.Query(ctx, sqlEnqueueBatch, c.sources, c.deliveryIDs, c.eventTypes,
		c.headers, c.payloads, c.targets, c.ats, c.jobEvents, c.jobTargets, c.traces, c.sealeds)
	if err == nil {
		var n, id int64
		_, err = pgx.ForEachRow(rows, []any{&n, &id}, func() error {
			i := c.rows[n-1]
			results[i] = queue.EnqueueResult{EventID: id, Jobs: len(reqs[i].args.targets)}
			stored[i] = true
			return nil
		})
	}
	if err != nil {
		// Only a statement the server refused, on a connection that is
		// still up, is known to have stored nothing; anything else (a lost
		// connection, a cancelled context, an error reading the answer
		// after the commit) may have committed, and a rerun would answer
		// stored events as duplicates.
		var pgErr *pgconn.PgError
		if ctx.Err() != nil || conn.Conn().IsClosed() || !errors.As(err, &pgErr) ||
			strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57") {
			return failAll(s.fail("enqueue", err))
		}
		// The statement failed as a whole and nothing of it is stored:
		// write each alone, so one bad event fails by itself.
		for i, r := range reqs {
			results[i], errs[i] = s.enqueueOne(ctx, conn, &r.args)
		}
		return results, errs
	}
	b.batches.Add(1)
	b.events.Add(int64(len(order)))

	// The rows that stored nothing are duplicates of stored events; their
	// ids are read after the commit, when the events that conflicted are
	// visible.
	var dupSources, dupIDs []string
	var dupRows []int
	for _, i := range order {
		if !stored[i] {
			dupSources = append(dupSources, reqs[i].args.source)
			dupIDs = append(dupIDs, reqs[i].args.deliveryID)
			dupRows = append(dupRows, i)
		}
	}
	if len(dupRows) > 0 {
		found := make([]bool, len(dupRows))
		rows, err := conn.Query(ctx, sqlEventIDs, dupSources, dupIDs)
		if err == nil {
			var n, id int64
			_, err = pgx.ForEachRow(rows, []any{&n, &id}, func() error {
				i := dupRows[n-1]
				results[i] = queue.EnqueueResult{EventID: id, Duplicate: true}
				found[n-1] = true
				return nil
			})
		}
		for k, i := range dupRows {
			switch {
			case err != nil:
				results[i], errs[i] = queue.EnqueueResult{}, s.fail("enqueue: find duplicate", err)
			case !found[k]:
				// Purged between the insert and the read: as new.
				results[i], errs[i] = s.enqueueOne(ctx, conn, &reqs[i].args)
			}
		}
	}
	shareFirst(first, results, errs)
	return results, errs
}

// shareFirst answers each request that repeats an earlier one's delivery
// id in the batch: a duplicate of the event that one stored or found, or
// that one's error.
func shareFirst(first []int, results []queue.EnqueueResult, errs []error) {
	for i, j := range first {
		if j == i {
			continue
		}
		if errs[j] != nil {
			results[i], errs[i] = queue.EnqueueResult{}, errs[j]
			continue
		}
		results[i] = queue.EnqueueResult{EventID: results[j].EventID, Duplicate: true}
	}
}

// querier is what enqueueOne writes through: the pool, or the batcher's
// connection.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

var (
	_ querier = (*pgxpool.Pool)(nil)
	_ querier = (*pgxpool.Conn)(nil)
)

// enqueueOne writes one event with sqlEnqueue, its own statement and
// commit. It does not signal Ready; its caller does.
func (s *Store) enqueueOne(ctx context.Context, q querier, a *enqueueArgs) (queue.EnqueueResult, error) {
	// A duplicate's event may be purged between the insert that found it
	// and the read of its id; then the next round inserts it anew.
	for range 3 {
		var res queue.EnqueueResult
		var jobs int64
		err := q.QueryRow(ctx, sqlEnqueue, a.source, a.deliveryID, a.eventType, a.headers, a.payload, a.targets, a.at, a.trace, a.sealed).
			Scan(&res.EventID, &jobs)
		if err == nil {
			res.Jobs = int(jobs)
			return res, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return queue.EnqueueResult{}, s.fail("enqueue", err)
		}
		err = q.QueryRow(ctx, sqlEventID, a.source, a.deliveryID).Scan(&res.EventID)
		if err == nil {
			res.Duplicate = true
			return res, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return queue.EnqueueResult{}, s.fail("enqueue: find duplicate", err)
		}
	}
	return queue.EnqueueResult{}, errors.New("enqueue: find duplicate: its event keeps being purged")
}
