package caddywebhook

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddywebhook/caddywebhook/queue"
)

// Storage is a module in the webhook.storage namespace: the database the
// queue lives in. Modules are named webhook.storage.<backend>, each in its
// own package under caddywebhook/storage, and are chosen in JSON by the
// storage object's "backend" key (sqlite when absent). A module resolves
// its secret-bearing fields with ResolveSecret in Provision, checks them in
// Validate and opens nothing until OpenStore: `caddy validate` provisions
// too and must change nothing on disk or in a database.
//
// Its Caddyfile unmarshaler sees the storage lines of the webhook global
// option, in the order written, without the word storage: the storage line
// `<backend> <location> [{ … }]`, when given, and each storage option
// written beside it in the webhook block (synchronous, max_batch), one a
// line. It rejects the options that do not apply to its backend.
type Storage interface {
	// StoreKey is the store's key in the pool of stores shared across
	// reloads: the backend's name and where it is, such as
	// "sqlite:" + absolute path. Like StoreName it must reveal no secret
	// (a DSN goes in as a keyed fingerprint).
	StoreKey() string
	// StoreName describes the store in logs and errors without a secret:
	// the SQLite path, or the Postgres schema.
	StoreName() string
	// StoreSettings are the options that only take effect when the store
	// is opened, to warn when a reload changes them.
	StoreSettings() string
	// ClaimAhead reports whether the pool may claim jobs for workers that
	// are still busy. Only for a store one Caddy owns: jobs claimed ahead
	// wait for no one but this pool's workers, where a shared store leaves
	// them to idle instances instead.
	ClaimAhead() bool
	// OpenStore opens the store with the keys of the config's encryption
	// block (none without one); a store shared across reloads is given a
	// later config's keys through queue.Store's SetKeys. Its errors say
	// nothing the config must keep secret.
	OpenStore(ctx context.Context, keys queue.Keys) (queue.Store, error)
}

// defaultBackend is the storage backend of a config that names none.
const defaultBackend = "sqlite"

// storageNamespace is the namespace of the storage modules.
const storageNamespace = "webhook.storage"

// withBackend returns the storage JSON raw with its backend key set to the
// default when it has none, so that configs written before storage was a
// module namespace ({"path": …}) still load. The backend it names must be
// registered; the message lists those that are.
func withBackend(raw json.RawMessage) (json.RawMessage, error) {
	obj := make(map[string]json.RawMessage)
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &obj); err != nil {
			return nil, fmt.Errorf("webhook: storage: %w", err)
		}
	}
	backend := defaultBackend
	if b, ok := obj["backend"]; ok {
		if err := json.Unmarshal(b, &backend); err != nil {
			return nil, fmt.Errorf("webhook: storage: backend is not a string")
		}
	} else {
		obj["backend"], _ = json.Marshal(backend)
	}
	if _, err := caddy.GetModule(storageNamespace + "." + backend); err != nil {
		return nil, unknownBackend(backend)
	}
	return json.Marshal(obj)
}

// unknownBackend is the error for a storage backend no module registers.
// A Caddy with none was built with the plugin's package alone, not with the
// module root that imports the backends and target kinds: it says so.
func unknownBackend(backend string) error {
	known := knownBackends()
	if known == "" {
		return fmt.Errorf("webhook: storage: unknown backend %q: this Caddy has no storage backend; %s", backend, buildHint)
	}
	return fmt.Errorf("webhook: storage: unknown backend %q (want %s)", backend, known)
}

// pluginModule is the Go module that registers every module of the plugin.
const pluginModule = "github.com/caddywebhook/caddywebhook"

// buildHint says how to build a Caddy that has the plugin's storage
// backends and target kinds, for the errors of one that lacks them.
const buildHint = "build this Caddy with the module root, xcaddy build --with " + pluginModule

// knownBackends lists the registered storage backends, the default first,
// for messages; "" when there are none.
func knownBackends() string {
	var names []string
	for _, m := range caddy.GetModules(storageNamespace) {
		names = append(names, m.ID.Name())
	}
	slices.SortStableFunc(names, func(a, b string) int {
		switch {
		case a == b:
			return 0
		case a == defaultBackend:
			return -1
		case b == defaultBackend:
			return 1
		}
		return strings.Compare(a, b)
	})
	return strings.Join(names, " or ")
}

// storageTokens gathers the storage lines of the webhook global option for
// the storage module's Caddyfile unmarshaler.
type storageTokens struct {
	backend string // "" until a storage line is read
	// tokens are the storage line `<backend> <location> [{ … }]` and the
	// storage options beside it (synchronous, max_batch), in the order
	// written, which keeps each on its own line for the module's
	// dispenser.
	tokens []caddyfile.Token
}

// storageLine reads `storage <backend> <location> [{ … }]`, the dispenser
// on its option name. It never quotes the location, a DSN.
func (st *storageTokens) storageLine(d *caddyfile.Dispenser) error {
	if st.backend != "" {
		return d.Errf("webhook: storage is given twice")
	}
	seg := d.NextSegment()
	check := caddyfile.NewDispenser(seg)
	check.Next()
	var backend, location string
	if !check.AllArgs(&backend, &location) {
		return d.Errf("webhook: storage needs a backend and its location: storage sqlite <path> or storage postgres <dsn>")
	}
	if _, err := caddy.GetModule(storageNamespace + "." + backend); err != nil {
		return d.Err(unknownBackend(backend).Error())
	}
	st.backend = backend
	st.tokens = append(st.tokens, seg[1:]...)
	return nil
}

// option keeps one storage option's line, the dispenser on its name.
func (st *storageTokens) option(d *caddyfile.Dispenser) {
	st.tokens = append(st.tokens, d.NextSegment()...)
}

// json runs the storage module's unmarshaler over the gathered lines and
// returns the storage JSON, nil when there were none. Without a storage
// line the default backend reads the options, and the JSON names no
// backend, as it did before storage was a module namespace.
func (st *storageTokens) json() (json.RawMessage, error) {
	if len(st.tokens) == 0 {
		return nil, nil
	}
	backend := cmp.Or(st.backend, defaultBackend)
	mod, err := caddy.GetModule(storageNamespace + "." + backend)
	if err != nil {
		return nil, unknownBackend(backend)
	}
	val := mod.New()
	unm, ok := val.(caddyfile.Unmarshaler)
	if !ok {
		return nil, fmt.Errorf("webhook: storage %s has no Caddyfile syntax; configure it in JSON", backend)
	}
	if err := unm.UnmarshalCaddyfile(caddyfile.NewDispenser(st.tokens)); err != nil {
		return nil, err
	}
	body := caddyconfig.JSON(val, nil)
	if st.backend == "" {
		return body, nil
	}
	// The backend key first, then the module's fields in their order, as
	// the Caddyfile adapter has always written them.
	head := fmt.Sprintf(`{"backend":%q`, backend)
	if string(body) == "{}" {
		return json.RawMessage(head + "}"), nil
	}
	return json.RawMessage(head + "," + string(body[1:])), nil
}
