package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/caddywebhook/caddywebhook/queue"
)

func TestRedact(t *testing.T) {
	const dsn = "postgres://hookuser:s3cr3t-pw@db.internal:5432/hooksdb?sslmode=require"
	tests := []struct {
		name string
		in   string
		want string
	}{
		{
			"connect error with server message",
			"failed to connect to `user=hookuser database=hooksdb`: 10.1.2.3:5432 (db.internal): server error: FATAL: password authentication failed for user \"hookuser\" (SQLSTATE 28P01)",
			"connect to database: server error: FATAL: password authentication failed for user \"<redacted>\" (SQLSTATE 28P01)",
		},
		{
			"dial error",
			"failed to connect to `user=hookuser database=hooksdb`: [fd00::1]:5432 (db.internal): dial error: dial tcp [fd00::1]:5432: connect: connection refused",
			"connect to database: dial error: dial tcp <redacted>:5432: connect: connection refused",
		},
		{
			"several addresses",
			"failed to connect to `user=hookuser database=hooksdb`:\n\t10.1.2.3:5432 (db.internal): timeout\n\t10.1.2.4:5432 (db.internal): timeout",
			"connect to database:\n\ttimeout\n\ttimeout",
		},
		{
			"database name in a server message",
			`claim: FATAL: database "hooksdb" does not exist (SQLSTATE 3D000)`,
			`claim: FATAL: database "<redacted>" does not exist (SQLSTATE 3D000)`,
		},
		{"the DSN itself", "open: bad dsn " + dsn, "open: bad dsn <redacted>"},
		{"password anywhere", "x s3cr3t-pw y", "x <redacted> y"},
		{"password inside a word", "xs3cr3t-pwy", "x<redacted>y"},
		{"parts of words stay", "hookusers and hooksdb_old", "hookusers and hooksdb_old"},
		{"nothing to redact", "get job: job not found", "get job: job not found"},
	}
	r := NewRedactor(dsn)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.Redact(tt.in); got != tt.want {
				t.Errorf("Redact(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestRedactPassword covers the password in every spelling and from every
// place pgconn takes it, and what RedactPassword leaves alone.
func TestRedactPassword(t *testing.T) {
	tests := []struct {
		name     string
		dsn      string
		env      string // PGPASSWORD
		text     string
		want     string
		password string // must not be in the result of either method
	}{
		{"url dsn in a command line", "postgres://u:s3cret-pw@127.0.0.1:5432/db?sslmode=disable", "",
			"command: -dsn postgres://u:s3cret-pw@127.0.0.1:5432/db?sslmode=disable -d 1s",
			"command: -dsn " + Redacted + " -d 1s", "s3cret-pw"},
		{"password alone", "postgres://u:s3cret-pw@127.0.0.1/db", "",
			`connect: password "s3cret-pw" refused`, `connect: password "` + Redacted + `" refused`, "s3cret-pw"},
		{"percent-encoded password", "postgres://u:p%40ss%2Fw0rd@h/db", "",
			"raw p%40ss%2Fw0rd decoded p@ss/w0rd", "raw " + Redacted + " decoded " + Redacted, "p@ss/w0rd"},
		{"key=value dsn", "host=h user=u password=kv-secret dbname=db", "",
			"dsn host=h user=u password=kv-secret dbname=db; again kv-secret",
			"dsn " + Redacted + "; again " + Redacted, "kv-secret"},
		{"password from PGPASSWORD", "postgres://u@h/db", "env-secret",
			"auth env-secret failed", "auth " + Redacted + " failed", "env-secret"},
		{"unparsable url dsn still loses its password", "postgres://u:raw-secret@h:notaport/db", "",
			"bad raw-secret", "bad " + Redacted, "raw-secret"},
		{"no password leaves user and host alone", "postgres://u@h/db", "",
			"user u on host h", "user u on host h", ""},
		{"no dsn redacts nothing", "", "", "anything at all", "anything at all", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("PGPASSWORD", tt.env)
			t.Setenv("PGPASSFILE", filepath.Join(t.TempDir(), "none"))
			r := NewRedactor(tt.dsn)
			if got := r.RedactPassword(tt.text); got != tt.want {
				t.Errorf("RedactPassword(%q) = %q, want %q", tt.text, got, tt.want)
			}
			if tt.password != "" && strings.Contains(r.Redact(tt.text), tt.password) {
				t.Errorf("Redact(%q) = %q still holds the password", tt.text, r.Redact(tt.text))
			}
			err := r.Error(fmt.Errorf("wrapped: %s: %w", tt.text, context.Canceled))
			if tt.password != "" && strings.Contains(err.Error(), tt.password) {
				t.Errorf("Error() = %q still holds the password", err)
			}
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Error() no longer unwraps to its cause")
			}
		})
	}
	var none *Redactor
	if got := none.Redact("x"); got != "x" || none.RedactPassword("y") != "y" || none.Error(nil) != nil {
		t.Errorf("a nil Redactor changed its input")
	}
	if NewRedactor("postgres://u:p@h/db").Error(nil) != nil {
		t.Error("Error(nil) is not nil")
	}
}

// TestOpenErrorsRedacted opens stores that cannot connect, on the test
// server and beside it: the error says why, unwraps to pgx's error, and
// holds nothing of the DSN.
func TestOpenErrorsRedacted(t *testing.T) {
	u, err := url.Parse(testutil.PostgresDSN(t))
	if err != nil || u.User == nil || u.Scheme == "" {
		t.Skipf("%s is not a URL with a user; this test rewrites its password and port", testutil.DSNEnv)
	}
	wrongPassword := *u
	wrongPassword.User = url.UserPassword(u.User.Username(), "wrong-pass-canary")
	wrongHost := *u
	wrongHost.User = url.UserPassword("leakuser", "leak-pass-7")
	wrongHost.Host = "127.0.0.1:1"
	wrongHost.Path = "/leakdb"
	tests := []struct {
		name  string
		dsn   string
		why   string   // the error must say this
		leaks []string // and none of these
	}{
		{"wrong password", wrongPassword.String(), "password authentication failed",
			[]string{"wrong-pass-canary", u.User.Username(), u.Hostname()}},
		{"nothing listening", wrongHost.String(), "connection refused",
			[]string{"leak-pass-7", "leakuser", "leakdb", "127.0.0.1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			// A schema named unlike the user (the test server's user may
			// be named like the default schema), so the check can see the
			// user. Nothing is created: the connection is refused.
			s, err := Open(ctx, Config{DSN: tt.dsn, Schema: "cw_redact_test"})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			t.Logf("error: %v", err)
			if !strings.Contains(err.Error(), tt.why) {
				t.Errorf("error %q does not say %q", err, tt.why)
			}
			for _, leak := range tt.leaks {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("error %q reveals %q", err, leak)
				}
			}
			var pgErr *pgconn.ConnectError
			if !errors.As(err, &pgErr) {
				t.Errorf("error %T does not unwrap to pgx's", err)
			}
		})
	}
}

// TestStoreErrorsRedacted checks the boundary where an open store's
// errors leave pgx: the password is gone, the sentinels stay.
func TestStoreErrorsRedacted(t *testing.T) {
	s := setup(t)
	cfg, err := pgconn.ParseConfig(s.cfg.DSN)
	if err != nil || cfg.Password == "" {
		t.Skipf("%s has no password to leak", testutil.DSNEnv)
	}
	err = s.fail("claim", fmt.Errorf("server said %q: %w", cfg.Password, context.DeadlineExceeded))
	if strings.Contains(err.Error(), cfg.Password) {
		t.Errorf("error %q holds the password", err)
	}
	if !strings.HasPrefix(err.Error(), "claim: ") || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %q lost its operation or its cause", err)
	}
	if _, err := s.GetJob(t.Context(), 424242); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("GetJob of a missing job: %v, want queue.ErrNotFound", err)
	}
	if err := s.Replay(t.Context(), 424242); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("Replay of a missing job: %v, want queue.ErrNotFound", err)
	}
}
