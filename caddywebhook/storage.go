package caddywebhook

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/postgres"
	"github.com/caddywebhook/caddywebhook/queue/sqlite"
)

// Storage backends.
const (
	backendSQLite   = "sqlite"
	backendPostgres = "postgres"
)

// StorageConfig selects the queue's database.
type StorageConfig struct {
	// Backend is the database kind: "sqlite" (one Caddy, a local file) or
	// "postgres" (any number of Caddy instances sharing one queue).
	// Default: sqlite.
	Backend string `json:"backend,omitempty"`

	// Path is the SQLite file; placeholders such as {env.X} are expanded.
	// SQLite only. Default: <caddy data dir>/webhook/queue.db.
	Path string `json:"path,omitempty"`

	// Synchronous is SQLite's durability: "full" makes an accepted event
	// (answered 202) survive power loss, "normal" only a crash of Caddy.
	// The database handle is shared across reloads, so a change takes
	// effect when Caddy restarts. SQLite only; PostgreSQL commits are
	// always flushed. Default: full.
	Synchronous string `json:"synchronous,omitempty"`

	// MaxBatch caps the writes that share one commit. In SQLite it caps
	// how many writes (enqueues, claims, finishes) one transaction groups
	// under one commit; in PostgreSQL, how many concurrent enqueues share
	// one statement and its commit. 1 commits each on its own, the
	// one-row-per-commit design this project replaces: there for
	// benchmarks (the load test's baseline phase), slower under load with
	// no gain in durability. Takes effect when Caddy restarts. Default:
	// 256 for sqlite, 128 for postgres.
	MaxBatch int `json:"max_batch,omitempty"`

	// DSN is the PostgreSQL connection string, as a URL
	// (postgres://user:password@host:5432/db?sslmode=verify-full) or in
	// key=value form. It holds a password, so write a placeholder such as
	// {env.WEBHOOK_PG_DSN} or {file./run/secrets/pg_dsn}: it is resolved
	// at Provision, and the resolved value never appears in logs, errors
	// or the admin API. Postgres only; required there.
	DSN string `json:"dsn,omitempty"`

	// Schema is the PostgreSQL schema that holds the queue's tables,
	// created if missing. Instances share a queue by sharing a database
	// and schema. Postgres only. Default: caddywebhook.
	Schema string `json:"schema,omitempty"`

	// MaxConns caps the connections each Caddy instance opens to
	// PostgreSQL for the queue, besides one more for LISTEN. The store is
	// shared across reloads, so a change takes effect when Caddy restarts.
	// Postgres only. Default: 10.
	MaxConns int `json:"max_conns,omitempty"`
}

// storeSpec is a checked StorageConfig: where its store sits in the usage
// pool and how to open it.
type storeSpec struct {
	// key is the store's usage-pool key: "sqlite:" + absolute path, or
	// "postgres:" + a fingerprint of the DSN + "/" + schema. It is never
	// logged, though it reveals nothing.
	key string
	// name describes the store in logs and errors without a secret: the
	// SQLite path, or the Postgres schema.
	name string
	// settings are the options that only take effect when the store is
	// opened, to warn when a reload changes them.
	settings string
	open     func(ctx context.Context) (queue.Store, error)
}

// spec applies defaults to st, checks it and resolves its placeholders.
// Each message names the option. Nothing is opened.
func (st *StorageConfig) spec() (storeSpec, error) {
	st.Backend = cmp.Or(st.Backend, backendSQLite)
	switch st.Backend {
	case backendSQLite:
		return st.sqliteSpec()
	case backendPostgres:
		return st.postgresSpec()
	default:
		return storeSpec{}, fmt.Errorf("webhook: storage: unknown backend %q (want sqlite or postgres)", st.Backend)
	}
}

func (st *StorageConfig) sqliteSpec() (storeSpec, error) {
	if st.DSN != "" || st.Schema != "" || st.MaxConns != 0 {
		return storeSpec{}, errors.New("webhook: storage: dsn, schema and max_conns apply to postgres only, not sqlite")
	}
	st.Synchronous = cmp.Or(st.Synchronous, sqlite.DefaultSynchronous)
	if st.Synchronous != "full" && st.Synchronous != "normal" {
		return storeSpec{}, fmt.Errorf("webhook: storage: synchronous %q is not full or normal", st.Synchronous)
	}
	if st.MaxBatch < 0 {
		return storeSpec{}, fmt.Errorf("webhook: storage: max_batch is %d, must not be negative", st.MaxBatch)
	}
	maxBatch := cmp.Or(st.MaxBatch, sqlite.DefaultMaxBatch)
	path := st.Path
	if path == "" {
		path = filepath.Join(caddy.AppDataDir(), "webhook", "queue.db")
	} else {
		var err error
		if path, err = caddy.NewReplacer().ReplaceOrErr(path, true, true); err != nil {
			return storeSpec{}, fmt.Errorf("webhook: storage path: %w", err)
		}
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return storeSpec{}, fmt.Errorf("webhook: storage path: %w", err)
	}
	synchronous := st.Synchronous
	return storeSpec{
		key:      "sqlite:" + path,
		name:     path,
		settings: fmt.Sprintf("synchronous=%s max_batch=%d", synchronous, maxBatch),
		open: func(ctx context.Context) (queue.Store, error) {
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return nil, fmt.Errorf("create storage directory: %w", err)
			}
			return sqlite.Open(ctx, sqlite.Config{Path: path, Synchronous: synchronous, MaxBatch: maxBatch})
		},
	}, nil
}

