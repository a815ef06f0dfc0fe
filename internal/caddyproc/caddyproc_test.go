package caddyproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// The tests run this test binary as the process, standing in for Caddy:
// with helperEnv set, TestMain plays the part it names instead of running
// the tests. It is a real process, started, signalled and read from /proc
// as Caddy is; building Caddy itself is left to the suites that run it.
const (
	helperEnv      = "CADDYPROC_TEST_HELPER"
	helperAdminEnv = "CADDYPROC_TEST_ADMIN"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		helper(mode, os.Getenv(helperAdminEnv))
		return
	}
	os.Exit(m.Run())
}

// helper plays a process: "serve" answers GET /config/ on the admin
// address, says it is ready on stdout and exits 0 on SIGTERM; "stubborn"
// does the same but ignores SIGTERM; "exit" fails at once; "mute" never
// gets ready.
func helper(mode, admin string) {
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	switch mode {
	case "exit":
		fmt.Println("no config")
		os.Exit(3)
	case "mute":
		<-terms
		os.Exit(0)
	}
	ln, err := net.Listen("tcp", admin)
	if err != nil {
		os.Exit(4)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /config/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "{}") })
	go http.Serve(ln, mux)
	fmt.Println("Ready! Forwarding")
	for range terms {
		if mode != "stubborn" {
			os.Exit(0)
		}
	}
}

// setup returns the config of a helper process in mode, with a log in a
// new directory and a free admin address.
func setup(t *testing.T, mode string) Config {
	t.Helper()
	admin := testutil.FreeAddr(t)
	return Config{
		Bin:          os.Args[0],
		Env:          append(os.Environ(), helperEnv+"="+mode, helperAdminEnv+"="+admin),
		LogPath:      filepath.Join(t.TempDir(), "caddy.log"),
		Admin:        admin,
		StartTimeout: testutil.WaitTimeout,
	}
}

func TestStartStop(t *testing.T) {
	cfg := setup(t, "serve")
	cfg.ReadyText = "Ready! Forwarding"
	p, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	if !p.Running() || p.Pid() <= 0 {
		t.Fatalf("running %v, pid %d after Start", p.Running(), p.Pid())
	}
	if out, err := p.Admin().Call(t.Context(), http.MethodGet, "/config/", nil); err != nil || string(out) != "{}" {
		t.Errorf("GET /config/ = %q, %v", out, err)
	}
	if _, err := p.Admin().Call(t.Context(), http.MethodGet, "/nope", nil); err == nil || !strings.Contains(err.Error(), "GET /nope: 404") {
		t.Errorf("GET /nope: %v, want an error quoting the 404", err)
	}
	if rss, _, err := p.Memory(); err != nil || rss <= 0 {
		t.Errorf("Memory = %d, %v", rss, err)
	}
	if _, err := p.CPUTime(); err != nil {
		t.Errorf("CPUTime: %v", err)
	}
	if err := p.Wait(10 * time.Millisecond); !errors.Is(err, ErrRunning) {
		t.Errorf("Wait on a running process = %v, want ErrRunning", err)
	}
	if err := p.Stop(testutil.WaitTimeout); err != nil {
		t.Errorf("Stop = %v, want a clean exit", err)
	}
	if p.Running() {
		t.Error("running after Stop")
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Errorf("a signal to an exited process: %v, want it left alone", err)
	}
}

func TestStartFails(t *testing.T) {
	tests := []struct {
		name    string
		mode    string
		timeout time.Duration
		want    string
	}{
		{"exits first", "exit", 0, "exited before it was ready (exit status 3)"},
		{"never ready", "mute", 300 * time.Millisecond, "not ready after 300ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := setup(t, tt.mode)
			if tt.timeout > 0 {
				cfg.StartTimeout = tt.timeout
			}
			p, err := Start(t.Context(), cfg)
			if err == nil {
				p.Kill()
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Start: %v, want %q", err, tt.want)
			}
		})
	}
}

// TestStopKills: a process that ignores SIGTERM is killed when the wait
// ends, and Stop says so.
func TestStopKills(t *testing.T) {
	p, err := Start(t.Context(), setup(t, "stubborn"))
	if err != nil {
		t.Fatal(err)
	}
	err = p.Stop(300 * time.Millisecond)
	if !errors.Is(err, ErrRunning) || !strings.Contains(err.Error(), "killed") {
		t.Errorf("Stop = %v, want ErrRunning and killed", err)
	}
	select {
	case <-p.Done():
	default:
		t.Error("the process is still running after Stop")
	}
}

// TestLogAppended: a restart's output follows the run before in the same
// log.
func TestLogAppended(t *testing.T) {
	cfg := setup(t, "serve")
	for range 2 {
		p, err := Start(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Stop(testutil.WaitTimeout); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(cfg.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "Ready! Forwarding"); n != 2 {
		t.Errorf("log has %d runs' output, want 2:\n%s", n, b)
	}
}
