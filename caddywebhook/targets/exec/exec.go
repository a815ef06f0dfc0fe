// Package exectarget is the webhook.targets.exec module: it delivers a
// webhook by running a program, without a shell.
package exectarget

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddywebhook/caddywebhook/caddywebhook"
	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/caddyfileopt"
	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/forward"
	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/tracecontext"
	"github.com/caddywebhook/caddywebhook/queue"
)

func init() {
	caddy.RegisterModule(Target{})
}

const (
	// defaultTimeout is the default time a program may run.
	defaultTimeout = time.Minute
	// tailLen is how much of a program's output is kept: its last
	// words, which are where scripts say what went wrong.
	tailLen = 2 << 10
	// waitDelay bounds the wait for the pipes after the process group
	// is gone, for a descendant that escaped the group (setsid) and still
	// holds them, and the wait for the program to die once killed.
	waitDelay = 2 * time.Second
)

// baseEnv lists the variables a program inherits from Caddy unless
// inherit_env is set: enough to find programs, write temporary files and
// print text, nothing that happens to be in Caddy's environment (such as the
// secrets its config reads through {env.*}).
var baseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR"}

// jobPlaceholders are the per-delivery jobPlaceholders allowed in args.
var jobPlaceholders = []string{
	"webhook.event_type",
	"webhook.delivery_id",
	"webhook.source",
	"webhook.target",
	"webhook.attempt",
	"webhook.replay",
	"webhook.job_id",
}

// Target delivers a webhook by running a program, without a shell: the
// payload on its standard input, the metadata in its environment
// (WEBHOOK_DELIVERY_ID, WEBHOOK_SOURCE, WEBHOOK_EVENT_TYPE, WEBHOOK_ATTEMPT,
// WEBHOOK_REPLAY, WEBHOOK_JOB_ID, WEBHOOK_TARGET, WEBHOOK_CONTENT_TYPE) and,
// if the args ask for them, in its arguments. WEBHOOK_ATTEMPT keeps
// counting across replays; WEBHOOK_REPLAY is the number of replays, 0 on a
// first delivery. An event that arrived in a trace sets TRACEPARENT (the
// event's trace id, a span id new for each attempt) and TRACESTATE, the
// OpenTelemetry environment carrier; otherwise neither is set, not even
// from Caddy's own environment.
//
// Exit status 0 means done; an exit status listed in permanent_exit_codes
// parks the job as dead; any other status, a death by signal or a timeout is
// retried. The last 2 KiB of the program's combined standard output and
// standard error become the job's last error.
//
// The program runs in its own process group. When it times out or the
// delivery is cancelled (shutdown, lost lease) the whole group is killed
// with SIGKILL, and so is whatever the program leaves running in its group
// when it exits. A descendant that left the group (setsid, a daemon's
// double fork) is found on Linux by the token in WEBHOOK_EXEC_RUN, an
// environment variable every run gets and its descendants inherit: after
// the run, every process that started after the program and carries the
// run's token is killed too. What is not reaped: on other Unix systems, a
// descendant outside the group; everywhere, one that replaced its
// environment (env -i) or changed its user. A program that must start a
// long-lived service hands it to a service manager.
type Target struct {
	// The program to run: an absolute path, a relative path with a slash
	// (taken from Caddy's working directory), or a name looked up in
	// Caddy's PATH. It is resolved when the config loads, and a program
	// that is missing or not executable is a config error, however it is
	// written: install the program before the config that names it. One
	// removed after the config loaded fails its deliveries, which are
	// retried. Required.
	Command string `json:"command,omitempty"`

	// The program's arguments. Each may contain {webhook.event_type},
	// {webhook.delivery_id}, {webhook.source}, {webhook.target},
	// {webhook.attempt}, {webhook.replay} and {webhook.job_id}, and Caddy's global
	// jobPlaceholders such as {env.*}; they expand within their argument, so
	// an argument stays exactly one argument whatever a sender put in the
	// event type or delivery id, and nothing is interpreted by a shell. An
	// argument that is only a placeholder can still begin with "-" and look
	// like an option to the program: write "--event={webhook.event_type}",
	// or put "--" before such arguments, when the program parses options.
	// Default: none.
	Args []string `json:"args,omitempty"`

	// How long the program may run before its process group is killed and
	// the attempt counts as failed. Default: 1m.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	// The program's working directory. Default: Caddy's.
	Dir string `json:"dir,omitempty"`

	// Extra environment variables; jobPlaceholders in values are resolved
	// when the config loads. Names starting with WEBHOOK_ are reserved for
	// the metadata. A value of 8 bytes or more is replaced by [redacted]
	// where the program's output repeats it in the job's last error.
	// Default: none.
	Env map[string]string `json:"env,omitempty"`

	// Exit statuses (1 to 255) that mean no retry can help, such as 65
	// (bad data) or 78 (config error) from sysexits.h. Default: none, every
	// failure is retried.
	PermanentExitCodes []int `json:"permanent_exit_codes,omitempty"`

	// Pass Caddy's whole environment to the program. Default: false, the
	// program sees only PATH, HOME, USER, LOGNAME, LANG, LC_ALL, TZ and
	// TMPDIR from Caddy's environment, plus env and the metadata.
	InheritEnv bool `json:"inherit_env,omitempty"`

	path   string   // the resolved program
	env    []string // the environment before the metadata
	redact []string // env values never to repeat in an error
}

