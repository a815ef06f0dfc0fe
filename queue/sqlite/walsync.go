package sqlite

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
)

// With Synchronous "full" the store makes each commit durable itself, off
// the writer's goroutine. SQLite's own synchronous=FULL fsyncs the WAL
// inside COMMIT, and the writer, the only one who may write, did nothing
// else for as long as the disk took: a commit cycle was its SQL plus the
// fsync. So the write connection runs with synchronous=NORMAL, which
// writes the WAL frames at COMMIT but syncs them only before a checkpoint
// copies them, and the syncer fsyncs the WAL file after each commit. No
// write is answered until an fsync that began after its commit has
// returned, so a nil error still means the write survives power loss,
// while the writer runs the next batch's SQL during the fsync.
//
// Why that is as durable as synchronous=FULL:
//   - A commit's frames are written to the WAL before COMMIT returns; an
//     fsync of the file that starts later makes all of them durable, and
//     those of every earlier commit.
//   - A checkpoint syncs the WAL before it copies frames into the
//     database and syncs the database before the WAL may be reset or
//     deleted (SQLite does both at NORMAL), so no frame is overwritten
//     before the database holds it on disk.
//   - The WAL is opened by its path for each fsync, so the file synced is
//     always the one SQLite writes to. If there is none, SQLite removed it
//     after checkpointing all of it into a synced database.
//   - A failed fsync leaves the file's state unknown (Linux may mark the
//     pages it could not write clean and drop them), so the writes it
//     covered are answered with its error, and from then on the store
//     refuses every write (errSyncFailed) until it is opened again:
//     otherwise a sender's retry of an event that was lost could be
//     answered as a duplicate of it.
//
// Readers on other connections may see a commit before its fsync returns;
// nothing they can do acts on it durably, since every write goes through
// the writer and waits for an fsync that covers what it read.

// syncFunc makes the file durable; (*os.File).Sync unless a test says
// otherwise.
type syncFunc func(f *os.File) error

// walSyncer fsyncs the WAL for the batches the writer committed and then
// answers them.
type walSyncer struct {
	path   string // the WAL file
	sync   syncFunc
	in     chan []*request // committed batches, each answered after an fsync
	free   chan struct{}   // a value after each batch answered
	done   chan struct{}   // closed when run has answered everything and exited
	failed atomic.Pointer[error]

	syncs   atomic.Int64 // fsyncs made, for the benchmarks' batches per fsync
	spare   sync.Pool    // batch slices handed back to the writer
	waiting [][]*request
}

func newWALSyncer(dbPath string, sync syncFunc) *walSyncer {
	if sync == nil {
		sync = (*os.File).Sync
	}
	return &walSyncer{
		path: dbPath + "-wal",
		sync: sync,
		in:   make(chan []*request, 1),
		free: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
}

// errSyncFailed wraps the error of the fsync that failed, for every write
// after it.
var errSyncFailed = errors.New("sqlite: an fsync of the WAL failed earlier, so this store takes no more writes; open it again (reload Caddy) once the disk is healthy")

// err returns the sticky failure, nil while every fsync has succeeded.
func (y *walSyncer) err() error {
	if p := y.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// batch returns an empty slice for the writer to hand over.
func (y *walSyncer) batch(n int) []*request {
	if b, ok := y.spare.Get().(*[]*request); ok && cap(*b) >= n {
		return (*b)[:0]
	}
	return make([]*request, 0, n)
}

// hand passes a committed batch to the syncer. The writer hands one batch
// at a time: the next only after free has said this one is answered.
func (y *walSyncer) hand(b []*request) { y.in <- b }

// stop waits for the syncer to answer what was handed and exit. The writer
// calls it once, after its last hand.
func (y *walSyncer) stop() {
	close(y.in)
	<-y.done
}

// run fsyncs once for each batch handed and then answers it, until stop.
func (y *walSyncer) run() {
	defer close(y.done)
	for b := range y.in {
		err := y.syncWAL()
		for i, r := range b {
			b[i] = nil
			if err != nil && r.err == nil {
				r.clearOutputs()
				r.err = err
			}
			r.done <- struct{}{}
		}
		b = b[:0]
		y.spare.Put(&b)
		y.free <- struct{}{}
	}
}

// syncWAL fsyncs the WAL file as it is now. After a failure it fails
// without trying again.
func (y *walSyncer) syncWAL() error {
	if err := y.err(); err != nil {
		return err
	}
	y.syncs.Add(1)
	err := y.syncPath()
	if err != nil {
		err = fmt.Errorf("%w: %w", errSyncFailed, err)
		y.failed.CompareAndSwap(nil, &err)
	}
	return err
}

// syncPath opens the WAL by its path and fsyncs it.
func (y *walSyncer) syncPath() error {
	// Read-write, as some systems (Windows) flush only a handle that may
	// write; never created: a missing WAL was checkpointed and removed.
	f, err := os.OpenFile(y.path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open WAL: %w", err)
	}
	err = y.sync(f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close WAL: %w", cerr)
	}
	if err != nil {
		return fmt.Errorf("fsync WAL: %w", err)
	}
	return nil
}
