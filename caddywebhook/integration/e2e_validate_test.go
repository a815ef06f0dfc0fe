package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// TestValidateChangesNothing runs `caddy validate` on configs whose
// database does not exist yet (invariant 11): it succeeds, and leaves no
// SQLite file (nor its directory, -wal or -shm) and no PostgreSQL schema.
// Validating a config in CI with a newer build must not migrate the
// production database.
func TestValidateChangesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Caddy; skipped with -short")
	}
	site := receiver("/hooks/github", "github", "github", "{env.E2E_GITHUB_SECRET}", toHTTP("http://127.0.0.1:9/unused"))
	tests := []struct {
		name string
		// storage is the webhook app's storage line, and check what
		// must still not exist afterwards.
		setup func(t *testing.T, c *caddyInstance) (storage string, check func(t *testing.T))
	}{
		{"sqlite", func(t *testing.T, c *caddyInstance) (string, func(t *testing.T)) {
			dir := filepath.Join(c.dir, "not-yet")
			path := filepath.Join(dir, "queue.db")
			return "storage sqlite " + path, func(t *testing.T) {
				for _, p := range []string{dir, path, path + "-wal", path + "-shm"} {
					if _, err := os.Stat(p); !os.IsNotExist(err) {
						t.Errorf("%s exists after validate (stat: %v)", p, err)
					}
				}
			}
		}},
		{"postgres", func(t *testing.T, c *caddyInstance) (string, func(t *testing.T)) {
			dsn := testutil.PostgresDSN(t)
			schema := testutil.FreshSchema(t, dsn)
			// Caddy inherits the test's environment, the DSN with it.
			return fmt.Sprintf("storage postgres {env.%s} {\n\tschema %s\n}", testutil.DSNEnv, schema), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
				defer cancel()
				conn, err := pgx.Connect(ctx, dsn)
				if err != nil {
					t.Fatalf("connect to the test server: %v", err)
				}
				defer conn.Close(context.Background())
				var n int
				if err := conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1`, schema).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n != 0 {
					t.Errorf("schema %s exists after validate", schema)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCaddy(t)
			storage, check := tt.setup(t, c)
			text := c.Caddyfile(caddyConfig{Site: site})
			// The harness's storage line is the instance's SQLite file.
			text = strings.Replace(text, "storage sqlite "+c.DBPath, strings.ReplaceAll(storage, "\n", "\n\t\t"), 1)
			path := c.writeCaddyfile(t, text)
			out, err := c.caddyCmd(t, "validate", "--config", path)
			if err != nil {
				t.Fatalf("caddy validate: %v\n%s", err, out)
			}
			if !strings.Contains(out, "Valid configuration") {
				t.Errorf("caddy validate said:\n%s", out)
			}
			check(t)
			if _, err := os.Stat(c.DBPath); !os.IsNotExist(err) {
				t.Errorf("the harness's database %s exists after validate", c.DBPath)
			}
		})
	}
}

// TestReloadNewEnvironmentVariable: a config that names a variable set
// after Caddy started fails to reload with an error that says why (the
// running Caddy reads the environment it started with) and what to do, and
// the running config keeps receiving.
func TestReloadNewEnvironmentVariable(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Caddy; skipped with -short")
	}
	t.Parallel()
	up := newUpstream(t, always(200))
	c := newCaddy(t)
	c.start(t, caddyConfig{Site: receiver("/hooks/github", "github", "github", "{env.E2E_GITHUB_SECRET}", toHTTP(up.URL("/hook")))})

	// As an operator who exports the variable in the shell after Caddy
	// started and reloads from that shell.
	c.Env = append(c.Env, "E2E_ADDED_AFTER_START="+githubSecret)
	path := c.writeConfig(t, caddyConfig{Site: receiver("/hooks/github", "github", "github", "{env.E2E_ADDED_AFTER_START}", toHTTP(up.URL("/hook")))})
	out, err := c.caddyCmd(t, "reload", "--config", path, "--address", c.AdminAddr)
	if err == nil {
		t.Fatalf("caddy reload succeeded with a variable the running Caddy does not have:\n%s", out)
	}
	for _, want := range []string{"{env.E2E_ADDED_AFTER_START} is empty or unset", "the environment Caddy was started with", "restart", "{file.…}"} {
		if !strings.Contains(out, want) {
			t.Errorf("caddy reload's error lacks %q:\n%s", want, out)
		}
	}
	body := payload("reload-env-1", "push")
	if status, resp := post(t, c.URL("/hooks/github"), signGitHub(githubSecret, "reload-env-1", "push", body), body); status != 202 {
		t.Errorf("after the failed reload: %d %s, want 202 from the running config", status, resp)
	}
}
