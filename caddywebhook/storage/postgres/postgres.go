// Package postgresstorage is the webhook.storage.postgres module: the queue
// in a PostgreSQL schema that any number of Caddy instances share.
package postgresstorage

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddywebhook/caddywebhook/caddywebhook"
	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/caddyfileopt"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/postgres"
)

func init() {
	caddy.RegisterModule(new(Storage))
}

// Storage keeps the queue in PostgreSQL: instances that share a database
// and schema share one queue.
type Storage struct {
	// MaxBatch caps how many concurrent enqueues share one statement and
	// its commit. 1 commits each on its own: there for benchmarks, slower
	// under load with no gain in durability. Takes effect when Caddy
	// restarts. Default: 128.
	MaxBatch int `json:"max_batch,omitempty"`

	// DSN is the PostgreSQL connection string, as a URL
	// (postgres://user:password@host:5432/db?sslmode=verify-full) or in
	// key=value form. It holds a password, so write a placeholder such as
	// {env.WEBHOOK_PG_DSN} or {file./run/secrets/pg_dsn}: it is resolved
	// when the config loads, and the resolved value never appears in logs,
	// errors or the admin API. The backend needs one: there is no default.
	DSN string `json:"dsn,omitempty"`

	// Schema is the PostgreSQL schema that holds the queue's tables,
	// created if missing. Instances share a queue by sharing a database
	// and schema. Default: caddywebhook.
	Schema string `json:"schema,omitempty"`

	// MaxConns caps the connections each Caddy instance opens to
	// PostgreSQL for the queue, besides one more for LISTEN. The store is
	// shared across reloads, so a change takes effect when Caddy restarts.
	// Default: 10.
	MaxConns int `json:"max_conns,omitempty"`

	// StoreTimeout bounds each call on the queue: storing a request's
	// event, a worker's claim, finish or lease extension, an admin read.
	// A request whose event is not stored by then is answered 503 with
	// Retry-After, and the connection that did not answer is closed, not
	// reused; a worker's call is tried again with backoff. Whatever
	// committed despite the timeout is a duplicate on the sender's retry.
	// Keep it well under the senders' own timeouts (GitHub waits 10s).
	// Default: 5s.
	StoreTimeout caddy.Duration `json:"store_timeout,omitempty"`

	dsn string // resolved; never logged
}

// CaddyModule returns the Caddy module information.
func (*Storage) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "webhook.storage.postgres",
		New: func() caddy.Module { return new(Storage) },
	}
}

// Provision resolves the DSN and applies the defaults. It connects to
// nothing.
func (s *Storage) Provision(ctx caddy.Context) error {
	if s.DSN == "" {
		return errors.New("postgres needs a dsn")
	}
	dsn, err := caddywebhook.ResolveSecret(ctx, "dsn", s.DSN)
	if err != nil {
		return err
	}
	s.dsn = dsn
	s.Schema = cmp.Or(s.Schema, postgres.DefaultSchema)
	return nil
}

// Validate checks the numbers.
func (s *Storage) Validate() error {
	switch {
	case s.MaxBatch < 0:
		return fmt.Errorf("max_batch is %d, must not be negative", s.MaxBatch)
	case s.MaxConns < 0:
		return fmt.Errorf("max_conns is %d, must not be negative", s.MaxConns)
	case s.StoreTimeout < 0:
		return fmt.Errorf("store_timeout is %s, must not be negative", time.Duration(s.StoreTimeout))
	}
	return nil
}

// StoreKey implements caddywebhook.Storage: "postgres:" + a fingerprint of
// the DSN (never the DSN) + "/" + schema.
func (s *Storage) StoreKey() string { return "postgres:" + dsnFingerprint(s.dsn) + "/" + s.Schema }

// StoreName implements caddywebhook.Storage: the schema, not the DSN.
func (s *Storage) StoreName() string { return "postgres schema " + s.Schema }

// StoreSettings implements caddywebhook.Storage.
func (s *Storage) StoreSettings() string {
	return fmt.Sprintf("max_conns=%d max_batch=%d store_timeout=%s", s.maxConns(), s.maxBatch(), s.storeTimeout())
}

// ClaimAhead implements caddywebhook.Storage: a shared store leaves the
// jobs a busy pool would claim ahead to idle instances.
func (*Storage) ClaimAhead() bool { return false }

// OpenStore implements caddywebhook.Storage; the store redacts its DSN
// from every error.
func (s *Storage) OpenStore(ctx context.Context, keys queue.Keys) (queue.Store, error) {
	return postgres.Open(ctx, postgres.Config{DSN: s.dsn, Schema: s.Schema, MaxConns: s.maxConns(), MaxBatch: s.maxBatch(),
		Timeout: s.storeTimeout(), Keys: keys})
}

func (s *Storage) storeTimeout() time.Duration {
	return cmp.Or(time.Duration(s.StoreTimeout), postgres.DefaultTimeout)
}

func (s *Storage) maxBatch() int { return cmp.Or(s.MaxBatch, postgres.DefaultMaxBatch) }
func (s *Storage) maxConns() int { return cmp.Or(s.MaxConns, postgres.DefaultMaxConns) }

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

// UnmarshalCaddyfile reads the storage lines of the webhook global option:
//
//	storage postgres <dsn> {   # instances share the queue
//		schema <name>          # default caddywebhook
//		max_conns <n>          # per instance, plus one for LISTEN; default 10
//	}
//	max_batch <n>              # enqueues per commit; default 128 (1: benchmarks only)
//	store_timeout <duration>   # each call on the queue; default 5s
//
// The dispenser holds them in the order written, without the word
// storage. Messages never quote the DSN.
func (s *Storage) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	for d.Next() {
		switch opt := d.Val(); opt {
		case "postgres":
			if !d.AllArgs(&s.DSN) {
				return d.Errf("webhook: storage needs a backend and its location: storage postgres <dsn>")
			}
			if err := s.unmarshalBlock(d); err != nil {
				return err
			}
		case "max_batch":
			n, err := caddyfileopt.Count(d, opt)
			if err != nil {
				return err
			}
			s.MaxBatch = n
		case "store_timeout":
			v, err := caddyfileopt.Duration(d, opt)
			if err != nil {
				return err
			}
			s.StoreTimeout = v
		case "synchronous":
			return d.Errf("webhook: synchronous applies to sqlite only; postgres commits are always flushed")
		case "min_free_space":
			return d.Errf("webhook: min_free_space applies to sqlite only; a postgres server's disk is not Caddy's to measure")
		default:
			return d.Errf("webhook: storage postgres: unknown option %q", opt)
		}
	}
	return nil
}

// unmarshalBlock reads the block of the storage line.
func (s *Storage) unmarshalBlock(d *caddyfile.Dispenser) error {
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch opt := d.Val(); opt {
		case "schema":
			if !d.AllArgs(&s.Schema) {
				return d.Errf("webhook: storage postgres: schema needs one name")
			}
		case "max_conns":
			n, err := caddyfileopt.Count(d, "storage postgres: max_conns")
			if err != nil {
				return err
			}
			s.MaxConns = n
		default:
			return d.Errf("webhook: storage postgres: unknown option %q", opt)
		}
	}
	return nil
}

// Interface guards
var (
	_ caddywebhook.Storage  = (*Storage)(nil)
	_ caddy.Provisioner     = (*Storage)(nil)
	_ caddy.Validator       = (*Storage)(nil)
	_ caddyfile.Unmarshaler = (*Storage)(nil)
)
