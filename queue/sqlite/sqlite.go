// Package sqlite is the SQLite Store of the webhook queue, on the pure-Go
// modernc.org/sqlite driver (xcaddy builds with cgo off).
//
// One writer goroutine owns the single write connection. Every write is a
// request to it; it runs whatever is waiting as one BEGIN IMMEDIATE
// transaction, commits once and only then answers the callers, so one fsync
// covers many requests and a nil error still means durable. A request that
// fails is rolled back alone: the others run again, each in its own
// savepoint (see writer.transact). Reads use a separate read-only pool that
// WAL lets run beside the writer.
package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/storekit"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Config configures a Store. The zero value of every field but Path is
// usable.
type Config struct {
	// Path is the database file. It is created with mode 0600 if missing;
	// SQLite gives its -wal and -shm files the same mode. Required.
	Path string

	// Synchronous is SQLite's synchronous setting: "full" makes every
	// commit survive power loss, "normal" only a process crash. Default:
	// "full".
	Synchronous string

	// BusyTimeout is how long a statement waits for a lock held by another
	// connection (a second Store on the same file during a reload, a
	// sqlite3 shell). Default: 5s.
	BusyTimeout time.Duration

	// MaxBatch caps the requests the writer runs in one transaction (group
	// commit). 1 runs one request per transaction, the seed's design.
	// Default: 256.
	MaxBatch int

	// ReadConns is the size of the read-only pool used by Stats, ListJobs
	// and GetJob. Default: 4.
	ReadConns int

	// MinFreeSpace is the free space, in bytes, to keep on the database's
	// filesystem: while less is free, Enqueue refuses with
	// queue.ErrDiskLow and writes nothing, so the claims, finishes and
	// purges that drain the queue still have room to commit; ingest
	// resumes once an eighth more than MinFreeSpace is free. Free space is
	// measured with statfs (at most every 100ms, or after a quarter of the
	// reserve in payloads) on Linux, macOS and FreeBSD; elsewhere ingest
	// is never refused. At least MinFreeSpaceFloor. Default: 64 MiB.
	MinFreeSpace int64

	// Timeout bounds how long a write (an enqueue, a claim, a finish, an
	// extension, one chunk of a bulk operation) waits for the writer: a
	// caller whose write is not committed by then gets
	// context.DeadlineExceeded, also when the writer has already begun its
	// transaction and is stalled (a disk that stopped answering), so a
	// receiver answers 503 in time instead of holding the sender. Such a
	// write may still commit once the disk answers: the caller cannot
	// tell, and its retry meets dedupe or the fence. A caller's earlier
	// deadline wins. Default: 5s (DefaultTimeout).
	Timeout time.Duration

	// Now is the clock for the times the store stamps itself (created_at,
	// the run_at of an enqueue, replay or hand-back). Default: time.Now.
	Now func() time.Time

	// Keys encrypt the stored values (queue.Keys); SetKeys replaces them
	// later. With a key ring the write connection runs with
	// secure_delete=ON, so what a delete or a rewrite frees is zeroed
	// rather than left in the file's free pages. Default: none, values
	// are written plain.
	Keys queue.Keys
}

// Defaults applied by Open to zero fields.
const (
	DefaultSynchronous  = "full"
	DefaultBusyTimeout  = 5 * time.Second
	DefaultMaxBatch     = 256
	DefaultReadConns    = 4
	DefaultMinFreeSpace = 64 << 20
	DefaultTimeout      = 5 * time.Second
)

// withDefaults returns cfg with zero fields set to their defaults.
func (cfg Config) withDefaults() Config {
	cfg.Synchronous = strings.ToLower(cmp.Or(cfg.Synchronous, DefaultSynchronous))
	cfg.BusyTimeout = cmp.Or(cfg.BusyTimeout, DefaultBusyTimeout)
	cfg.MaxBatch = cmp.Or(cfg.MaxBatch, DefaultMaxBatch)
	cfg.ReadConns = cmp.Or(cfg.ReadConns, DefaultReadConns)
	cfg.MinFreeSpace = cmp.Or(cfg.MinFreeSpace, DefaultMinFreeSpace)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return cfg
}

