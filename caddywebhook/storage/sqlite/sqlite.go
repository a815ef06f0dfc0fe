// Package sqlitestorage is the webhook.storage.sqlite module: the queue in
// a SQLite file that one Caddy owns.
package sqlitestorage

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddywebhook/caddywebhook/caddywebhook"
	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/caddyfileopt"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/sqlite"
)

func init() {
	caddy.RegisterModule(new(Storage))
}

// Storage keeps the queue in a SQLite file: one Caddy, a local file, the
// default backend.
type Storage struct {
	// Path is the SQLite file; placeholders such as {env.X} are expanded.
	// Default: <caddy data dir>/webhook/queue.db.
	Path string `json:"path,omitempty"`

	// Synchronous is SQLite's durability: "full" makes an accepted event
	// (answered 202) survive power loss, "normal" only a crash of Caddy.
	// The database handle is shared across reloads, so a change takes
	// effect when Caddy restarts. Default: full.
	Synchronous string `json:"synchronous,omitempty"`

	// MaxBatch caps how many writes (enqueues, claims, finishes) one
	// transaction groups under one commit. 1 commits each on its own, the
	// one-row-per-commit design this project replaces: there for
	// benchmarks (the load test's baseline phase), slower under load with
	// no gain in durability. Takes effect when Caddy restarts. Default:
	// 256.
	MaxBatch int `json:"max_batch,omitempty"`

	// MinFreeSpace is the free space, in bytes, that ingest leaves on the
	// file's filesystem. While less is free, the receiver answers 503
	// disk_low (with Retry-After) and stores nothing, so the claims,
	// finishes and purges that drain the backlog still have room to
	// commit; acceptance resumes by itself once an eighth more than
	// MinFreeSpace is free, so a disk at the edge does not flap. Free space
	// is measured with statfs at most every 100ms (sooner after a quarter
	// of the reserve in payloads), on Linux, macOS and FreeBSD; elsewhere
	// nothing is refused. At least 16 MiB, the WAL's size limit. Takes
	// effect when Caddy restarts. Default: 64 MiB.
	MinFreeSpace int64 `json:"min_free_space,omitempty"`

	// StoreTimeout bounds how long each write on the queue waits for the
	// writer: storing a request's event, a worker's claim, finish or lease
	// extension. A request whose event is not committed by then (a disk
	// that stalled) is answered 503 with Retry-After; a worker's call is
	// tried again with backoff. Whatever committed despite the timeout is
	// a duplicate on the sender's retry. Keep it well under the senders'
	// own timeouts (GitHub waits 10s). Default: 5s.
	StoreTimeout caddy.Duration `json:"store_timeout,omitempty"`

	path string // absolute, placeholders resolved
}

// CaddyModule returns the Caddy module information.
func (*Storage) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "webhook.storage.sqlite",
		New: func() caddy.Module { return new(Storage) },
	}
}

// Provision resolves the path and applies the defaults. It opens nothing.
func (s *Storage) Provision(ctx caddy.Context) error {
	s.Synchronous = cmp.Or(s.Synchronous, sqlite.DefaultSynchronous)
	path := filepath.Join(caddy.AppDataDir(), "webhook", "queue.db")
	if s.Path != "" {
		var err error
		if path, err = caddywebhook.ResolveSecret(ctx, "path", s.Path); err != nil {
			return err
		}
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("path: %w", err)
	}
	s.path = path
	return nil
}

// Validate checks the durability and the batch size.
func (s *Storage) Validate() error {
	if s.Synchronous != "full" && s.Synchronous != "normal" {
		return fmt.Errorf("synchronous %q is not full or normal", s.Synchronous)
	}
	if s.MaxBatch < 0 {
		return fmt.Errorf("max_batch is %d, must not be negative", s.MaxBatch)
	}
	if s.StoreTimeout < 0 {
		return fmt.Errorf("store_timeout is %s, must not be negative", time.Duration(s.StoreTimeout))
	}
	if m := s.minFreeSpace(); m < sqlite.MinFreeSpaceFloor {
		return fmt.Errorf("min_free_space is %d bytes, must be at least %d (16 MiB, the WAL's size limit)", m, sqlite.MinFreeSpaceFloor)
	}
	return nil
}

// StoreKey implements caddywebhook.Storage: "sqlite:" + the absolute path.
func (s *Storage) StoreKey() string { return "sqlite:" + s.path }

// StoreName implements caddywebhook.Storage: the path.
func (s *Storage) StoreName() string { return s.path }

// StoreSettings implements caddywebhook.Storage.
func (s *Storage) StoreSettings() string {
	return fmt.Sprintf("synchronous=%s max_batch=%d min_free_space=%d store_timeout=%s", s.Synchronous, s.maxBatch(), s.minFreeSpace(), s.storeTimeout())
}

// ClaimAhead implements caddywebhook.Storage: the file is this Caddy's
// alone.
func (*Storage) ClaimAhead() bool { return true }

// OpenStore implements caddywebhook.Storage; it creates the file's
// directory (0700) when missing.
func (s *Storage) OpenStore(ctx context.Context, keys queue.Keys) (queue.Store, error) {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return nil, fmt.Errorf("create storage directory: %w", err)
	}
	return sqlite.Open(ctx, sqlite.Config{Path: s.path, Synchronous: s.Synchronous, MaxBatch: s.maxBatch(), MinFreeSpace: s.minFreeSpace(),
		Timeout: s.storeTimeout(), Keys: keys})
}

func (s *Storage) storeTimeout() time.Duration {
	return cmp.Or(time.Duration(s.StoreTimeout), sqlite.DefaultTimeout)
}

func (s *Storage) maxBatch() int { return cmp.Or(s.MaxBatch, sqlite.DefaultMaxBatch) }

func (s *Storage) minFreeSpace() int64 {
	return cmp.Or(s.MinFreeSpace, sqlite.DefaultMinFreeSpace)
}

// UnmarshalCaddyfile reads the storage lines of the webhook global option:
//
//	storage sqlite <path>      # default: <caddy data dir>/webhook/queue.db
//	synchronous full|normal    # default full
//	max_batch <n>              # writes per commit; default 256 (1: benchmarks only)
//	min_free_space <size>      # 503 disk_low below this much free; default 64MiB
//	store_timeout <duration>   # each write on the queue; default 5s
//
// The dispenser holds them in the order written, without the word
// storage.
func (s *Storage) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	for d.Next() {
		switch opt := d.Val(); opt {
		case "sqlite":
			if !d.AllArgs(&s.Path) {
				return d.Errf("webhook: storage sqlite needs one path")
			}
			if d.NextBlock(d.Nesting()) {
				return d.Errf("webhook: storage sqlite takes no block")
			}
		case "synchronous":
			if !d.AllArgs(&s.Synchronous) {
				return d.Errf("webhook: synchronous needs one argument: full or normal")
			}
		case "max_batch":
			n, err := caddyfileopt.Count(d, opt)
			if err != nil {
				return err
			}
			s.MaxBatch = n
		case "min_free_space":
			// The floor is checked by Validate.
			n, err := caddyfileopt.Size(d, "webhook", opt, "64MiB", math.MaxInt64)
			if err != nil {
				return err
			}
			s.MinFreeSpace = n
		case "store_timeout":
			v, err := caddyfileopt.Duration(d, opt)
			if err != nil {
				return err
			}
			s.StoreTimeout = v
		default:
			return d.Errf("webhook: storage sqlite: unknown option %q", opt)
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