// CaddyModule returns the Caddy module information.
func (Target) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "webhook.targets.exec",
		New: func() caddy.Module { return new(Target) },
	}
}

// Provision resolves the program and the environment and applies defaults.
func (t *Target) Provision(ctx caddy.Context) error {
	if err := supported(); err != nil {
		return err
	}
	if t.Timeout == 0 {
		t.Timeout = caddy.Duration(defaultTimeout)
	}
	if t.Command == "" {
		return errors.New("command: required")
	}
	path, err := resolveProgram(t.Command)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, exec.ErrNotFound) {
		return fmt.Errorf("command: program %q does not exist", t.Command)
	}
	if err != nil {
		return fmt.Errorf("command: %w", err)
	}
	t.path = path

	var env []string
	if t.InheritEnv {
		// Caddy's own trace context, if it was started inside one, is not
		// the delivery's: metadataEnv sets the delivery's, or none.
		env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
			return strings.HasPrefix(kv, caddywebhook.EnvTraceparent+"=") || strings.HasPrefix(kv, caddywebhook.EnvTracestate+"=")
		})
	} else {
		for _, name := range baseEnv {
			if v, ok := os.LookupEnv(name); ok {
				env = append(env, name+"="+v)
			}
		}
	}
	t.redact = nil
	// Sorted so the environment does not depend on map order.
	for _, name := range slices.Sorted(maps.Keys(t.Env)) {
		v, err := caddywebhook.ResolveSecret(ctx, "env: "+name, t.Env[name])
		if err != nil {
			return err
		}
		env = append(env, name+"="+v)
		// env is where a program's token lives, often from {env.*}; a
		// script that traces its commands (set -x) or dumps its
		// environment on failure must not get it into the job's last
		// error. Short values are left alone, as the http target does.
		if len(v) >= 8 {
			t.redact = append(t.redact, v)
		}
	}
	t.env = env
	return nil
}

// resolveProgram finds the program the way a shell would, but only once, and
// refuses a program found through a relative PATH entry.
func resolveProgram(command string) (string, error) {
	path, err := exec.LookPath(command)
	if err != nil {
		if errors.Is(err, exec.ErrDot) {
			return "", fmt.Errorf("%q found only through a relative PATH entry; give an absolute path", command)
		}
		return "", err
	}
	if strings.ContainsRune(command, filepath.Separator) && !filepath.IsAbs(path) {
		// The program's dir must not change which program runs.
		return filepath.Abs(path)
	}
	return path, nil
}

