package testutil

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
)

// fakeTB records how a helper ended a test: Fatal and Skip stop the
// calling goroutine as testing.T's do, and the message is kept.
type fakeTB struct {
	testing.TB
	mu      sync.Mutex
	ended   string // "", "fatal" or "skip"
	message string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) end(how string, args ...any) {
	f.mu.Lock()
	f.ended, f.message = how, fmt.Sprint(args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fakeTB) Fatal(args ...any)                 { f.end("fatal", args...) }
func (f *fakeTB) Fatalf(format string, args ...any) { f.end("fatal", fmt.Sprintf(format, args...)) }
func (f *fakeTB) Skip(args ...any)                  { f.end("skip", args...) }

// run calls fn with a fakeTB on its own goroutine, as testing runs a test,
// and returns the fakeTB once fn has returned or ended the test.
func run(t *testing.T, fn func(tb testing.TB)) *fakeTB {
	t.Helper()
	f := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f
}

func TestPostgresDSN(t *testing.T) {
	tests := []struct {
		name      string
		dsn, ci   string
		want      string
		wantEnded string
	}{
		{"set", "postgres://u@h/db", "", "postgres://u@h/db", ""},
		{"set in CI", "postgres://u@h/db", "true", "postgres://u@h/db", ""},
		{"missing: skip", "", "", "", "skip"},
		{"missing in CI: fail", "", "true", "", "fatal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(DSNEnv, tt.dsn)
			t.Setenv("CI", tt.ci)
			var got string
			f := run(t, func(tb testing.TB) { got = PostgresDSN(tb) })
			if got != tt.want || f.ended != tt.wantEnded {
				t.Fatalf("PostgresDSN = %q, ended %q; want %q, ended %q", got, f.ended, tt.want, tt.wantEnded)
			}
			if f.ended != "" && !strings.Contains(f.message, ".ci/start-postgres") {
				t.Errorf("message %q does not say how to get a server", f.message)
			}
		})
	}
}

func TestEventuallyWithin(t *testing.T) {
	tests := []struct {
		name      string
		holdsFrom int // the call from which cond holds; 0: never
		wantFatal bool
	}{
		{"holds at once", 1, false},
		{"holds at the third check", 3, false},
		{"never holds", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			cond := func() bool { calls++; return tt.holdsFrom > 0 && calls >= tt.holdsFrom }
			f := run(t, func(tb testing.TB) {
				EventuallyWithin(tb, 10*PollInterval, cond, func() string { return "the condition" })
			})
			if got := f.ended == "fatal"; got != tt.wantFatal {
				t.Fatalf("failed: %v, want %v (after %d checks)", got, tt.wantFatal, calls)
			}
			if tt.wantFatal && !strings.Contains(f.message, "the condition") {
				t.Errorf("message %q does not carry what()", f.message)
			}
			if !tt.wantFatal && calls != tt.holdsFrom {
				t.Errorf("%d checks, want %d", calls, tt.holdsFrom)
			}
		})
	}
}

func TestReceive(t *testing.T) {
	ch := make(chan int) // unbuffered: Receive waits for the sender
	go func() { ch <- 7 }()
	if got := Receive(t, ch); got != 7 {
		t.Fatalf("Receive = %d, want 7", got)
	}
}

func TestFreshSchema(t *testing.T) {
	dsn := PostgresDSN(t)
	var schema string
	t.Run("use", func(t *testing.T) {
		schema = FreshSchema(t, dsn)
		if !strings.HasPrefix(schema, "test_") || len(schema) != len("test_")+12 {
			t.Fatalf("schema name %q", schema)
		}
		if exists(t, dsn, schema) {
			t.Fatalf("schema %s exists before the test created it", schema)
		}
		conn := connect(t, dsn)
		if _, err := conn.Exec(t.Context(), "CREATE SCHEMA "+schema+"; CREATE TABLE "+schema+".t (x int)"); err != nil {
			t.Fatal(err)
		}
	})
	if exists(t, dsn, schema) {
		t.Errorf("schema %s left behind after its test ended", schema)
	}
	if other := FreshSchema(t, dsn); other == schema {
		t.Errorf("FreshSchema returned %s twice", schema)
	}
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(t.Context()) })
	return conn
}

func exists(t *testing.T, dsn, schema string) bool {
	t.Helper()
	var ok bool
	err := connect(t, dsn).QueryRow(t.Context(), "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&ok)
	if err != nil {
		t.Fatalf("look for schema %s: %v", schema, err)
	}
	return ok
}
