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

	"github.com/caddyserver/caddy/v2"

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

	// MinFreeSpace is the free space, in bytes, that ingest leaves on the
	// SQLite file's filesystem. While less is free, the receiver answers
	// 503 disk_low (with Retry-After) and stores nothing, so the claims,
	// finishes and purges that drain the backlog still have room to
	// commit; acceptance resumes by itself once space is freed. Free space
	// is measured with statfs at most every 100ms (sooner after a quarter
	// of the reserve in payloads), on Linux, macOS and FreeBSD; elsewhere
	// nothing is refused. At least 16 MiB, the WAL's size limit. Takes
	// effect when Caddy restarts. SQLite only: a PostgreSQL server's disk
	// is not Caddy's to measure. Default: 64 MiB.
	MinFreeSpace int64 `json:"min_free_space,omitempty"`

	// DSN is the PostgreSQL connection string, as a URL
	// (postgres://user:password@host:5432/db?sslmode=verify-full) or in
	// key=value form. It holds a password, so write a placeholder such as
	// {env.WEBHOOK_PG_DSN} or {file./run/secrets/pg_dsn}: it is resolved
	// when the config loads, and the resolved value never appears in logs, errors
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
	// claimAhead lets the pool claim jobs for workers that are still
	// busy. Only for a store one Caddy owns: jobs claimed ahead wait for
	// no one but this pool's workers. A shared store (Postgres) leaves
	// them to idle instances instead.
	claimAhead bool
	// open opens the store. Its errors say nothing the config must keep
	// secret: the Postgres store redacts its DSN from every error.
	open func(ctx context.Context) (queue.Store, error)
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
	minFree := cmp.Or(st.MinFreeSpace, sqlite.DefaultMinFreeSpace)
	if minFree < sqlite.MinFreeSpaceFloor {
		return storeSpec{}, fmt.Errorf("webhook: storage: min_free_space is %d bytes, must be at least %d (16 MiB, the WAL's size limit)", st.MinFreeSpace, sqlite.MinFreeSpaceFloor)
	}
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
		key:        "sqlite:" + path,
		name:       path,
		settings:   fmt.Sprintf("synchronous=%s max_batch=%d min_free_space=%d", synchronous, maxBatch, minFree),
		claimAhead: true,
		open: func(ctx context.Context) (queue.Store, error) {
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return nil, fmt.Errorf("create storage directory: %w", err)
			}
			return sqlite.Open(ctx, sqlite.Config{Path: path, Synchronous: synchronous, MaxBatch: maxBatch, MinFreeSpace: minFree})
		},
	}, nil
}

func (st *StorageConfig) postgresSpec() (storeSpec, error) {
	switch {
	case st.Path != "":
		return storeSpec{}, errors.New("webhook: storage: path applies to sqlite only; postgres takes a dsn")
	case st.Synchronous != "":
		return storeSpec{}, errors.New("webhook: storage: synchronous applies to sqlite only; postgres commits are always flushed")
	case st.MinFreeSpace != 0:
		return storeSpec{}, errors.New("webhook: storage: min_free_space applies to sqlite only; a postgres server's disk is not Caddy's to measure")
	case st.MaxBatch < 0:
		return storeSpec{}, fmt.Errorf("webhook: storage: max_batch is %d, must not be negative", st.MaxBatch)
	case st.DSN == "":
		return storeSpec{}, errors.New("webhook: storage: postgres needs a dsn")
	case st.MaxConns < 0:
		return storeSpec{}, fmt.Errorf("webhook: storage: max_conns is %d, must not be negative", st.MaxConns)
	}
	dsn, err := resolvePlaceholders(st.DSN)
	if err != nil {
		return storeSpec{}, fmt.Errorf("webhook: storage: dsn: %w", err)
	}
	schema := cmp.Or(st.Schema, postgres.DefaultSchema)
	maxConns := cmp.Or(st.MaxConns, postgres.DefaultMaxConns)
	maxBatch := cmp.Or(st.MaxBatch, postgres.DefaultMaxBatch)
	return storeSpec{
		key:      "postgres:" + dsnFingerprint(dsn) + "/" + schema,
		name:     "postgres schema " + schema,
		settings: fmt.Sprintf("max_conns=%d max_batch=%d", maxConns, maxBatch),
		open: func(ctx context.Context) (queue.Store, error) {
			return postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: schema, MaxConns: maxConns, MaxBatch: maxBatch})
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