// Validate checks the timeout, the environment, the exit codes and the
// jobPlaceholders in args.
func (t *Target) Validate() error {
	if t.Timeout < 0 {
		return errors.New("timeout: must not be negative")
	}
	for name := range t.Env {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			return fmt.Errorf("env: invalid variable name %q", name)
		}
		if strings.HasPrefix(name, "WEBHOOK_") {
			return fmt.Errorf("env: %s: the WEBHOOK_ prefix is reserved for the delivery's metadata", name)
		}
		if name == caddywebhook.EnvTraceparent || name == caddywebhook.EnvTracestate {
			return fmt.Errorf("env: %s is reserved for the delivery's trace context", name)
		}
		if strings.ContainsRune(t.Env[name], 0) {
			return fmt.Errorf("env: %s: value contains a NUL byte", name)
		}
	}
	for _, code := range t.PermanentExitCodes {
		if code < 1 || code > 255 {
			return fmt.Errorf("permanent_exit_codes: %d is not an exit status from 1 to 255", code)
		}
	}
	// A misspelt placeholder would otherwise reach the program as literal
	// text, at every delivery.
	repl := replacer(&queue.Job{})
	for _, arg := range t.Args {
		_, err := repl.ReplaceFunc(arg, func(key string, val any) (any, error) {
			if strings.HasPrefix(key, "webhook.") && !slices.Contains(jobPlaceholders, key) {
				return nil, fmt.Errorf("args: unknown placeholder {%s}", key)
			}
			return val, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// replacer knows Caddy's global jobPlaceholders and the job's metadata.
func replacer(job *queue.Job) *caddy.Replacer {
	repl := caddy.NewReplacer()
	repl.Set("webhook.event_type", job.EventType)
	repl.Set("webhook.delivery_id", job.DeliveryID)
	repl.Set("webhook.source", job.Source)
	repl.Set("webhook.target", job.Target)
	repl.Set("webhook.attempt", strconv.Itoa(job.Attempt))
	repl.Set("webhook.replay", strconv.Itoa(job.Replays))
	repl.Set("webhook.job_id", strconv.FormatInt(job.ID, 10))
	return repl
}

// Deliver runs the program once (see Target).
func (t *Target) Deliver(ctx context.Context, job *queue.Job) error {
	// A delivery id or event type read from a JSON body may hold a NUL,
	// which no argument or environment variable can carry: every start
	// would fail, so say so once instead of retrying for hours.
	if strings.IndexByte(job.DeliveryID, 0) >= 0 {
		return queue.Permanent(errors.New("start program: delivery id has a NUL byte and cannot be passed to a program"))
	}
	if strings.IndexByte(job.EventType, 0) >= 0 {
		return queue.Permanent(errors.New("start program: event type has a NUL byte and cannot be passed to a program"))
	}
	repl := replacer(job)
	args := make([]string, len(t.Args))
	for i, arg := range t.Args {
		// One pass: a value is never scanned for jobPlaceholders again, so a
		// delivery id of "{env.SECRET}" stays that text.
		args[i] = repl.ReplaceKnown(arg, "")
	}

	runCtx, cancel := context.WithTimeout(ctx, time.Duration(t.Timeout))
	defer cancel()

	cmd := exec.CommandContext(runCtx, t.path, args...)
	cmd.Dir = t.Dir
	cmd.Env = append(slices.Clip(t.env), metadataEnv(ctx, job)...)
	cmd.WaitDelay = waitDelay
	isolate(cmd)

	var out outputTail
	wait, err := start(cmd, job.Payload, &out)
	if err != nil {
		return err
	}
	err = wait()
	// The exit code is kept with the attempt, exit 0 too; a program
	// killed by a signal has none (ExitCode is -1).
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		job.Code = queue.CodeOf(0)
	case errors.As(err, &exitErr) && exitErr.ExitCode() >= 0:
		job.Code = queue.CodeOf(exitErr.ExitCode())
	}

	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		// The pool cancelled the delivery (shutdown, lost lease).
		return t.failure(fmt.Sprintf("cancelled: %v", ctx.Err()), &out)
	case runCtx.Err() != nil:
		return t.failure(fmt.Sprintf("timed out after %s", time.Duration(t.Timeout)), &out)
	}
	if exitErr != nil {
		failure := t.failure(exitErr.Error(), &out)
		if code := exitErr.ExitCode(); code > 0 && slices.Contains(t.PermanentExitCodes, code) {
			return queue.Permanent(failure)
		}
		return failure
	}
	return t.failure(fmt.Sprintf("wait for program: %v", err), &out)
}

// start starts cmd with pipes of our own for its input and its combined
// output, rather than os/exec's, so that waiting returns when the program
// exits, before anything it left behind is killed; with os/exec's copying
// goroutines, Wait would first wait for every descendant holding a pipe.
// payload goes to the program's input, its output into out. The returned
// wait waits for the program, kills what it left running in its group,
// stops reading the pipes and returns cmd.Wait's error.
func start(cmd *exec.Cmd, payload []byte, out *outputTail) (wait func() error, err error) {
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("create stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, fmt.Errorf("create output pipe: %w", err)
	}
	cmd.Stdin = stdinR
	cmd.Stdout = outW
	cmd.Stderr = outW
	token := runToken()
	cmd.Env = append(slices.Clip(cmd.Env), runEnv+"="+token)
	err = cmd.Start()
	stdinR.Close()
	outW.Close()
	if err != nil {
		stdinW.Close()
		outR.Close()
		// Missing, not executable, or a bad dir: perhaps fixed by the
		// next deploy, so retried.
		return nil, fmt.Errorf("start program: %w", err)
	}
	// The program is ours until Wait, a zombie at worst, so its start
	// time can be read now; its descendants start no earlier.
	started, traced := startTime(cmd.Process.Pid)

	var wg sync.WaitGroup
	wg.Go(func() {
		// A program that exits without reading its input makes this fail
		// with EPIPE, which is its business.
		_, _ = stdinW.Write(payload)
		stdinW.Close()
	})
	wg.Go(func() { _, _ = io.Copy(out, outR) })
	return func() error {
		defer outR.Close()
		err := cmd.Wait()
		// Whatever the program left running in its group goes with it,
		// and so do its descendants that left the group.
		killGroup(cmd.Process.Pid)
		if traced {
			killMarked(token, started)
		}
		// With the group gone the pipes close, unless a process escaped
		// the group (setsid) and holds them: stop waiting for it after a
		// while.
		deadline := time.Now().Add(waitDelay)
		_ = outR.SetReadDeadline(deadline)
		_ = stdinW.SetWriteDeadline(deadline)
		wg.Wait()
		return err
	}, nil
}

// failure builds the error text "<what>: <output tail>", trimming the tail
// from the front so the whole text fits in a job's last error and the
// program's last words survive. The output goes through queue.SafeText,
// which keeps its lines and drops the rune the ring may have cut at the
// start, so an escape sequence or a NUL in it cannot reach a terminal, a
// log or the store.
func (t *Target) failure(what string, out *outputTail) error {
	tail := forward.RedactSecrets(queue.SafeText(string(out.Bytes()), 0), t.redact)
	if tail == "" {
		return errors.New(what)
	}
	room := max(queue.MaxErrorLen-len(what)-len(": "), 0)
	if len(tail) > room {
		// SafeText again drops the rune this cut may split.
		tail = queue.SafeText(tail[len(tail)-room:], 0)
	}
	return errors.New(what + ": " + tail)
}

// metadataEnv is the delivery's metadata, and its trace context if it has
// one, as environment variables.
func metadataEnv(ctx context.Context, job *queue.Job) []string {
	var contentType string
	for _, h := range job.Headers {
		if strings.EqualFold(h.Name, "Content-Type") {
			contentType = h.Value
			break
		}
	}
	env := []string{
		"WEBHOOK_DELIVERY_ID=" + job.DeliveryID,
		"WEBHOOK_SOURCE=" + job.Source,
		"WEBHOOK_EVENT_TYPE=" + job.EventType,
		"WEBHOOK_ATTEMPT=" + strconv.Itoa(job.Attempt),
		"WEBHOOK_REPLAY=" + strconv.Itoa(job.Replays),
		"WEBHOOK_JOB_ID=" + strconv.FormatInt(job.ID, 10),
		"WEBHOOK_TARGET=" + job.Target,
		"WEBHOOK_CONTENT_TYPE=" + contentType,
	}
	if parent, state := tracecontext.Traceparent(ctx); parent != "" {
		env = append(env, caddywebhook.EnvTraceparent+"="+parent)
		if state != "" {
			env = append(env, caddywebhook.EnvTracestate+"="+state)
		}
	}
	return env
}

// outputTail keeps the last tailLen bytes written to it, in a fixed ring,
// however much a program prints. Deliver's one copying goroutine is its only
// writer, and Bytes is read after that goroutine has ended, so it needs no
// lock.
type outputTail struct {
	buf  [tailLen]byte
	next int  // where the next byte goes
	full bool // the ring has wrapped
}

// Write implements io.Writer; it never fails.
func (w *outputTail) Write(p []byte) (int, error) {
	n := len(p)
	if n >= len(w.buf) {
		copy(w.buf[:], p[n-len(w.buf):])
		w.next, w.full = 0, true
		return n, nil
	}
	c := copy(w.buf[w.next:], p)
	copy(w.buf[:], p[c:])
	if w.next+n >= len(w.buf) {
		w.full = true
	}
	w.next = (w.next + n) % len(w.buf)
	return n, nil
}

// Bytes returns the kept tail, oldest byte first.
func (w *outputTail) Bytes() []byte {
	if !w.full {
		return slices.Clone(w.buf[:w.next])
	}
	return append(slices.Clone(w.buf[w.next:]), w.buf[:w.next]...)
}

// UnmarshalCaddyfile sets up the target from Caddyfile tokens. The dispenser
// starts at the kind token:
//
//	exec <command> [<args…>] {
//		timeout <duration>
//		dir <path>
//		env <name> <value>
//		permanent_exit_codes <codes…>
//		inherit_env
//	}
//
// env and permanent_exit_codes may be repeated. Arguments may use the
// {webhook.*} jobPlaceholders; each stays one argument.
func (t *Target) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the kind, "exec"
	if !d.NextArg() {
		return d.Errf("exec target: missing the command")
	}
	t.Command = d.Val()
	t.Args = d.RemainingArgs()
	for d.NextBlock(0) {
		switch opt := d.Val(); opt {
		case "timeout":
			dur, err := caddyfileopt.Timeout(d, "exec")
			if err != nil {
				return err
			}
			t.Timeout = dur
		case "dir":
			args := d.RemainingArgs()
			if len(args) != 1 {
				return d.Errf("exec target: dir: takes one path")
			}
			t.Dir = args[0]
		case "env":
			args := d.RemainingArgs()
			if len(args) != 2 {
				return d.Errf("exec target: env: takes a name and a value")
			}
			if t.Env == nil {
				t.Env = make(map[string]string)
			}
			t.Env[args[0]] = args[1]
		case "permanent_exit_codes":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.Errf("exec target: permanent_exit_codes: missing the exit codes")
			}
			for _, a := range args {
				code, err := strconv.Atoi(a)
				if err != nil || code < 1 || code > 255 {
					return d.Errf("exec target: permanent_exit_codes: %q is not an exit status from 1 to 255", a)
				}
				t.PermanentExitCodes = append(t.PermanentExitCodes, code)
			}
		case "inherit_env":
			if d.NextArg() {
				return d.Errf("exec target: inherit_env: takes no arguments")
			}
			t.InheritEnv = true
		default:
			return d.Errf("exec target: unknown option %q", opt)
		}
	}
	return nil
}

// Interface guards.
var (
	_ caddy.Provisioner     = (*Target)(nil)
	_ caddy.Validator       = (*Target)(nil)
	_ caddyfile.Unmarshaler = (*Target)(nil)
	_ caddywebhook.Target   = (*Target)(nil)
)
