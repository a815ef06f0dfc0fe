package sqlite

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/storekit"
)

// purgeChunk bounds the rows one purge request deletes, so a large purge
// is many short transactions that other writes interleave with rather
// than one that stalls the writer.
const purgeChunk = 256

// recycle returns r to the pool once its caller has read its answer. A
// request its caller abandoned may still sit in the writer's channel and
// is left to the garbage collector.
func recycle(r *request) {
	if st := r.state.Load(); st != stateAbandoned && st != stateLeft {
		r.release()
	}
}

// Enqueue stores ev and one pending job per target, due now.
func (s *Store) Enqueue(ctx context.Context, ev queue.Event) (queue.EnqueueResult, error) {
	if err := storekit.CheckEvent(ev); err != nil {
		return queue.EnqueueResult{}, err
	}
	if err := s.room.admit(len(ev.Payload)); err != nil {
		return queue.EnqueueResult{}, err
	}
	r := newRequest(ctx, kindEnqueue)
	// Sealed and hashed here, in the caller's goroutine: the one writer
	// does no cryptography.
	sl := s.sealer.Load()
	ev.OrderingKey = sl.OrderingKey(ev.Source, ev.OrderingKey)
	r.ev = ev
	r.sealed = sl.AppendEvent(r.sealed[:0], ev.Source, ev.DeliveryID, ev.Headers, ev.Payload)
	err := s.do(ctx, r)
	var res queue.EnqueueResult
	if err == nil { // see do: a request whose caller left is still the writer's
		res = r.res
	}
	recycle(r)
	if err != nil {
		return queue.EnqueueResult{}, err
	}
	return res, nil
}

// Claim leases up to p.Limit ready jobs in (run_at, id) order.
func (s *Store) Claim(ctx context.Context, p queue.ClaimParams) ([]*queue.Job, error) {
	if none, err := storekit.CheckClaim(p); none || err != nil {
		return nil, err
	}
	r := newRequest(ctx, kindClaim)
	r.claim = p
	if p.Routes != nil {
		pairs := make([][]any, len(p.Routes))
		for i, rt := range p.Routes {
			pairs[i] = []any{rt.Source, rt.Target}
			if p.Quotas != nil {
				pairs[i] = append(pairs[i], p.Quotas[i])
			}
		}
		b, err := json.Marshal(pairs)
		if err != nil {
			return nil, fmt.Errorf("claim: encode routes: %w", err)
		}
		r.routes = string(b)
	}
	err := s.do(ctx, r)
	var jobs []*queue.Job
	var events []claimedEvent
	if err == nil { // see do: a request whose caller left is still the writer's
		jobs, events = r.jobs, r.events
	}
	recycle(r)
	if err != nil {
		return nil, err
	}
	s.openClaimed(jobs, events)
	return jobs, nil
}

// claimedEvent is an event of claimed jobs as the writer read it; the
// claiming goroutine opens it (openClaimed).
type claimedEvent struct {
	id                           int64
	deliveryID, eventType, trace string
	headers, payload, sealed     []byte
}

// openClaimed gives each claimed job its event's headers and payload,
// opened here, in the claiming goroutine, once per event: the jobs of one
// event (fan-out) share them. A job whose event does not open gets the
// error (Job.ReadErr), for the pool to record.
func (s *Store) openClaimed(jobs []*queue.Job, events []claimedEvent) {
	sl := s.sealer.Load()
	type opened struct {
		e       *claimedEvent
		headers []queue.Header
		payload []byte
		err     error
		done    bool
	}
	byID := make(map[int64]*opened, len(events))
	for i := range events {
		byID[events[i].id] = &opened{e: &events[i]}
	}
	for _, j := range jobs {
		o := byID[j.EventID]
		if !o.done {
			o.done = true
			o.headers, o.payload, o.err = sl.DecodeEvent(j.Source, o.e.deliveryID, o.e.headers, o.e.payload, o.e.sealed)
			if o.err != nil {
				o.err = fmt.Errorf("read event %d: %w", j.EventID, o.err)
				o.payload = []byte{}
			}
		}
		j.DeliveryID, j.EventType, j.Trace = o.e.deliveryID, o.e.eventType, o.e.trace
		j.Headers, j.Payload, j.ReadErr = o.headers, o.payload, o.err
	}
}

