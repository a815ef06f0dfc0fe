// Package postgres is the PostgreSQL Store of the webhook queue, on pgx v5,
// for when several Caddy instances share one queue.
//
// Every instance opens the same database and schema. Enqueue writes an
// event and its jobs in one statement, so one commit, and concurrent
// enqueues share that statement and commit (Config.MaxBatch); Claim leases a batch
// of ready jobs in one statement whose row locks use FOR UPDATE SKIP
// LOCKED, so claimers in any number of processes take different jobs
// without waiting for each other; leases and the fence token of each claim
// keep a job in one worker at a time exactly as on SQLite. Finish, ExtendLeases and
// HandBack take their whole batch in one round trip (unnest arrays).
//
// # Times
//
// The store stamps rows with the times its callers pass in
// (ClaimParams.Now, Completion.Now) or with Config.Now, so a test with an
// injected clock sees the same behaviour as on SQLite; like the SQLite
// store it keeps times to the millisecond. Lease deadlines are the one
// exception: a Claim or ExtendLeases without a Now (as the pool sends
// them) times leases with the server's now(), so instances whose clocks
// disagree still agree on when a lease ends, and which leases have
// expired. The instances' clocks need only agree well enough for due times
// (retries, run_at).
//
// # Waking pools in other instances
//
// After a commit that made work ready (an enqueue, replay, hand-back or a
// retry due now) the store signals Ready at once for this process, and
// sends one NOTIFY on the channel "<schema>_ready" for the others. NOTIFYs
// are coalesced: the first is sent at once, later ones at most one per
// Config.NotifyInterval (default 50ms), so a burst of enqueues costs a
// handful of notifications, never one per row. A listener connection owned
// by each Store receives the other instances' notifications and signals
// its Ready; if that connection drops it is re-established with backoff,
// and Ready is signalled once afterwards because notifications sent
// meanwhile are lost. The pool's polling remains the fallback.
//
// # Durability
//
// A write returns only after its COMMIT has returned, so a nil error means
// the change is on the server's disk. Sessions run with
// synchronous_commit=on if the server or DSN has it off or local; a
// stricter setting (remote_write, remote_apply, for a synchronous standby)
// is kept. No write whose outcome is unknown is retried behind the
// caller's back: a failure is returned, and the caller (the receiver,
// answering 503) lets the sender retry, which dedupe makes safe. The one
// rerun is of a batch of enqueues whose statement the server refused on a
// live connection, so certainly stored nothing: each of its events is
// then written alone, so that one bad event fails by itself.
//
// # Schema, migrations and privileges
//
// Tables live in their own schema, Config.Schema (default
// "caddywebhook"), which Open creates if it is missing: the DSN's user
// needs CREATE on the database for that, or an existing schema it owns.
// Migrations are numbered, recorded in <schema>.schema_version, and applied
// on open inside one transaction that first takes an advisory lock keyed
// by the schema name, so instances starting together migrate once. A
// database migrated by a newer build is refused. PostgreSQL 12 or newer.
//
// # Vacuum
//
// Every job row is updated two or three times (claim, finish, maybe a
// retry) and done rows are deleted by Purge in batches, so the jobs table
// churns while the claim reads small partial indexes over its ready rows.
// The default autovacuum trigger (20% of the table dead) would let those
// indexes fill with dead entries that every claim walks over, so the
// migration sets, per table:
//
//	jobs:     autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
//	          autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 1
//	attempts: autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_threshold = 1000
//	events:   autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_threshold = 1000
//
// The store also analyzes its tables itself while they fill (see
// analyze.go): autovacuum looks once a minute, and plans made for empty
// tables would serve a new install's first backlog.
//
// Autovacuum must be on (the server default). Long-running transactions
// elsewhere in the database hold back vacuum of these tables as of any
// other; keep them short.
//
// # Connections
//
// A Store holds a pool of at most Config.MaxConns connections and one
// listener connection; plan max_connections for every instance. Grouped
// enqueues take one pool connection per batch, one batch at a time. LISTEN
// needs a session of its own, and the pool relies on prepared statements
// and a per-session search_path: connect to PostgreSQL directly or through
// a session-mode pooler, not a transaction-mode one.
package postgres

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/storekit"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Config configures a Store. The zero value of every field but DSN is
// usable.
type Config struct {
	// DSN is the connection string, as a URL
	// (postgres://user:password@host:port/db?sslmode=verify-full) or in
	// key=value form; see pgx's ParseConfig. Required.
	DSN string

	// Schema holds the store's tables. It must be a lower-case SQL name
	// (letters, digits, underscores) of at most 57 bytes, not starting with
	// "pg_". Instances share a queue by sharing a database and schema.
	// Default: "caddywebhook".
	Schema string

	// MaxConns caps the store's connection pool, besides which each Store
	// holds one listener connection. Default: 10.
	MaxConns int

	// MaxBatch caps how many concurrent Enqueue calls share one statement
	// and one commit (group commit): a lone call is written at once, and
	// the calls that arrive while a batch is being written form the next
	// one. 1 writes each call alone, one commit per event, the design
	// this replaces, kept as the benchmarks' baseline. Default: 128
	// (DefaultMaxBatch says why).
	MaxBatch int

	// NotifyInterval is the least time between two NOTIFYs this store
	// sends; work made ready meanwhile is announced by one NOTIFY at the
	// end of the interval. Default: 50ms.
	NotifyInterval time.Duration

	// Timeout bounds each call on the Store: an enqueue, a claim, a
	// finish, an extension, a read, or one chunk of a bulk operation. A
	// call that has no answer by then fails with
	// context.DeadlineExceeded, and the connection it waited on is closed
	// rather than given to the next call, so a server that stopped
	// answering (a partition, a stalled disk) costs each caller this long
	// at most, and the next call opens a connection that must answer to
	// be used. A write that timed out may still commit: the caller cannot
	// tell, as with any lost answer, and its retry meets dedupe or the
	// fence. A caller's earlier deadline wins. Default: 5s
	// (DefaultTimeout), well under the 10s senders such as GitHub wait
	// for an answer.
	Timeout time.Duration

	// Now is the clock for the times the store stamps itself (created_at,
	// the run_at of an enqueue, replay or hand-back). Default: time.Now.
	Now func() time.Time

	// Keys encrypt the stored values (queue.Keys); SetKeys replaces them
	// later. Every instance sharing the schema needs the keys of what is
	// stored. Default: none, values are written plain.
	Keys queue.Keys
}