func (st *StorageConfig) postgresSpec() (storeSpec, error) {
	switch {
	case st.Path != "":
		return storeSpec{}, errors.New("webhook: storage: path applies to sqlite only; postgres takes a dsn")
	case st.Synchronous != "":
		return storeSpec{}, errors.New("webhook: storage: synchronous applies to sqlite only; postgres commits are always flushed")
	case st.MaxBatch < 0:
		return storeSpec{}, fmt.Errorf("webhook: storage: max_batch is %d, must not be negative", st.MaxBatch)
	case st.DSN == "":
		return storeSpec{}, errors.New("webhook: storage: postgres needs a dsn")
	case st.MaxConns < 0:
		return storeSpec{}, fmt.Errorf("webhook: storage: max_conns is %d, must not be negative", st.MaxConns)
	}
	// The replacer's errors quote the text around a placeholder, which
	// here may be a password: say only what is wrong.
	dsn, err := caddy.NewReplacer().ReplaceOrErr(st.DSN, true, true)
	if err != nil {
		return storeSpec{}, errors.New("webhook: storage: dsn: a placeholder in it is unknown or empty")
	}
	schema := cmp.Or(st.Schema, postgres.DefaultSchema)
	maxConns := cmp.Or(st.MaxConns, postgres.DefaultMaxConns)
	maxBatch := cmp.Or(st.MaxBatch, postgres.DefaultMaxBatch)
	scrub := newDSNScrubber(dsn)
	return storeSpec{
		key:      "postgres:" + dsnFingerprint(dsn) + "/" + schema,
		name:     "postgres schema " + schema,
		settings: fmt.Sprintf("max_conns=%d max_batch=%d", maxConns, maxBatch),
		open: func(ctx context.Context) (queue.Store, error) {
			s, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: schema, MaxConns: maxConns, MaxBatch: maxBatch})
			if err != nil {
				return nil, scrub.scrub(err)
			}
			return &scrubbedStore{Store: s, scrubber: scrub}, nil
		},
	}, nil
}

// fingerprintKey keys the DSN fingerprints of this process. A fingerprint
// only has to be stable within one process (the usage pool's life), so a
// random key keeps it from being a way to test password guesses should it
// ever be seen.
var fingerprintKey = func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // crypto/rand.Read never fails
	return k
}()

