// Package caddyproc builds Caddy with the plugin and runs it as a process
// of its own: `caddy run` on a config, or one of its subcommands such as
// `caddy webhook listen`. The separate-process suites
// (caddywebhook/integration) and the load test (cmd/webhook-loadtest)
// share it, so a Caddy is built, started, waited for, stopped, asked
// through its admin API and read from /proc one way.
package caddyproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Build builds ./cmd/caddy, Caddy with the plugin, of the module that
// holds the working directory into dir and returns the binary's path. With
// race it is built with the race detector, which slows Caddy down several
// times.
func Build(ctx context.Context, dir string, race bool) (string, error) {
	// go test puts its own toolchain's bin directory first in PATH, so
	// the go found here is the one running the tests.
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("build caddy: find the go command: %w", err)
	}
	out, err := exec.CommandContext(ctx, goTool, "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("build caddy: find module root: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("build caddy: find module root: not inside the caddywebhook module")
	}
	bin := filepath.Join(dir, "caddy")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.CommandContext(ctx, goTool, append(args, "./cmd/caddy")...)
	cmd.Dir = filepath.Dir(gomod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build caddy: %w\n%s", err, out)
	}
	return bin, nil
}

// Config says what to run and when it counts as started.
type Config struct {
	// Bin is the Caddy binary.
	Bin string
	// Args follow the binary: "run", "--config", path; or a subcommand.
	Args []string
	// Dir is the working directory; "" keeps this process's.
	Dir string
	// Env is the whole environment; nil keeps this process's.
	Env []string
	// LogPath is the file that takes the process's stdout and stderr. It
	// is appended to, so a restart's output follows the run before.
	LogPath string
	// Admin, when set, is the host:port of the process's admin API:
	// Start returns once GET /config/ answers 200 there.
	Admin string
	// HTTP, when set, is a host:port Start also waits for to accept a
	// connection: the site the config serves.
	HTTP string
	// ReadyText, when set, is a line part Start waits for in the log,
	// for a subcommand that says when it is ready.
	ReadyText string
	// StartTimeout bounds the wait. Default: 30s.
	StartTimeout time.Duration
}

// pollEvery spaces the checks of a process that is starting. Another
// process gives no readiness signal of its own, so its state is polled.
const pollEvery = 20 * time.Millisecond

// ErrRunning is what Wait returns when the process outlives its wait.
var ErrRunning = errors.New("still running")

// Process is one run of a Caddy binary.
type Process struct {
	cmd     *exec.Cmd
	logPath string
	admin   Admin
	done    chan struct{} // closed once the process has exited
	err     error         // cmd.Wait's result, once done is closed
	mu      sync.Mutex    // serializes signals with the exit
}

// Start runs cfg.Bin with cfg.Args and returns once the process is ready
// as cfg says: its admin API answers, its site accepts, its log holds
// cfg.ReadyText. A process that exits first, does not get ready within
// cfg.StartTimeout, or whose wait ctx ends, is killed and an error
// returned; its log is kept.
func Start(ctx context.Context, cfg Config) (*Process, error) {
	logf, err := os.OpenFile(cfg.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open caddy log: %w", err)
	}
	cmd := exec.Command(cfg.Bin, cfg.Args...)
	cmd.Dir, cmd.Env = cfg.Dir, cfg.Env
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start caddy: %w", err)
	}
	p := &Process{cmd: cmd, logPath: cfg.LogPath, admin: Admin(cfg.Admin), done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		logf.Close()
		p.mu.Lock()
		p.err = err
		close(p.done)
		p.mu.Unlock()
	}()
	timeout := cfg.StartTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	deadline := time.After(timeout)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for !p.ready(ctx, cfg) {
		select {
		case <-p.done:
			return nil, fmt.Errorf("start caddy: exited before it was ready (%v)", p.err)
		case <-ctx.Done():
			p.Kill()
			return nil, fmt.Errorf("start caddy: %w", ctx.Err())
		case <-deadline:
			p.Kill()
			return nil, fmt.Errorf("start caddy: not ready after %s", timeout)
		case <-tick.C:
		}
	}
	return p, nil
}

// ready checks each of cfg's conditions once.
func (p *Process) ready(ctx context.Context, cfg Config) bool {
	if cfg.Admin != "" {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		status, _, err := p.admin.Do(ctx, "GET", "/config/", nil)
		cancel()
		if err != nil || status != 200 {
			return false
		}
	}
	if cfg.HTTP != "" {
		conn, err := net.DialTimeout("tcp", cfg.HTTP, time.Second)
		if err != nil {
			return false
		}
		conn.Close()
	}
	if cfg.ReadyText != "" {
		b, err := os.ReadFile(cfg.LogPath)
		if err != nil || !bytes.Contains(b, []byte(cfg.ReadyText)) {
			return false
		}
	}
	return true
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Admin is the process's admin API, "" when the config has none.
func (p *Process) Admin() Admin { return p.admin }

// LogPath is the file its output goes to.
func (p *Process) LogPath() string { return p.logPath }

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Running reports whether the process has not exited.
func (p *Process) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Signal sends sig to the process; one that has exited is left alone.
func (p *Process) Signal(sig os.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.Running() {
		return nil
	}
	return p.cmd.Process.Signal(sig)
}

// Wait waits up to timeout for the process to exit and returns its exit
// error (nil for a clean exit), or ErrRunning.
func (p *Process) Wait(timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return p.err
	case <-t.C:
		return fmt.Errorf("caddy %w after %s", ErrRunning, timeout)
	}
}

// Stop stops the process as an operator does, with SIGTERM (Caddy stops
// its apps, and the webhook pool gets its grace period), and waits up to
// timeout for it to exit; then it kills it. It returns the exit error, or
// an error saying that it was killed.
func (p *Process) Stop(timeout time.Duration) error {
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop caddy: %w", err)
	}
	err := p.Wait(timeout)
	if errors.Is(err, ErrRunning) {
		p.Kill()
		return fmt.Errorf("stop caddy: %w; killed", err)
	}
	return err
}

// Kill ends the process with SIGKILL and waits for it.
func (p *Process) Kill() {
	_ = p.Signal(syscall.SIGKILL)
	<-p.done
}
