package caddywebhook

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/seal"
)

// EncryptionConfig encrypts what the queue stores: each event's payload
// and headers, and every error text of its jobs and their attempts
// (which may quote an upstream's answer, and so the body), with
// XChaCha20-Poly1305 under the keys listed here. Ids, sources, targets,
// event types, delivery ids, statuses, times and counts stay clear: the
// queue works on them. The first key seals what is written from now on,
// and every listed key opens what was sealed under it; `caddy webhook
// rekey` puts every stored value under the first key, after which an
// older key may be removed (`caddy webhook stats` counts the values under
// each). docs/OPERATIONS.md, "Encryption at rest", says how to make, keep
// and rotate keys, and what stays readable.
type EncryptionConfig struct {
	// Keys are the keys, the first sealing. Each key's value is written as
	// a placeholder, {file.<path>} or {env.<VAR>}, resolved when the
	// config loads: a key written out in the config would be shown by
	// `caddy adapt` and by Caddy's /config endpoint, so a value with no
	// placeholder is refused. Required: at least one.
	Keys []EncryptionKey `json:"keys,omitempty"`

	// DecryptOnly keeps the keys for opening what is stored but writes
	// new values plain: the way out of encryption, with `caddy webhook
	// rekey --to-plain-text`, after which the block can go. Default:
	// false, the first key seals.
	DecryptOnly bool `json:"decrypt_only,omitempty"`

	keys queue.Keys
}

// EncryptionKey is one key of EncryptionConfig.
type EncryptionKey struct {
	// ID names the key in every value sealed under it: 1 to 64 letters,
	// digits, '-', '_' or '.', such as the month it was made (2026-12).
	// Required.
	ID string `json:"id"`

	// Key is 32 random bytes in standard base64, as `openssl rand -base64
	// 32` prints them, given as a placeholder ({file./etc/caddy/webhook-key}
	// or {env.WEBHOOK_KEY}); a trailing newline in the file is ignored.
	// Errors about it name the key's id, never its value. Required.
	Key string `json:"key"`
}

// provision resolves and checks the keys, and builds their ring. Every
// error names the key's id (once the id itself is valid), never its value.
func (e *EncryptionConfig) provision(ctx caddy.Context) error {
	if e == nil {
		return nil
	}
	if len(e.Keys) == 0 {
		return fmt.Errorf("webhook: encryption: no key; list at least one: key <id> {file./path/to/key}")
	}
	keys := make([]seal.Key, 0, len(e.Keys))
	for i, k := range e.Keys {
		if err := seal.CheckKeyID(k.ID); err != nil {
			return fmt.Errorf("webhook: encryption: key %d: %w", i+1, err)
		}
		if !strings.Contains(k.Key, "{") {
			return fmt.Errorf("webhook: encryption: key %s: write its value as a placeholder, {file.<path>} or {env.<VAR>}: a key in the config would be shown by caddy adapt and Caddy's /config", k.ID)
		}
		v, err := ResolveSecret(ctx, "encryption: key "+k.ID, k.Key)
		if err != nil {
			return fmt.Errorf("webhook: %w", err)
		}
		key, err := seal.ParseKey(k.ID, v)
		if err != nil {
			return fmt.Errorf("webhook: encryption: %w", err)
		}
		keys = append(keys, key)
	}
	ring, err := seal.NewRing(keys...)
	if err != nil {
		return fmt.Errorf("webhook: encryption: %w", err)
	}
	e.keys = queue.Keys{Ring: ring, DecryptOnly: e.DecryptOnly}
	return nil
}

// storeKeys returns the keys the store takes: none without an encryption
// block.
func (a *App) storeKeys() queue.Keys {
	if a.Encryption == nil {
		return queue.Keys{}
	}
	return a.Encryption.keys
}

// unmarshalEncryption parses the encryption block of the global option:
//
//	encryption {
//		key <id> <placeholder>     # the first seals; every one opens
//		key <id> <placeholder>
//		decrypt_only               # keys open, nothing new is sealed
//	}
func unmarshalEncryption(d *caddyfile.Dispenser) (*EncryptionConfig, error) {
	if d.NextArg() {
		return nil, d.Errf("webhook: encryption takes a block, not %q", d.Val())
	}
	e := new(EncryptionConfig)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch opt := d.Val(); opt {
		case "key":
			var id, value string
			if !d.AllArgs(&id, &value) {
				// Never quote what was given: it may be a key.
				return nil, d.Errf("webhook: encryption: key needs an id and a placeholder for its value: key <id> {file./path/to/key}")
			}
			e.Keys = append(e.Keys, EncryptionKey{ID: id, Key: value})
		case "decrypt_only":
			if d.NextArg() {
				return nil, d.ArgErr()
			}
			e.DecryptOnly = true
		default:
			return nil, d.Errf("webhook: encryption: unknown option %q (want key or decrypt_only)", opt)
		}
	}
	if len(e.Keys) == 0 {
		return nil, d.Errf("webhook: encryption: no key; list at least one: key <id> {file./path/to/key}")
	}
	return e, nil
}

// useKeys gives a store shared with an earlier config this config's keys.
// It fails, changing nothing, when the store's ordering-key secret is
// under a key this config lacks; the reload then fails and the running
// config keeps its keys.
func (a *App) useKeys(s *sharedStore) error {
	if err := s.SetKeys(a.ctx, a.storeKeys()); err != nil {
		return fmt.Errorf("webhook: encryption: %w (list that key in the encryption block)", err)
	}
	a.setKeys = true
	return nil
}

// restoreKeys gives the store back the keys of the running config when
// this config set its own and never ran: a reload that failed after this
// app's keys were set keeps the running config, keys included.
func (a *App) restoreKeys(s queue.Store) {
	cur := current.Load()
	if cur == nil || cur.Store != s {
		return
	}
	if err := s.SetKeys(context.WithoutCancel(a.ctx), cur.keys); err != nil {
		a.logger.Error("giving the store back the running config's keys", zap.Error(err))
	}
}

// warnKeys logs, when the app starts, what the store holds that its keys
// cannot open or that is still plain, from the store's counts (constant
// time): values under a key the config lacks are not refused (their jobs
// fail by the key's name, and replay once it is back), but said.
func (a *App) warnKeys(ctx context.Context, s queue.Store) {
	st, err := s.Stats(ctx, time.Now())
	if err != nil {
		a.logger.Warn("reading the values under each key", zap.Error(err))
		return
	}
	for _, k := range st.Keys {
		if !k.Listed {
			a.logger.Warn("stored values are sealed under a key the encryption block does not list; their jobs fail by that key's name until it is listed again, and then replay",
				zap.String("key_id", k.KeyID), zap.Int64("values", k.Values))
		}
	}
	keys := a.storeKeys()
	if keys.Sealing() && st.PlainEvents > 0 {
		a.logger.Info("events stored before encryption was turned on are still plain; caddy webhook rekey seals them",
			zap.Int64("plain_events", st.PlainEvents))
	}
	if keys.Sealing() {
		for _, k := range st.Keys {
			if k.KeyID != keys.Ring.Current() && k.Listed {
				a.logger.Info("stored values are sealed under an older key; caddy webhook rekey puts them under the first",
					zap.String("key_id", k.KeyID), zap.Int64("values", k.Values))
			}
		}
	}
}