// dsnFingerprint identifies a DSN in the usage pool without revealing it.
func dsnFingerprint(dsn string) string {
	m := hmac.New(sha256.New, fingerprintKey)
	m.Write([]byte(dsn))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// dsnScrubber takes out of error texts what a DSN would reveal. pgx's
// connection errors name the user and database ("failed to connect to
// `user=… database=…`"), the server address and host, and the server's
// own messages name the user or database ("password authentication failed
// for user …"). The scrubber drops pgx's connect prefix and address
// lists, replaces every whole-word occurrence of the DSN's password, user,
// database and hosts (and of the DSN itself) with "<redacted>", and
// redacts IP addresses, which may be a host's resolution.
type dsnScrubber struct {
	values []*regexp.Regexp
}

// redacted replaces what the scrubber takes out.
const redacted = "<redacted>"

var (
	pgConnectPrefix = regexp.MustCompile("failed to connect to `[^`]*`:")
	// pgDialAddress is pgx's "address (host): " before a per-address
	// error.
	pgDialAddress = regexp.MustCompile(`(^|\s)[^\s()]+ \([^\s()]*\): `)
	ipv4Address   = regexp.MustCompile(`\b\d{1,3}(\.\d{1,3}){3}\b`)
	ipv6Address   = regexp.MustCompile(`\[[0-9A-Fa-f:.%A-Za-z]*:[0-9A-Fa-f:.%A-Za-z]*\]`)
)

// newDSNScrubber prepares a scrubber for dsn.
func newDSNScrubber(dsn string) *dsnScrubber {
	values := []string{dsn}
	// ParseConfig also reads the PG* environment and the password file,
	// so it finds the password wherever it comes from. A DSN that does
	// not parse never reaches pgx's connection errors (postgres.Open
	// refuses it with a message of its own); the DSN itself is redacted
	// regardless.
	if cfg, err := pgconn.ParseConfig(dsn); err == nil {
		values = append(values, cfg.Password, cfg.User, cfg.Database, cfg.Host)
		for _, fb := range cfg.Fallbacks {
			values = append(values, fb.Host)
		}
	}
	// Longest first, so a value that contains another goes whole.
	slices.SortFunc(values, func(a, b string) int { return len(b) - len(a) })
	values = slices.Compact(values)
	s := new(dsnScrubber)
	for _, v := range values {
		if v == "" {
			continue
		}
		s.values = append(s.values, regexp.MustCompile(`(^|[^A-Za-z0-9_])`+regexp.QuoteMeta(v)+`([^A-Za-z0-9_]|$)`))
	}
	return s
}

// scrubText returns msg without what the DSN would reveal.
func (s *dsnScrubber) scrubText(msg string) string {
	msg = pgConnectPrefix.ReplaceAllString(msg, "connect to database:")
	msg = pgDialAddress.ReplaceAllString(msg, "${1}")
	for _, re := range s.values {
		// A match consumes the character after the value, so adjacent
		// occurrences ("a a") need a second pass.
		for range 2 {
			msg = re.ReplaceAllString(msg, "${1}"+redacted+"${2}")
		}
	}
	msg = ipv4Address.ReplaceAllString(msg, redacted)
	return ipv6Address.ReplaceAllString(msg, redacted)
}

// scrub returns err with a scrubbed text; nil stays nil. The result still
// unwraps to err, so errors.Is finds the queue's sentinels and context
// errors; only its text changes, and the text is what logs, the admin API
// and Caddy's config errors show.
func (s *dsnScrubber) scrub(err error) error {
	if err == nil {
		return nil
	}
	return &scrubbedError{msg: s.scrubText(err.Error()), err: err}
}

// scrubbedError is an error whose text was scrubbed of a DSN's secrets.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// scrubbedStore is the Postgres store as the app uses it: every error it
// returns is scrubbed, because the pool logs store errors, the receiver
// logs a failed enqueue, and the admin API returns them, and after a lost
// connection pgx's errors name the server and the user.
type scrubbedStore struct {
	queue.Store
	scrubber *dsnScrubber
}

// scrub scrubs err; nil stays nil.
func (s *scrubbedStore) scrub(err error) error { return s.scrubber.scrub(err) }

// Enqueue implements queue.Store.
func (s *scrubbedStore) Enqueue(ctx context.Context, ev queue.Event) (queue.EnqueueResult, error) {
	r, err := s.Store.Enqueue(ctx, ev)
	return r, s.scrub(err)
}

// Claim implements queue.Store.
func (s *scrubbedStore) Claim(ctx context.Context, p queue.ClaimParams) ([]*queue.Job, error) {
	jobs, err := s.Store.Claim(ctx, p)
	return jobs, s.scrub(err)
}

// ExtendLeases implements queue.Store.
func (s *scrubbedStore) ExtendLeases(ctx context.Context, p queue.ExtendParams) ([]int64, error) {
	lost, err := s.Store.ExtendLeases(ctx, p)
	return lost, s.scrub(err)
}

// Finish implements queue.Store.
func (s *scrubbedStore) Finish(ctx context.Context, cs []queue.Completion) ([]bool, error) {
	recorded, err := s.Store.Finish(ctx, cs)
	return recorded, s.scrub(err)
}

// HandBack implements queue.Store.
func (s *scrubbedStore) HandBack(ctx context.Context, owner string, claims []queue.Claimed) error {
	return s.scrub(s.Store.HandBack(ctx, owner, claims))
}

// Replay implements queue.Store.
func (s *scrubbedStore) Replay(ctx context.Context, id int64) error {
	return s.scrub(s.Store.Replay(ctx, id))
}

// ReplayDead implements queue.Store.
func (s *scrubbedStore) ReplayDead(ctx context.Context, f queue.Filter) (int, error) {
	n, err := s.Store.ReplayDead(ctx, f)
	return n, s.scrub(err)
}

// Discard implements queue.Store.
func (s *scrubbedStore) Discard(ctx context.Context, id int64) error {
	return s.scrub(s.Store.Discard(ctx, id))
}

// Purge implements queue.Store.
func (s *scrubbedStore) Purge(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	n, err := s.Store.Purge(ctx, cutoff, limit)
	return n, s.scrub(err)
}

// Stats implements queue.Store.
func (s *scrubbedStore) Stats(ctx context.Context, now time.Time) (queue.Stats, error) {
	st, err := s.Store.Stats(ctx, now)
	return st, s.scrub(err)
}

// ListJobs implements queue.Store.
func (s *scrubbedStore) ListJobs(ctx context.Context, p queue.ListParams) (queue.JobPage, error) {
	page, err := s.Store.ListJobs(ctx, p)
	return page, s.scrub(err)
}

// GetJob implements queue.Store.
func (s *scrubbedStore) GetJob(ctx context.Context, id int64) (queue.JobDetail, error) {
	d, err := s.Store.GetJob(ctx, id)
	return d, s.scrub(err)
}

// Close implements queue.Store.
func (s *scrubbedStore) Close() error {
	return s.scrub(s.Store.Close())
}

// Interface guard.
var _ queue.Store = (*scrubbedStore)(nil)
