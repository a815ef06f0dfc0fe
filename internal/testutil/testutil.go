// Package testutil holds the helpers the tests of every package share, so
// each is written once: the PostgreSQL server the tests run against and a
// fresh schema on it, and bounded waits for what another goroutine or
// process does. It is imported by _test.go files only.
package testutil

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DSNEnv names the variable that points the Postgres tests at a server;
// .ci/start-postgres exports it.
const DSNEnv = "CADDYWEBHOOK_TEST_POSTGRES_DSN"

// Bounds of the waits. They end a test whose code hangs; a test whose code
// works never reaches them, so they are generous: the machine may be shared.
const (
	// WaitTimeout bounds Eventually and Receive.
	WaitTimeout = 20 * time.Second
	// PollInterval spaces the checks of Eventually's condition.
	PollInterval = 20 * time.Millisecond
)

// PostgresDSN returns the test server's DSN from DSNEnv. Without one the
// test is skipped with the way to get one, except in CI (CI=true), where
// the Postgres tests must run: there a missing DSN fails the test.
func PostgresDSN(tb testing.TB) string {
	tb.Helper()
	if dsn := os.Getenv(DSNEnv); dsn != "" {
		return dsn
	}
	const how = DSNEnv + ` is not set; start a local PostgreSQL and run the tests with: eval "$(.ci/start-postgres)" && go test <package>`
	if os.Getenv("CI") == "true" {
		tb.Fatal(how + " (CI=true: the Postgres tests must run, not skip)")
	}
	tb.Skip(how)
	return ""
}

// SchemaName returns a schema name no test has used: "test_" and twelve
// random hex digits, safe to splice into SQL unquoted.
func SchemaName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "test_" + hex.EncodeToString(b[:])
}

// FreshSchema returns a schema name no test has used, for the code under
// test to create (the stores migrate the schema they are given, and the
// migration tests need one that does not exist yet), and drops the schema
// with everything in it when tb ends. Cleanups run last in, first out:
// call it before starting what uses the schema, so the drop comes after
// that has stopped.
func FreshSchema(tb testing.TB, dsn string) string {
	tb.Helper()
	schema := SchemaName()
	tb.Cleanup(func() {
		// tb's context is canceled by now.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			tb.Errorf("drop schema %s: connect: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// FreshSchemaPrefix returns a prefix no test has used (SchemaName and an
// underscore), for code under test that names schemas of its own with it
// (the load test's phases), and drops every schema whose name starts with
// it when tb ends, whatever the run left. Call it before starting what
// makes the schemas, so the drop comes after that has stopped.
func FreshSchemaPrefix(tb testing.TB, dsn string) string {
	tb.Helper()
	prefix := SchemaName() + "_"
	tb.Cleanup(func() {
		// tb's context is canceled by now.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			tb.Errorf("drop schemas %s*: connect: %v", prefix, err)
			return
		}
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, `SELECT nspname FROM pg_namespace WHERE starts_with(nspname, $1)`, prefix)
		if err != nil {
			tb.Errorf("list schemas %s*: %v", prefix, err)
			return
		}
		schemas, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			tb.Errorf("list schemas %s*: %v", prefix, err)
			return
		}
		for _, s := range schemas {
			if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{s}.Sanitize()+" CASCADE"); err != nil {
				tb.Errorf("drop schema %s: %v", s, err)
			}
		}
	})
	return prefix
}

// Eventually checks cond every PollInterval until it holds, and fails tb
// with what() once WaitTimeout has passed. It is for state the test cannot
// be told about (another process, a database another goroutine writes);
// where a channel can say it, use Receive.
func Eventually(tb testing.TB, cond func() bool, what func() string) {
	tb.Helper()
	EventuallyWithin(tb, WaitTimeout, cond, what)
}

// EventuallyWithin is Eventually with a bound of timeout instead of
// WaitTimeout, for a wait known to be longer (a load run draining).
func EventuallyWithin(tb testing.TB, timeout time.Duration, cond func() bool, what func() string) {
	tb.Helper()
	deadline := time.After(timeout)
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			tb.Fatalf("timed out after %s: %s", timeout, what())
		}
	}
}

// Receive returns the next value on ch, and fails tb if none comes within
// WaitTimeout.
func Receive[T any](tb testing.TB, ch <-chan T) T {
	tb.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(WaitTimeout):
		tb.Fatalf("nothing received in %s", WaitTimeout)
		panic("unreachable")
	}
}
