package sqlite

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

// The free-space reserve. A queue that fills its disk cannot drain: a
// claim, a finish and a purge are writes too, and once SQLite has no room
// for the WAL frames of a commit every one of them fails, so nothing is
// delivered until an operator frees space. So, like Elasticsearch's
// flood-stage watermark, ingest stops while free space on the database's
// filesystem is below Config.MinFreeSpace, and everything else keeps
// committing into the reserve.
//
// Measuring costs a statfs, so it is done at most every reserveEvery, or
// sooner once the payloads enqueued since the last measurement add up to a
// quarter of the reserve: at any ingest rate, what can be written between
// two measurements stays well inside the reserve. The caller that finds a
// measurement due takes it; the others go on with the last figure rather
// than wait or measure too.
const reserveEvery = 100 * time.Millisecond

// MinFreeSpaceFloor is the smallest Config.MinFreeSpace: the size the WAL
// may reach before the writer truncates it (walTruncateAt), so that the
// reserve always holds the WAL frames of the commits that drain the queue.
const MinFreeSpaceFloor = walTruncateAt

// reserve decides whether an Enqueue may take disk space.
type reserve struct {
	dir    string // the database's directory, whose filesystem is measured
	min    uint64 // Config.MinFreeSpace
	budget int64  // payload bytes that force a measurement before reserveEvery

	mu    sync.Mutex   // held by the caller measuring
	due   atomic.Int64 // unix nanoseconds after which a measurement is due
	spent atomic.Int64 // payload bytes enqueued since the last measurement
	low   atomic.Bool  // below min free, until the margin above it is free again (lowAfter)
}

func (r *reserve) init(dir string, min int64) {
	r.dir, r.min, r.budget = dir, uint64(min), min/4
}

// admit returns queue.ErrDiskLow when the last measurement found the
// reserve reached, measuring first if one is due. size is the payload the
// caller is about to enqueue.
func (r *reserve) admit(size int) error {
	now := time.Now().UnixNano()
	if r.spent.Add(int64(size)) >= r.budget || now >= r.due.Load() {
		if r.mu.TryLock() {
			r.measure(now)
			r.mu.Unlock()
		}
	}
	if r.low.Load() {
		return queue.ErrDiskLow
	}
	return nil
}

// measure looks at the free space now. A filesystem that cannot be
// measured (statfs failing, or a platform without it) never refuses
// ingest: the reserve is a safeguard, and a wrong refusal loses events
// that a sender may not retry.
func (r *reserve) measure(now int64) {
	free, ok := freeSpace(r.dir)
	r.low.Store(ok && lowAfter(r.low.Load(), free, r.min))
	r.spent.Store(0)
	r.due.Store(now + int64(reserveEvery))
}

// lowAfter decides the reserve's state from a measurement of free bytes:
// it becomes low below min, and once low it stays low until an eighth
// more than min is free. Without the margin, a disk at the edge, where a
// checkpoint's truncated WAL frees what the next commits take again,
// flipped between refusing and storing, and said so in the log each time.
func lowAfter(wasLow bool, free, min uint64) bool {
	if wasLow {
		return free < min+min/8
	}
	return free < min
}