// Defaults applied by Open to zero fields.
const (
	DefaultSchema         = "caddywebhook"
	DefaultMaxConns       = 10
	DefaultNotifyInterval = 50 * time.Millisecond
	DefaultTimeout        = 5 * time.Second
)

// schemaName is what Config.Schema may be: a name that needs no quoting
// anywhere, with room for the "_ready" suffix of the notification channel
// within PostgreSQL's 63-byte identifiers.
var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,56}$`)

// withDefaults returns cfg with zero fields set to their defaults.
func (cfg Config) withDefaults() Config {
	cfg.Schema = cmp.Or(cfg.Schema, DefaultSchema)
	cfg.MaxConns = cmp.Or(cfg.MaxConns, DefaultMaxConns)
	cfg.NotifyInterval = cmp.Or(cfg.NotifyInterval, DefaultNotifyInterval)
	cfg.MaxBatch = cmp.Or(cfg.MaxBatch, DefaultMaxBatch)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return cfg
}

// validate checks a Config after defaults; each message names the field.
// It never quotes the DSN, which may hold a password.
func (cfg Config) validate() error {
	switch {
	case cfg.DSN == "":
		return errors.New("postgres: Config.DSN is required")
	case !schemaName.MatchString(cfg.Schema) || len(cfg.Schema) >= 3 && cfg.Schema[:3] == "pg_":
		return fmt.Errorf("postgres: Config.Schema must be a lower-case name of letters, digits and underscores, at most 57 bytes, not starting with pg_; got %q", cfg.Schema)
	case cfg.MaxConns < 0:
		return fmt.Errorf("postgres: Config.MaxConns must not be negative, got %d", cfg.MaxConns)
	case cfg.MaxConns > 1<<20:
		return fmt.Errorf("postgres: Config.MaxConns is %d, too large", cfg.MaxConns)
	case cfg.MaxBatch < 0:
		return fmt.Errorf("postgres: Config.MaxBatch must not be negative, got %d", cfg.MaxBatch)
	case cfg.MaxBatch > 1<<16:
		return fmt.Errorf("postgres: Config.MaxBatch is %d, too large", cfg.MaxBatch)
	case cfg.NotifyInterval < 0:
		return fmt.Errorf("postgres: Config.NotifyInterval must not be negative, got %s", cfg.NotifyInterval)
	case cfg.Timeout < 0:
		return fmt.Errorf("postgres: Config.Timeout must not be negative, got %s", cfg.Timeout)
	}
	return nil
}

// Store is the PostgreSQL queue.Store. It is safe for concurrent use.
type Store struct {
	cfg      Config
	pool     *pgxpool.Pool
	channel  string // the NOTIFY channel, "<schema>_ready"
	instance string // this Store's id, the payload of its NOTIFYs
	ready    chan struct{}
	redact   *Redactor // applied to every error the store returns

	notify  *notifier
	listen  *listener
	batcher *batcher // nil when MaxBatch is 1: each Enqueue writes alone
	folder  *folder
	closeMu sync.RWMutex
	closed  bool

	// sealer seals and opens values under the store's Keys; SetKeys
	// swaps it, keysMu orders SetKeys calls.
	sealer atomic.Pointer[storekit.Sealer]
	keysMu sync.Mutex
}

// Interface guard.
var _ queue.Store = (*Store)(nil)

// Open connects to cfg.DSN, creates or migrates the schema, and starts the
// listener that wakes this process's pool when another instance commits
// ready work. Opening is harmless beside running instances: it only
// creates what is missing, so `caddy validate` may call it. Its errors,
// as every error of the Store, are redacted (see Redactor).
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	redact := NewRedactor(cfg.DSN)
	s, err := open(ctx, cfg, redact)
	return s, redact.Error(err)
}

// open is Open after the checks, with errors as pgx wrote them.
func open(ctx context.Context, cfg Config, redact *Redactor) (*Store, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		// pgx's parse errors quote the DSN's parts, password included;
		// report only that it did not parse.
		return nil, errors.New("postgres: Config.DSN does not parse as a connection string")
	}
	pcfg.MaxConns = int32(cfg.MaxConns)
	pcfg.MinConns = 0
	params := pcfg.ConnConfig.RuntimeParams
	params["search_path"] = cfg.Schema
	if params["application_name"] == "" {
		params["application_name"] = "caddywebhook"
	}
	pcfg.AfterConnect = ensureSyncCommit
	lcfg := pcfg.ConnConfig.Copy()
	lcfg.RuntimeParams["application_name"] = params["application_name"] + " listener"

	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	if err := migrate(ctx, pool, cfg.Schema, cfg.Keys); err != nil {
		pool.Close()
		return nil, err
	}

	var id [8]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails
	s := &Store{
		cfg:      cfg,
		pool:     pool,
		channel:  cfg.Schema + "_ready",
		instance: hex.EncodeToString(id[:]),
		ready:    make(chan struct{}, 1),
		redact:   redact,
	}
	if err := s.useKeys(ctx, cfg.Keys, false); err != nil {
		pool.Close()
		return nil, err
	}
	s.notify = newNotifier(pool, s.channel, s.instance, cfg.NotifyInterval)
	s.listen = newListener(lcfg, s.channel, s.instance, s.signalReady)
	// The first LISTEN happens here, so Open fails on a database that
	// takes connections for the pool but not for the listener, and no
	// notification committed after Open returns is missed.
	if err := s.listen.start(ctx); err != nil {
		s.notify.stop()
		pool.Close()
		return nil, err
	}
	if cfg.MaxBatch > 1 {
		s.batcher = newBatcher(s, cfg.MaxBatch)
	}
	s.folder = startFolder(s)
	return s, nil
}

// ensureSyncCommit makes a session's commits wait for the WAL flush when
// the server or DSN turned that off: a nil error from a write must mean
// durable. Stricter settings (remote_write, remote_apply) are kept.
func ensureSyncCommit(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, `SELECT set_config('synchronous_commit', 'on', false)
WHERE current_setting('synchronous_commit') IN ('off', 'local')`)
	if err != nil {
		return fmt.Errorf("set synchronous_commit: %w", err)
	}
	return nil
}

// MaxBatch returns the most enqueues this store writes in one statement
// and commit, Config.MaxBatch after defaults.
func (s *Store) MaxBatch() int { return s.cfg.MaxBatch }

// Ready receives a value after a commit that made work ready, in this
// process or (through LISTEN/NOTIFY) in another instance. Its buffer of one
// merges signals; none is lost.
func (s *Store) Ready() <-chan struct{} { return s.ready }

// signalReady wakes one waiter without blocking.
func (s *Store) signalReady() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// madeReady announces ready work: at once to this process, and through a
// coalesced NOTIFY to the others.
func (s *Store) madeReady() {
	s.signalReady()
	s.notify.kick()
}

// Close sends a NOTIFY still owed for work committed just before, stops
// the listener and closes the pool once the calls in flight have returned
// their connections. Every later call on the Store returns queue.ErrClosed;
// a second Close returns nil.
func (s *Store) Close() error {
	s.closeMu.Lock()
	if s.closed {
		s.closeMu.Unlock()
		return nil
	}
	s.closed = true
	s.closeMu.Unlock()
	// The batch in flight is answered first: it needs the pool, and may
	// owe a NOTIFY. Stop the notifier before the pool closes: its last
	// NOTIFY needs a connection.
	if s.batcher != nil {
		s.batcher.stop()
	}
	s.folder.stop()
	s.notify.stop()
	s.listen.stop()
	s.pool.Close()
	return nil
}

// isClosed reports whether Close has begun.
func (s *Store) isClosed() bool {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	return s.closed
}

// fail turns err from operation op into the store's own error: this is
// where the store's errors leave pgx, so it is where they are redacted. A
// call that raced with Close and found the pool closed reports
// queue.ErrClosed, whatever pgx said.
func (s *Store) fail(op string, err error) error {
	if s.isClosed() && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", op, queue.ErrClosed)
	}
	return s.redact.Error(fmt.Errorf("%s: %w", op, err))
}

// bound returns ctx with the store's Timeout, unless ctx ends sooner.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.Timeout)
}

// ms drops what is below the millisecond, the precision the SQLite store
// keeps, so both stores return the same times.
func ms(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()) }