// validate checks a Config after defaults; each message names the field.
func (cfg Config) validate() error {
	switch {
	case cfg.Path == "":
		return errors.New("sqlite: Config.Path is required")
	case cfg.Path == ":memory:" || strings.HasPrefix(cfg.Path, "file:"):
		return fmt.Errorf("sqlite: Config.Path must be a file path, got %q", cfg.Path)
	case cfg.Synchronous != "full" && cfg.Synchronous != "normal":
		return fmt.Errorf("sqlite: Config.Synchronous must be \"full\" or \"normal\", got %q", cfg.Synchronous)
	case cfg.BusyTimeout < 0:
		return fmt.Errorf("sqlite: Config.BusyTimeout must not be negative, got %s", cfg.BusyTimeout)
	case cfg.MaxBatch < 0:
		return fmt.Errorf("sqlite: Config.MaxBatch must not be negative, got %d", cfg.MaxBatch)
	case cfg.ReadConns < 0:
		return fmt.Errorf("sqlite: Config.ReadConns must not be negative, got %d", cfg.ReadConns)
	case cfg.Timeout < 0:
		return fmt.Errorf("sqlite: Config.Timeout must not be negative, got %s", cfg.Timeout)
	case cfg.MinFreeSpace < MinFreeSpaceFloor:
		return fmt.Errorf("sqlite: Config.MinFreeSpace must be at least %d (the WAL's size limit), got %d", MinFreeSpaceFloor, cfg.MinFreeSpace)
	}
	return nil
}

// Store is the SQLite queue.Store. It is safe for concurrent use.
type Store struct {
	cfg   Config
	path  string // absolute
	wdb   *sql.DB
	rdb   *sql.DB
	ready chan struct{}
	room  reserve // the free-space reserve Enqueue checks

	// mu guards closed and orders sends on reqs against Close, so no
	// request is sent after the writer has drained the channel.
	mu     sync.RWMutex
	closed bool
	reqs   chan *request
	ctl    chan *ctlReq
	quit   chan struct{}
	done   chan struct{} // closed when the writer has exited

	w       writer       // owned by the writer goroutine
	keys    *keySet      // the stored events' dedupe keys; the writer changes them
	written writerCounts // the writer's counters, published after each commit (writerstats.go)

	// sealer seals and opens values under the store's Keys; SetKeys
	// swaps it. keysMu orders SetKeys calls; rekeying is held while a
	// rekey runs.
	sealer   atomic.Pointer[storekit.Sealer]
	keysMu   sync.Mutex
	rekeying sync.Mutex
}

// Interface guard.
var _ queue.Store = (*Store)(nil)