// ExtendLeases moves the lease of each claim still held.
func (s *Store) ExtendLeases(ctx context.Context, p queue.ExtendParams) ([]int64, error) {
	if len(p.Claims) == 0 {
		return nil, nil
	}
	r := newRequest(ctx, kindExtend)
	r.extend = p
	err := s.do(ctx, r)
	var lost []int64
	if err == nil { // see do: a request whose caller left is still the writer's
		lost = r.lost
	}
	recycle(r)
	if err != nil {
		return nil, err
	}
	return lost, nil
}

// Finish records completions under the fence.
func (s *Store) Finish(ctx context.Context, cs []queue.Completion) ([]bool, error) {
	if err := storekit.CheckCompletions(cs); err != nil {
		return nil, err
	}
	if len(cs) == 0 {
		return nil, nil
	}
	r := newRequest(ctx, kindFinish)
	r.cs = cs
	r.texts = finishTexts(s.sealer.Load(), cs)
	err := s.do(ctx, r)
	var recorded []bool
	if err == nil { // see do: a request whose caller left is still the writer's
		recorded = r.recorded
	}
	recycle(r)
	if err != nil {
		return nil, err
	}
	return recorded, nil
}

// finishTexts returns, for each completion, the job's stored last error
// and its attempt's (Sealer.CompletionTexts): in the caller's goroutine,
// before the request reaches the writer.
func finishTexts(sl *storekit.Sealer, cs []queue.Completion) []string {
	texts := make([]string, 2*len(cs))
	for i := range cs {
		texts[2*i], texts[2*i+1] = sl.CompletionTexts(&cs[i])
	}
	return texts
}

// HandBack returns the jobs of claims still held by owner to pending, due
// now, without charging their attempt.
func (s *Store) HandBack(ctx context.Context, owner string, claims []queue.Claimed) error {
	if len(claims) == 0 {
		return nil
	}
	r := newRequest(ctx, kindHandBack)
	r.owner, r.claims = owner, claims
	err := s.do(ctx, r)
	recycle(r)
	return err
}

// Replay gives the dead job id a fresh attempt budget, due now.
func (s *Store) Replay(ctx context.Context, id int64) error {
	r := newRequest(ctx, kindReplay)
	r.id = id
	err := s.do(ctx, r)
	recycle(r)
	return err
}

// ReplayDead replays every dead job matching f; f.Status is ignored. It
// works in chunks of bulkChunk jobs, each its own request to the writer,
// so the enqueues around it wait for one chunk at most; the chunks already
// replayed when it fails stay replayed and are counted.
func (s *Store) ReplayDead(ctx context.Context, f queue.Filter) (int, error) {
	return storekit.BulkInChunks(ctx, math.MaxInt, bulkChunk, s.chunk(ctx, kindReplayDead, f))
}

// DiscardJobs deletes every job matching f, pending or dead as f.Status
// says, and the events left without a job, in chunks as ReplayDead.
func (s *Store) DiscardJobs(ctx context.Context, f queue.Filter) (int, error) {
	if err := storekit.CheckDiscardFilter(f); err != nil {
		return 0, err
	}
	return storekit.BulkInChunks(ctx, math.MaxInt, bulkChunk, s.chunk(ctx, kindDiscardJobs, f))
}

// bulkChunk bounds the jobs one request of a bulk replay or discard
// changes: 256 took about 2 ms of the writer's time (measured for
// docs/BENCHMARKS-LOG.md), so the enqueues behind a chunk wait no longer
// than behind a busy batch.
const bulkChunk = 256

// chunk returns the function that sends one chunk of a bulk operation of
// kind on the jobs matching f. A discard's chunks keep the jobs the
// earlier ones made pending (request.kept).
func (s *Store) chunk(ctx context.Context, kind reqKind, f queue.Filter) func(n int) (int, error) {
	kept := []byte("[]")
	return func(want int) (int, error) {
		r := newRequest(ctx, kind)
		r.filter, r.limit, r.kept = f, want, string(kept)
		err := s.do(ctx, r)
		var n int
		var promoted []int64
		if err == nil { // see do: a request whose caller left is still the writer's
			n, promoted = r.n, r.promoted
		}
		recycle(r)
		if err != nil {
			return 0, err // the chunk's transaction did not commit
		}
		for _, id := range promoted {
			kept = kept[:len(kept)-1]
			if len(kept) > 1 {
				kept = append(kept, ',')
			}
			kept = append(strconv.AppendInt(kept, id, 10), ']')
		}
		return n, nil
	}
}

