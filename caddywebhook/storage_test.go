package caddywebhook

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/postgres"
)

// postgresStorage is the app's storage JSON for the test server: the DSN
// by placeholder, as docs/POSTGRES.md recommends.
func postgresStorage(schema string) map[string]any {
	return map[string]any{"backend": "postgres", "dsn": "{env." + testutil.DSNEnv + "}", "schema": schema}
}

// TestPostgresAppConfigErrors loads configs whose Postgres storage cannot
// open; no message may reveal the DSN.
func TestPostgresAppConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		dsn  string
		want string
	}{
		{"unreachable server", "postgres://leakuser:leak-pass-7@127.0.0.1:1/leakdb?connect_timeout=5", "webhook: open store postgres schema caddywebhook: "},
		{"unparsable dsn", "postgres://leakuser:leak-pass-7@127.0.0.1:notaport/leakdb", "does not parse"},
		{"unknown placeholder", "postgres://leakuser:leak-pass-7@{env.CADDYWEBHOOK_UNSET_VARIABLE}/leakdb", "webhook.storage.postgres: dsn: placeholder {env.CADDYWEBHOOK_UNSET_VARIABLE} is empty or unset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			err := h.loadErr(t, map[string]any{"storage": map[string]any{"backend": "postgres", "dsn": tt.dsn}})
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			for _, leak := range []string{"leakuser", "leak-pass-7", "leakdb", "127.0.0.1"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("error %q reveals %q", err, leak)
				}
			}
			t.Logf("error: %v", err)
			h.stop(t)
			if raw, rerr := os.ReadFile(h.logPath); rerr == nil && strings.Contains(string(raw), "leak-pass-7") {
				t.Error("the log reveals the DSN's password")
			}
		})
	}
}

// TestPostgresAppWrongPassword connects to the test server with a wrong
// password: the server's refusal reaches the config error, scrubbed of the
// user, the password and the address.
func TestPostgresAppWrongPassword(t *testing.T) {
	dsn := testutil.PostgresDSN(t)
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil || u.Scheme == "" {
		t.Skipf("%s is not a URL with a user; this test rewrites its password", testutil.DSNEnv)
	}
	u.User = url.UserPassword(u.User.Username(), "wrong-pass-canary")
	t.Setenv("CADDYWEBHOOK_TEST_WRONG_DSN", u.String())
	h := newHarness(t)
	// A schema named unlike the user (the test server's user is named
	// like the default schema), so the check below can see the user.
	// Nothing is created: the connection is refused.
	err = h.loadErr(t, map[string]any{"storage": map[string]any{"backend": "postgres", "dsn": "{env.CADDYWEBHOOK_TEST_WRONG_DSN}", "schema": "cw_wrong_password"}})
	t.Logf("error: %v", err)
	if !strings.Contains(err.Error(), "password authentication failed") {
		t.Errorf("error %q does not say why", err)
	}
	for _, leak := range []string{"wrong-pass-canary", u.User.Username(), u.Hostname()} {
		if strings.Contains(err.Error(), leak) {
			t.Errorf("error %q reveals %q", err, leak)
		}
	}
}

// TestPostgresAppSharesStoreAcrossReloads runs the app in this process on
// the test server: events are received and delivered, a reload keeps the
// one store (same object, one reference per running config), a second
// schema gets a store of its own, and the last Cleanup releases it.
func TestPostgresAppSharesStoreAcrossReloads(t *testing.T) {
	dsn := testutil.PostgresDSN(t)
	h := newHarness(t)
	schema := testutil.FreshSchema(t, dsn)
	up := newUpstream(t)
	app := func(schema string) map[string]any {
		return map[string]any{"workers": 2, "storage": postgresStorage(schema)}
	}
	h.load(t, app(schema), githubReceiver("gh", httpTarget("", up.url)))

	key := storeKey(t, postgresStorage(schema))
	first := h.store(t)
	if _, ok := first.(*postgres.Store); !ok {
		t.Fatalf("the app's store is a %T, want the Postgres store", first)
	}
	if refs, ok := stores.References(key); !ok || refs != 1 {
		t.Fatalf("usage pool: %d references (loaded %v), want 1", refs, ok)
	}
	if got := h.post(t, "gh", "pg-1", "push", testBody(1)); got != http.StatusAccepted {
		t.Fatalf("status %d, want 202", got)
	}
	if r := up.next(t); r.deliveryID != "pg-1" {
		t.Fatalf("upstream got %q, want pg-1", r.deliveryID)
	}

	// Reload: the new config shares the open store.
	h.load(t, app(schema), githubReceiver("gh", httpTarget("", up.url)))
	if h.store(t) != first {
		t.Error("the reload opened a second store for the same DSN and schema")
	}
	if got := h.post(t, "gh", "pg-2", "push", testBody(2)); got != http.StatusAccepted {
		t.Fatalf("status %d, want 202", got)
	}
	if r := up.next(t); r.deliveryID != "pg-2" {
		t.Fatalf("upstream got %q, want pg-2", r.deliveryID)
	}
	if got := h.post(t, "gh", "pg-1", "push", testBody(1)); got != http.StatusAccepted {
		t.Fatalf("duplicate: status %d, want 202", got)
	}
	s := h.store(t)
	js := jobs(t, s)
	if len(js) != 2 {
		t.Fatalf("%d jobs, want 2 (the duplicate adds none): %+v", len(js), js)
	}
	for _, j := range js {
		waitStatus(t, s, j.ID, queue.StatusDone)
	}

	// Another schema is another queue, so another store.
	other := testutil.FreshSchema(t, dsn)
	h.load(t, app(other), githubReceiver("gh", httpTarget("", up.url)))
	if h.store(t) == first {
		t.Error("a config with another schema got the first schema's store")
	}
	// The old pool drains in the background and then lets the store go.
	testutil.Eventually(t, func() bool {
		_, ok := stores.References(key)
		return !ok
	}, func() string { return "the first schema's store is still in the usage pool after no config uses it" })
	if n := len(jobs(t, h.store(t))); n != 0 {
		t.Errorf("the new schema has %d jobs, want 0", n)
	}

	lines := h.logs(t)
	if !hasLog(lines, func(m map[string]any) bool { return m["msg"] == "delivered" && m["delivery_id"] == "pg-2" }) {
		t.Error("no delivered log line for pg-2")
	}
	raw := h.rawLogs(t)
	assertNoCanaries(t, raw)
	if cfg, err := pgconn.ParseConfig(dsn); err == nil && cfg.Password != "" && strings.Contains(string(raw), cfg.Password) {
		t.Error("the log reveals the DSN's password")
	}
}

// storeKey is the usage-pool key of the store that the storage JSON
// config names, as the app computes it.
func storeKey(t *testing.T, config map[string]any) string {
	t.Helper()
	b, err := json.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := withBackend(b)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	var holder struct {
		Storage json.RawMessage `json:"storage" caddy:"namespace=webhook.storage inline_key=backend"`
	}
	holder.Storage = raw
	mod, err := ctx.LoadModule(&holder, "Storage")
	if err != nil {
		t.Fatal(err)
	}
	return mod.(Storage).StoreKey()
}