// Open opens (creating if needed) the database at cfg.Path, migrates its
// schema and starts the writer. Opening is harmless: it only creates the
// file and schema, so `caddy validate` may call it. A second Store on the
// same file works; SQLite's locks serialise the two writers.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	path, err := filepath.Abs(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("resolve path: %w", err)
	}
	if err := createFile(path); err != nil {
		return nil, err
	}

	s := &Store{
		cfg:   cfg,
		path:  path,
		ready: make(chan struct{}, 1),
		reqs:  make(chan *request, min(4*cfg.MaxBatch, 4096)),
		ctl:   make(chan *ctlReq),
		quit:  make(chan struct{}),
		done:  make(chan struct{}),
		keys:  newKeySet(0),
	}
	if s.wdb, err = sql.Open("sqlite", s.dsn(false)); err != nil {
		return nil, fmt.Errorf("open db: %w", err)
	}
	// One connection: the writer's. database/sql never opens a second one
	// behind its back, and a connection discarded after a failure is
	// replaced by a fresh one on the next batch.
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetMaxIdleConns(1)
	if err := migrate(ctx, s.wdb, cfg.Keys); err != nil {
		s.wdb.Close()
		return nil, err
	}
	if err := s.openKeys(ctx, cfg.Keys); err != nil {
		s.wdb.Close()
		return nil, err
	}
	if s.rdb, err = sql.Open("sqlite", s.dsn(true)); err != nil {
		s.wdb.Close()
		return nil, fmt.Errorf("open read pool: %w", err)
	}
	s.rdb.SetMaxOpenConns(cfg.ReadConns)
	s.rdb.SetMaxIdleConns(cfg.ReadConns)
	if err := s.rdb.PingContext(ctx); err != nil {
		s.wdb.Close()
		s.rdb.Close()
		return nil, fmt.Errorf("open read pool: %w", err)
	}
	s.room.init(filepath.Dir(path), cfg.MinFreeSpace)
	s.w.init(s)
	if err := s.w.connect(ctx); err != nil {
		s.wdb.Close()
		s.rdb.Close()
		s.keys.release()
		return nil, err
	}
	go s.w.run()
	return s, nil
}

// createFile creates the database file with mode 0600 before SQLite opens
// it: SQLite creates files 0644 (less the umask) and copies the database's
// mode onto its -wal and -shm files, so this one chmod covers all three.
// An existing file keeps the mode its owner gave it.
func createFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create db file: %w", err)
	}
	// The umask may have cleared bits of 0600 but never adds any; Chmod
	// makes the mode exact whatever the umask.
	err = f.Chmod(0o600)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("create db file: %w", err)
	}
	return nil
}

// dsn is the driver's name for the file with the pragmas every connection
// needs. The path is a file: URI so that characters such as '?' in it are
// escaped rather than taken for parameters.
func (s *Store) dsn(readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(s.cfg.BusyTimeout.Milliseconds(), 10)+")")
	if readOnly {
		q.Set("mode", "ro")
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous("+s.cfg.Synchronous+")")
		q.Add("_pragma", "foreign_keys(1)")
		// On reset after a checkpoint, cut the WAL back to this size so one
		// burst does not leave a large file behind.
		q.Add("_pragma", "journal_size_limit("+strconv.Itoa(walSizeLimit)+")")
		// SQLite's autocheckpoint runs inside a caller's commit and costs
		// it two fsyncs and a copy of every page the WAL holds. A longer
		// interval means fewer of them, and hot pages (the tails of the
		// tables and indexes) copied once for many commits.
		q.Add("_pragma", "wal_autocheckpoint("+strconv.Itoa(autocheckpointPages)+")")
		q.Add("_txlock", "immediate")
	}
	return "file:" + (&url.URL{Path: s.path}).EscapedPath() + "?" + q.Encode()
}

// Ready receives a value after a commit that made work ready. Its buffer
// of one merges signals; none is lost.
func (s *Store) Ready() <-chan struct{} { return s.ready }

// signalReady wakes one waiter without blocking.
func (s *Store) signalReady() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Close stops accepting requests, lets the writer finish what was already
// queued, checkpoints the WAL and closes the connections. Every later call
// on the Store returns queue.ErrClosed; a second Close returns nil.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.quit)
	<-s.done
	err := s.w.disconnect()
	if cerr := s.wdb.Close(); err == nil {
		err = cerr
	}
	if cerr := s.rdb.Close(); err == nil {
		err = cerr
	}
	s.keys.release()
	if err != nil {
		return fmt.Errorf("close db: %w", err)
	}
	return nil
}

// isClosed reports whether Close has been called.
func (s *Store) isClosed() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.closed
}

// ms converts a time to the unix milliseconds the schema stores.
func ms(t time.Time) int64 { return t.UnixMilli() }

// fromMS converts stored unix milliseconds back, 0 to the zero time.
func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v)
}