// Discard deletes the job, unless it is running, and its event if no job
// is left.
func (s *Store) Discard(ctx context.Context, id int64) error {
	r := newRequest(ctx, kindDiscard)
	r.id = id
	err := s.do(ctx, r)
	recycle(r)
	return err
}

// Purge deletes up to limit done jobs finished before cutoff and the
// events left without a job, then up to limit events that were stored
// without any job and are older than cutoff. It works in chunks of
// purgeChunk rows, each its own transaction.
func (s *Store) Purge(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	chunk := func(kind reqKind) func(n int) (int, error) {
		return func(want int) (int, error) {
			r := newRequest(ctx, kind)
			r.cutoff, r.limit = cutoff, want
			err := s.do(ctx, r)
			var deleted int
			if err == nil { // see do: a request whose caller left is still the writer's
				deleted = r.n
			}
			recycle(r)
			if err != nil {
				return 0, err // the chunk's transaction did not commit
			}
			return deleted, nil
		}
	}
	jobs, err := storekit.BulkInChunks(ctx, limit, purgeChunk, chunk(kindPurge))
	if err != nil {
		return jobs, err
	}
	_, err = storekit.BulkInChunks(ctx, limit, purgeChunk, chunk(kindPurgeEvents))
	return jobs, err
}

// exec runs one request inside the writer's transaction. now is the
// batch's clock reading, taken once for all its requests.
func (w *writer) exec(r *request, now time.Time) error {
	switch r.kind {
	case kindEnqueue:
		return w.enqueue(r, now)
	case kindClaim:
		return w.claim(r, now)
	case kindExtend:
		return w.extend(r, now)
	case kindFinish:
		return w.finish(r, now)
	case kindHandBack:
		return w.handBack(r, now)
	case kindReplay:
		return w.replay(r, now)
	case kindReplayDead:
		return w.replayDead(r, now)
	case kindDiscard:
		return w.discard(r, now)
	case kindDiscardJobs:
		return w.discardJobs(r, now)
	case kindPurge:
		return w.purge(r)
	case kindPurgeEvents:
		res, err := w.st.purgeBareEvents.Exec(ms(r.cutoff), int64(r.limit))
		if err != nil {
			return fmt.Errorf("purge events: %w", err)
		}
		n, _ := res.RowsAffected()
		r.n = int(n)
		return nil
	}
	return fmt.Errorf("unknown request kind %d", r.kind)
}

// empty stands in for a nil payload: the column is NOT NULL.
var empty = []byte{}

func (w *writer) enqueue(r *request, now time.Time) error {
	ev := &r.ev
	nowMS := ms(now)
	w.hbuf = storekit.AppendHeaders(w.hbuf[:0], ev.Headers)
	payload := ev.Payload
	if payload == nil {
		payload = empty
	}
	// An event without a trace context binds NULL: no conversion, no byte stored.
	var trace any
	if ev.Trace != "" {
		trace = ev.Trace
	}
	key := keyHash(ev.Source, ev.DeliveryID)
	if id, dup, err := w.storedEvent(key, ev.Source, ev.DeliveryID); err != nil {
		return fmt.Errorf("enqueue: %w", err)
	} else if dup {
		r.res.Duplicate, r.res.EventID = true, id
		return nil
	}
	// A sealed event keeps its headers and payload in sealed alone.
	headers, sealed := any(w.hbuf), any(nil)
	if r.sealed != nil {
		headers, payload, sealed = empty, empty, r.sealed
	}
	res, err := w.st.insertEvent.Exec(ev.Source, ev.DeliveryID, ev.EventType, headers, payload, int64(len(ev.Targets)), nowMS, trace, sealed)
	if err != nil {
		return fmt.Errorf("enqueue: insert event: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return fmt.Errorf("enqueue: insert event: %w", err)
	}
	w.addKey(key, id)
	if ev.OrderingKey != "" {
		return w.enqueueKeyed(r, id, nowMS)
	}
	for _, t := range ev.Targets {
		if _, err := w.st.insertJob.Exec(id, ev.Source, t, nowMS, nowMS); err != nil {
			return fmt.Errorf("enqueue: insert job: %w", err)
		}
	}
	// Counted only now that every insert succeeded: a failed enqueue is
	// rolled back, and so must its counts be.
	w.countEvent(r)
	for _, t := range ev.Targets {
		w.added[queue.Route{Source: ev.Source, Target: t}]++
	}
	r.res.EventID, r.res.Jobs = id, len(ev.Targets)
	r.ready = len(ev.Targets) > 0
	return nil
}

// countEvent counts the event r inserted, for flushCounts.
func (w *writer) countEvent(r *request) {
	w.newEvents++
	if r.sealed != nil {
		w.sealed[storekit.KeyOf(r.sealed)]++
	}
}

// enqueueKeyed inserts the jobs of event id, whose event has an ordering
// key: each is pending and its key's head if the key is free, and blocked
// behind the head otherwise.
func (w *writer) enqueueKeyed(r *request, id, nowMS int64) error {
	ev := &r.ev
	var hold int64
	if ev.OrderingHold {
		hold = 1
	}
	blocked := make([]bool, len(ev.Targets))
	for i, t := range ev.Targets {
		err := queryRow(w.st.keyHead, w.row[:1], ev.Source, t, ev.OrderingKey)
		if err != nil && !errors.Is(err, errNoRows) {
			return fmt.Errorf("enqueue: read ordering key: %w", err)
		}
		blocked[i] = err == nil
		status := queue.StatusPending
		if blocked[i] {
			status = queue.StatusBlocked
		}
		res, err := w.st.insertKeyedJob.Exec(id, ev.Source, t, nowMS, nowMS, string(status), ev.OrderingKey, hold)
		if err != nil {
			return fmt.Errorf("enqueue: insert job: %w", err)
		}
		if blocked[i] {
			continue
		}
		job, err := res.LastInsertId()
		if err != nil {
			return fmt.Errorf("enqueue: insert job: %w", err)
		}
		if _, err := w.st.setHead.Exec(ev.Source, t, ev.OrderingKey, job); err != nil {
			return fmt.Errorf("enqueue: hold ordering key: %w", err)
		}
	}
	w.countEvent(r)
	for i, t := range ev.Targets {
		rt := queue.Route{Source: ev.Source, Target: t}
		if blocked[i] {
			w.blocked[rt]++
		} else {
			w.added[rt]++
			r.ready = true
		}
	}
	r.res.EventID, r.res.Jobs = id, len(ev.Targets)
	return nil
}

// release hands the key of job id, which finished or is being discarded,
// to the next job blocked behind it, or frees the key if none waits. It
// changes nothing unless id is the key's head. It returns the job that
// became pending, 0 if none.
func (w *writer) release(source, target, key string, id int64, now time.Time) (int64, error) {
	row := w.row[:1]
	err := queryRow(w.st.promote, row, source, target, key, id, ms(now))
	if errors.Is(err, errNoRows) {
		if _, err := w.st.dropHead.Exec(source, target, key, id); err != nil {
			return 0, fmt.Errorf("release ordering key: %w", err)
		}
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("release ordering key: %w", err)
	}
	next := asInt(row[0])
	if _, err := w.st.setHead.Exec(source, target, key, next); err != nil {
		return 0, fmt.Errorf("release ordering key: %w", err)
	}
	return next, nil
}

// rechain puts the replayed job id, of an ordering key, back in its
// key's chain: the head of a free key, or blocked behind another head.
func (w *writer) rechain(id int64) error {
	if _, err := w.st.rehead.Exec(id); err != nil {
		return fmt.Errorf("rechain job %d: %w", id, err)
	}
	if _, err := w.st.reblock.Exec(id); err != nil {
		return fmt.Errorf("rechain job %d: %w", id, err)
	}
	return nil
}

func (w *writer) claim(r *request, now time.Time) error {
	p := &r.claim
	if p.Now.IsZero() {
		p.Now = now
	}
	until := p.Now.Add(p.Lease)
	// Pending jobs are read route by route: a claim for any route asks
	// for every route that has pending jobs.
	var pending, expired any = r.routes, r.routes
	if r.routes == "" {
		expired = nil
		row := w.row[:1]
		if err := queryRow(w.st.pendingRoutes, row); err != nil {
			return fmt.Errorf("claim: list routes: %w", err)
		}
		pending = asString(row[0])
	}
	rows, err := w.st.claim.Query(p.Owner, ms(until), ms(p.Now), int64(p.Limit), pending, expired)
	if err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	type claimed struct {
		job   *queue.Job
		runAt int64
	}
	var got []claimed
	err = each(rows, w.row[:10], func(row []driver.Value) error {
		got = append(got, claimed{&queue.Job{
			ID:         asInt(row[0]),
			EventID:    asInt(row[1]),
			Source:     asString(row[2]),
			Target:     asString(row[3]),
			Attempt:    int(asInt(row[4])),
			Fence:      asInt(row[7]),
			Replays:    int(asInt(row[8])),
			ReplayBase: int(asInt(row[9])),
			LeaseOwner: p.Owner,
			LeaseUntil: fromMS(ms(until)),
			CreatedAt:  fromMS(asInt(row[6])),
		}, asInt(row[5])})
		return nil
	})
	if err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	if len(got) == 0 {
		return nil
	}
	slices.SortFunc(got, func(a, b claimed) int {
		if a.runAt != b.runAt {
			return cmpInt(a.runAt, b.runAt)
		}
		return cmpInt(a.job.ID, b.job.ID)
	})
	// One read for the events of all the jobs; jobs of one event (fan-out)
	// share its payload and headers.
	w.ids = w.ids[:0]
	w.ids = append(w.ids, '[')
	for i, c := range got {
		if i > 0 {
			w.ids = append(w.ids, ',')
		}
		w.ids = strconv.AppendInt(w.ids, c.job.EventID, 10)
	}
	w.ids = append(w.ids, ']')
	rows, err = w.st.claimEvents.Query(string(w.ids))
	if err != nil {
		return fmt.Errorf("claim: read events: %w", err)
	}
	// The driver copied each value out of SQLite: the caller may keep
	// them, and open a sealed one in place.
	r.events = make([]claimedEvent, 0, len(got))
	err = each(rows, w.row[:7], func(row []driver.Value) error {
		r.events = append(r.events, claimedEvent{
			id: asInt(row[0]), deliveryID: asString(row[1]), eventType: asString(row[2]), trace: asString(row[5]),
			headers: asBytes(row[3]), payload: asBytes(row[4]), sealed: asBytes(row[6]),
		})
		return nil
	})
	if err != nil {
		return fmt.Errorf("claim: read events: %w", err)
	}
	found := make(map[int64]bool, len(r.events))
	for _, e := range r.events {
		found[e.id] = true
	}
	r.jobs = make([]*queue.Job, len(got))
	for i, c := range got {
		if !found[c.job.EventID] {
			return fmt.Errorf("claim: event %d of job %d is missing", c.job.EventID, c.job.ID)
		}
		r.jobs[i] = c.job
	}
	return nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (w *writer) extend(r *request, now time.Time) error {
	p := &r.extend
	if !p.Now.IsZero() {
		now = p.Now
	}
	until := ms(now.Add(p.Lease))
	for _, c := range p.Claims {
		res, err := w.st.extend.Exec(until, c.ID, p.Owner, c.Fence)
		if err != nil {
			return fmt.Errorf("extend lease of job %d: %w", c.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			r.lost = append(r.lost, c.ID)
		}
	}
	return nil
}

func (w *writer) finish(r *request, now time.Time) error {
	r.recorded = make([]bool, len(r.cs))
	for i := range r.cs {
		c := &r.cs[i]
		at, runAt := storekit.Times(c, now)
		row := w.row[:4]
		back := 0
		if c.HandedBack {
			back = 1
		}
		err := queryRow(w.st.finish, row, string(c.Status), ms(runAt), r.texts[2*i], ms(at), c.JobID, c.Owner, c.Fence, int64(back))
		if errors.Is(err, errNoRows) {
			continue // fenced off: another owner has it, or it is gone
		}
		if err != nil {
			return fmt.Errorf("finish job %d: %w", c.JobID, err)
		}
		// A job of an ordering key that is done, or dead without holding
		// its key, hands the key on.
		if row[0] != nil && (c.Status == queue.StatusDone || c.Status == queue.StatusDead && asInt(row[1]) == 0) {
			promoted, err := w.release(asString(row[2]), asString(row[3]), asString(row[0]), c.JobID, now)
			if err != nil {
				return fmt.Errorf("finish job %d: %w", c.JobID, err)
			}
			r.ready = r.ready || promoted != 0
		}
		// A handed-back attempt is recorded as "running": it did not end
		// its job, and it was not charged (offset 1 numbers it as the
		// attempt it was).
		outcome := c.Status
		if c.HandedBack {
			outcome = queue.StatusRunning
		}
		if err := w.addAttempt(c.JobID, back, c.Started, c.Duration, outcome, c.Code, r.texts[2*i+1]); err != nil {
			return fmt.Errorf("finish job %d: %w", c.JobID, err)
		}
		r.recorded[i] = true
		if c.Status == queue.StatusPending && !runAt.After(now) {
			r.ready = true
		}
	}
	return nil
}

// addAttempt writes a job's newest history entry, which the update before
// it counted, over its oldest. offset is added to the job's attempts
// column to get the attempt's number (1 after a hand-back uncharged it).
// code is what the target reported, NULL for none.
func (w *writer) addAttempt(id int64, offset int, started time.Time, d time.Duration, outcome queue.Status, code queue.Code, msg string) error {
	var status any
	if v, ok := code.Value(); ok {
		status = int64(v)
	}
	if _, err := w.st.insertAttempt.Exec(id, int64(offset), ms(started), int64(d), string(outcome), msg, status); err != nil {
		return fmt.Errorf("record attempt: %w", err)
	}
	return nil
}

func (w *writer) handBack(r *request, now time.Time) error {
	for _, c := range r.claims {
		id := c.ID
		res, err := w.st.handBack.Exec(ms(now), id, r.owner, c.Fence)
		if err != nil {
			return fmt.Errorf("hand back job %d: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			continue
		}
		r.ready = true
	}
	return nil
}

func (w *writer) replay(r *request, now time.Time) error {
	row := w.row[:1]
	err := queryRow(w.st.replay, row, ms(now), r.id)
	if err == nil {
		r.ready = true
		if row[0] != nil {
			return w.rechain(r.id)
		}
		return nil
	}
	if !errors.Is(err, errNoRows) {
		return fmt.Errorf("replay job %d: %w", r.id, err)
	}
	if _, _, err := w.jobState(r.id); err != nil {
		return fmt.Errorf("replay job %d: %w", r.id, err)
	}
	return fmt.Errorf("replay job %d: %w", r.id, queue.ErrNotDead)
}

// jobState reads a job's status and event, queue.ErrNotFound if none.
func (w *writer) jobState(id int64) (queue.Status, int64, error) {
	row := w.row[:2]
	err := queryRow(w.st.jobState, row, id)
	if errors.Is(err, errNoRows) {
		return "", 0, queue.ErrNotFound
	}
	if err != nil {
		return "", 0, err
	}
	return queue.Status(asString(row[0])), asInt(row[1]), nil
}

// replayDead replays one chunk of a bulk replay and puts the replayed
// jobs of ordering keys back in their chains, oldest first, so that the
// oldest of a key becomes its head.
func (w *writer) replayDead(r *request, now time.Time) error {
	rows, err := w.st.replayDead.Query(ms(now), r.filter.Source, r.filter.Target, int64(r.limit))
	if err != nil {
		return fmt.Errorf("replay dead jobs: %w", err)
	}
	var keyed []int64
	err = each(rows, w.row[:2], func(row []driver.Value) error {
		r.n++
		if row[1] != nil {
			keyed = append(keyed, asInt(row[0]))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("replay dead jobs: %w", err)
	}
	r.ready = r.n > 0
	slices.Sort(keyed)
	for _, id := range keyed {
		if err := w.rechain(id); err != nil {
			return fmt.Errorf("replay dead jobs: %w", err)
		}
	}
	return nil
}

func (w *writer) discard(r *request, now time.Time) error {
	status, eventID, err := w.jobState(r.id)
	if err != nil {
		return fmt.Errorf("discard job %d: %w", r.id, err)
	}
	if status == queue.StatusRunning {
		return fmt.Errorf("discard job %d: %w", r.id, queue.ErrRunning)
	}
	row := w.row[:3]
	if err := queryRow(w.st.jobKey, row, r.id); err != nil {
		return fmt.Errorf("discard job %d: %w", r.id, err)
	}
	source, target, key, keyed := asString(row[0]), asString(row[1]), asString(row[2]), row[2] != nil
	if _, err := w.st.deleteJob.Exec(r.id); err != nil {
		return fmt.Errorf("discard job %d: %w", r.id, err)
	}
	if keyed {
		promoted, err := w.release(source, target, key, r.id, now)
		if err != nil {
			return fmt.Errorf("discard job %d: %w", r.id, err)
		}
		r.ready = promoted != 0
	}
	if _, err := w.st.deleteEventIfEmpty.Exec(eventID); err != nil {
		return fmt.Errorf("discard job %d: delete event: %w", r.id, err)
	}
	return nil
}

// discardJobs deletes one chunk of a bulk discard and the events its jobs
// leave without a job.
func (w *writer) discardJobs(r *request, now time.Time) error {
	var rows driver.Rows
	var err error
	if r.filter.Status == queue.StatusPending {
		rows, err = w.st.discardPending.Query(r.filter.Source, r.filter.Target, int64(r.limit), r.kept)
	} else {
		rows, err = w.st.discardDead.Query(r.filter.Source, r.filter.Target, int64(r.limit))
	}
	if err != nil {
		return fmt.Errorf("discard jobs: %w", err)
	}
	// A deleted head of an ordering key hands it on, oldest first.
	type keyed struct {
		id                  int64
		source, target, key string
	}
	var heads []keyed
	err = w.deleteEmptyEvents(r, rows, 5, func(row []driver.Value) {
		if row[4] != nil {
			heads = append(heads, keyed{asInt(row[1]), asString(row[2]), asString(row[3]), asString(row[4])})
		}
	})
	if err != nil {
		return fmt.Errorf("discard jobs: %w", err)
	}
	slices.SortFunc(heads, func(a, b keyed) int { return cmpInt(a.id, b.id) })
	for _, h := range heads {
		promoted, err := w.release(h.source, h.target, h.key, h.id, now)
		if err != nil {
			return fmt.Errorf("discard jobs: %w", err)
		}
		if promoted != 0 {
			r.promoted = append(r.promoted, promoted)
			r.ready = true
		}
	}
	return nil
}

func (w *writer) purge(r *request) error {
	rows, err := w.st.purgeJobs.Query(ms(r.cutoff), int64(r.limit))
	if err != nil {
		return fmt.Errorf("purge jobs: %w", err)
	}
	if err := w.deleteEmptyEvents(r, rows, 1, nil); err != nil {
		return fmt.Errorf("purge jobs: %w", err)
	}
	return nil
}

// deleteEmptyEvents counts the deleted jobs rows returns, width columns
// each starting with their event_id, in r.n, and deletes those of their
// events left without a job. Only those: an event stored without jobs is
// dedupe memory until it is older than the retention. seen, if not nil,
// is called with every row.
func (w *writer) deleteEmptyEvents(r *request, rows driver.Rows, width int, seen func(row []driver.Value)) error {
	var events []int64
	err := each(rows, w.row[:width], func(row []driver.Value) error {
		r.n++
		if seen != nil {
			seen(row)
		}
		if id := asInt(row[0]); !slices.Contains(events, id) {
			events = append(events, id)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, id := range events {
		if _, err := w.st.deleteEventIfEmpty.Exec(id); err != nil {
			return fmt.Errorf("delete event %d: %w", id, err)
		}
	}
	return nil
}

// errNoRows is queryRow's answer when the statement returned no row.
var errNoRows = errors.New("no row")

// queryRow runs st and reads its first row into row.
func queryRow(st *stmt, row []driver.Value, args ...driver.Value) error {
	rows, err := st.Query(args...)
	if err != nil {
		return err
	}
	err = rows.Next(row)
	if err == io.EOF {
		err = errNoRows
	}
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	return err
}

// each calls f with every row of rows, read into row, and closes rows.
// It stops at f's first error.
func each(rows driver.Rows, row []driver.Value, f func(row []driver.Value) error) error {
	var err error
	for {
		if err = rows.Next(row); err != nil {
			break
		}
		if err = f(row); err != nil {
			break
		}
	}
	if err == io.EOF {
		err = nil
	}
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	return err
}

// The schema fixes each column's type, so a driver value is the type its
// column stores (int64, string, []byte) or nil for NULL, read as zero.

func asInt(v driver.Value) int64 {
	n, _ := v.(int64)
	return n
}

func asString(v driver.Value) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	}
	return ""
}

func asBytes(v driver.Value) []byte {
	switch x := v.(type) {
	case []byte:
		return x
	case string:
		return []byte(x)
	}
	return nil
}
