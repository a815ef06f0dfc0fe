package exectarget

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddywebhook/caddywebhook/caddywebhook/targets/targettest"
	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
)

// execTestProgram is the absolute path of a test program in testdata.
func execTestProgram(t *testing.T, name string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// execTestSetup provisions and validates tgt.
func execTestSetup(t *testing.T, tgt *Target) *Target {
	t.Helper()
	if err := targettest.Provision(t, tgt); err != nil {
		t.Fatal(err)
	}
	return tgt
}

// execTestRecorder is a target running target_record.sh with args, and the
// directory where the program leaves its record.
func execTestRecorder(t *testing.T, args ...string) (*Target, string) {
	t.Helper()
	dir := t.TempDir()
	tgt := execTestSetup(t, &Target{
		Command: execTestProgram(t, "target_record.sh"),
		Args:    args,
		Env:     map[string]string{"RECORD_DIR": dir},
	})
	return tgt, dir
}

// execTestRead reads a file the test program wrote.
func execTestRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the program's record: %v", err)
	}
	return b
}

// execTestSplit0 splits NUL-terminated records.
func execTestSplit0(b []byte) []string {
	s := strings.TrimSuffix(string(b), "\x00")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}

// execTestEnv reads the environment the program recorded.
func execTestEnv(t *testing.T, dir string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, kv := range execTestSplit0(execTestRead(t, filepath.Join(dir, "env"))) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}

// execTestGone waits until the process pid has exited (is gone or a zombie
// waiting for init), failing the test if it is still running after a while.
func execTestGone(t *testing.T, pid int) {
	t.Helper()
	testutil.Eventually(t, func() bool {
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if errors.Is(err, os.ErrNotExist) {
			return true
		}
		// pid (comm) state …; comm may contain spaces, so look after ")".
		i := bytes.LastIndexByte(stat, ')')
		return err == nil && i >= 0 && len(stat) > i+2 && stat[i+2] == 'Z'
	}, func() string { return fmt.Sprintf("process %d still running", pid) })
}

// execTestPid waits for the pid file a test program writes.
func execTestPid(t *testing.T, path string) int {
	t.Helper()
	var b []byte
	testutil.Eventually(t, func() bool {
		var err error
		b, err = os.ReadFile(path)
		return err == nil
	}, func() string { return "the program did not write " + path })
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %s: %v", path, err)
	}
	return pid
}

func TestTargetPayloadOnStdin(t *testing.T) {
	tgt, dir := execTestRecorder(t)
	job := targettest.Job("exec")
	job.Payload = make([]byte, 1<<20) // more than a pipe holds
	for i := range job.Payload {
		job.Payload[i] = byte(i * 7)
	}
	if err := tgt.Deliver(t.Context(), job); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if got := execTestRead(t, filepath.Join(dir, "stdin")); !bytes.Equal(got, job.Payload) {
		t.Errorf("stdin: got %d bytes, want the %d-byte payload", len(got), len(job.Payload))
	}
}

func TestTargetEnvironment(t *testing.T) {
	t.Setenv("CADDYWEBHOOK_TEST_LEAK", "from caddy")
	t.Setenv("CADDYWEBHOOK_TEST_GREETING", "hello")
	tests := []struct {
		name       string
		inheritEnv bool
		wantLeak   bool
	}{
		{name: "minimal environment by default", inheritEnv: false, wantLeak: false},
		{name: "inherit_env passes Caddy's", inheritEnv: true, wantLeak: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tgt := execTestSetup(t, &Target{
				Command: execTestProgram(t, "target_record.sh"),
				Env: map[string]string{
					"RECORD_DIR": dir,
					"GREETING":   "{env.CADDYWEBHOOK_TEST_GREETING}, world",
				},
				InheritEnv: tt.inheritEnv,
			})
			job := targettest.Job("exec")
			job.Attempt, job.Replays = 3, 1
			if err := tgt.Deliver(t.Context(), job); err != nil {
				t.Fatalf("Deliver: %v", err)
			}
			env := execTestEnv(t, dir)
			want := map[string]string{
				"WEBHOOK_DELIVERY_ID":  job.DeliveryID,
				"WEBHOOK_SOURCE":       "github",
				"WEBHOOK_EVENT_TYPE":   "push",
				"WEBHOOK_ATTEMPT":      "3",
				"WEBHOOK_REPLAY":       "1",
				"WEBHOOK_JOB_ID":       "42",
				"WEBHOOK_TARGET":       "exec",
				"WEBHOOK_CONTENT_TYPE": "application/json",
				"GREETING":             "hello, world",
				"PATH":                 os.Getenv("PATH"),
			}
			for k, v := range want {
				if got, ok := env[k]; !ok || got != v {
					t.Errorf("%s = %q (set: %v), want %q", k, got, ok, v)
				}
			}
			if _, leaked := env["CADDYWEBHOOK_TEST_LEAK"]; leaked != tt.wantLeak {
				t.Errorf("CADDYWEBHOOK_TEST_LEAK passed: %v, want %v", leaked, tt.wantLeak)
			}
		})
	}
}

func TestTargetArgsCannotInject(t *testing.T) {
	t.Setenv("CADDYWEBHOOK_TEST_SECRET", "must-not-appear")
	tmp := t.TempDir()
	pwned := filepath.Join(tmp, "pwned")
	tgt, dir := execTestRecorder(t,
		"--event", "{webhook.event_type}",
		"{webhook.delivery_id}",
		"source={webhook.source}",
		"{webhook.target}",
		"attempt={webhook.attempt}",
		"job={webhook.job_id}",
		"{env.CADDYWEBHOOK_TEST_GREETING_UNSET}",
		"{webhook.event_type} {webhook.source}",
	)
	job := targettest.Job("exec")
	job.EventType = "--help"
	job.DeliveryID = "x; touch " + pwned + " $(touch " + pwned + "2) `touch " + pwned + "3` && echo '\"' | sh"
	job.Source = `src with spaces 'single' "double" $HOME`
	job.Target = "{env.CADDYWEBHOOK_TEST_SECRET}" // a value is never expanded again
	job.Attempt = 2

	if err := tgt.Deliver(t.Context(), job); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	got := execTestSplit0(execTestRead(t, filepath.Join(dir, "args")))
	want := []string{
		"--event", "--help",
		job.DeliveryID,
		"source=" + job.Source,
		"{env.CADDYWEBHOOK_TEST_SECRET}",
		"attempt=2",
		"job=42",
		"",
		"--help " + job.Source,
	}
	if len(got) != len(want) {
		t.Fatalf("args = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("arg %d = %q, want %q", i+1, got[i], want[i])
		}
	}
	for _, suffix := range []string{"", "2", "3"} {
		if _, err := os.Stat(pwned + suffix); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists: an argument was interpreted", pwned+suffix)
		}
	}
	if env := execTestEnv(t, dir); env["WEBHOOK_DELIVERY_ID"] != job.DeliveryID {
		t.Errorf("WEBHOOK_DELIVERY_ID = %q, want %q", env["WEBHOOK_DELIVERY_ID"], job.DeliveryID)
	}
}

// TestTargetNULInMetadata: a delivery id or event type with a NUL (a
// JSON "\u0000") cannot reach a program as an argument or a variable. The
// job is parked at once, with the reason, instead of failing every retry.
func TestTargetNULInMetadata(t *testing.T) {
	tests := []struct {
		name       string
		deliveryID string
		eventType  string
		wantErr    string
	}{
		{"NUL in the delivery id", "evt\x001", "push", "delivery id"},
		{"NUL in the event type", "evt-1", "push\x00--help", "event type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tgt, dir := execTestRecorder(t, "{webhook.delivery_id}", "{webhook.event_type}")
			job := targettest.Job("exec")
			job.DeliveryID, job.EventType = tt.deliveryID, tt.eventType
			err := tgt.Deliver(t.Context(), job)
			if !queue.IsPermanent(err) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Deliver = %v, want a permanent error naming the %s", err, tt.wantErr)
			}
			if _, err := os.Stat(filepath.Join(dir, "args")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the program ran (stat args: %v)", err)
			}
		})
	}
}

func TestTargetExitStatus(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		permanent []int
		want      string // done, permanent or transient
		wantErr   string
	}{
		{name: "0 done", status: 0, permanent: []int{65}, want: "done"},
		{name: "1 transient", status: 1, want: "transient", wantErr: "exit status 1: to stdout\nto stderr"},
		{name: "3 transient", status: 3, permanent: []int{65, 78}, want: "transient", wantErr: "exit status 3: to stdout\nto stderr"},
		{name: "65 listed, permanent", status: 65, permanent: []int{65, 78}, want: "permanent", wantErr: "exit status 65: to stdout\nto stderr"},
		{name: "78 listed, permanent", status: 78, permanent: []int{65, 78}, want: "permanent", wantErr: "exit status 78: "},
		{name: "255 transient", status: 255, permanent: []int{65, 78}, want: "transient", wantErr: "exit status 255: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tgt := execTestSetup(t, &Target{
				Command:            execTestProgram(t, "target_exit.sh"),
				Args:               []string{strconv.Itoa(tt.status)},
				PermanentExitCodes: tt.permanent,
			})
			job := targettest.Job("exec")
			job.Payload = bytes.Repeat([]byte("unread "), 100_000) // the program never reads it
			err := tgt.Deliver(t.Context(), job)
			if got := targettest.Outcome(err); got != tt.want {
				t.Fatalf("outcome = %s (%v), want %s", got, err, tt.want)
			}
			// The exit code is kept with the attempt, 0 as well.
			if job.Code != queue.CodeOf(tt.status) {
				t.Errorf("job.Code = %v, want %d", job.Code, tt.status)
			}
			if err != nil && !strings.HasPrefix(err.Error(), tt.wantErr) {
				t.Errorf("error = %q, want prefix %q", err, tt.wantErr)
			}
		})
	}
}

// TestTargetOutputRedactsEnv: a failing program that prints its
// token (a script with set -x, an env dump) must not get it into the job's
// last error, which the admin API shows.
func TestTargetOutputRedactsEnv(t *testing.T) {
	const token = "tok-0123456789abcdef"
	t.Setenv("CADDYWEBHOOK_TEST_EXEC_TOKEN", token)
	tgt := execTestSetup(t, &Target{
		Command: "sh",
		Args:    []string{"-c", `echo "curl -H Authorization: $API_TOKEN failed; mode=$MODE" >&2; exit 1`},
		Env: map[string]string{
			"API_TOKEN": "{env.CADDYWEBHOOK_TEST_EXEC_TOKEN}",
			"MODE":      "fast", // short: left alone
		},
	})
	err := tgt.Deliver(t.Context(), targettest.Job("exec"))
	if err == nil {
		t.Fatal("Deliver succeeded; the program exits 1")
	}
	want := "exit status 1: curl -H Authorization: [redacted] failed; mode=fast"
	if err.Error() != want || strings.Contains(err.Error(), token) {
		t.Errorf("error = %q, want %q", err, want)
	}
}

// TestTargetOutputMadeSafe: a program that prints escape sequences,
// NUL, carriage returns and invalid UTF-8 cannot get them into the job's
// last error, which the CLI prints and the logs carry; its lines stay (a
// log field and a table cell make them one line with queue.SafeLine).
func TestTargetOutputMadeSafe(t *testing.T) {
	tgt := execTestSetup(t, &Target{
		Command: "sh",
		Args:    []string{"-c", `printf 'ok\033[2J\000\r\nINFO forged line\377' >&2; exit 1`},
	})
	err := tgt.Deliver(t.Context(), targettest.Job("exec"))
	if err == nil {
		t.Fatal("Deliver succeeded; the program exits 1")
	}
	if want := "exit status 1: ok\uFFFD[2J\uFFFD\nINFO forged line\uFFFD"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
}

func TestTargetOutputTailBounded(t *testing.T) {
	tgt := execTestSetup(t, &Target{Command: execTestProgram(t, "target_flood.sh")})
	err := tgt.Deliver(t.Context(), targettest.Job("exec"))
	if got := targettest.Outcome(err); got != "transient" {
		t.Fatalf("outcome = %s (%v), want transient", got, err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "exit status 3: ") || !strings.HasSuffix(msg, "eee\nlast words") {
		t.Errorf("error = %.80q…%q, want the exit status and the last words", msg, msg[max(len(msg)-40, 0):])
	}
	if len(msg) > queue.MaxErrorLen {
		t.Errorf("error is %d bytes, want at most %d", len(msg), queue.MaxErrorLen)
	}
	if len(msg) < queue.MaxErrorLen-16 {
		t.Errorf("error is %d bytes, want the tail to fill about %d", len(msg), queue.MaxErrorLen)
	}
}

func TestTargetTimeoutKillsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	tgt := execTestSetup(t, &Target{
		Command: execTestProgram(t, "target_grandchild.sh"),
		Args:    []string{pidFile},
		Timeout: caddy.Duration(time.Second),
	})
	start := time.Now()
	job := targettest.Job("exec")
	err := tgt.Deliver(t.Context(), job)
	elapsed := time.Since(start)
	if got := targettest.Outcome(err); got != "transient" {
		t.Fatalf("outcome = %s (%v), want transient", got, err)
	}
	if !strings.HasPrefix(err.Error(), "timed out after 1s") {
		t.Errorf("error = %q, want a timeout", err)
	}
	if !job.Code.IsZero() {
		t.Errorf("job.Code = %v, want none for a program killed at its timeout", job.Code)
	}
	if elapsed > time.Second+waitDelay {
		t.Errorf("Deliver took %v with a 1s timeout", elapsed)
	}
	execTestGone(t, execTestPid(t, pidFile))
}

func TestTargetCancelKillsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	tgt := execTestSetup(t, &Target{
		Command: execTestProgram(t, "target_grandchild.sh"),
		Args:    []string{pidFile},
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- tgt.Deliver(ctx, targettest.Job("exec")) }()
	pid := execTestPid(t, pidFile)
	cancel()
	err := <-done
	if got := targettest.Outcome(err); got != "transient" || !strings.HasPrefix(err.Error(), "cancelled: ") {
		t.Fatalf("Deliver = %s (%v), want a transient cancellation", got, err)
	}
	execTestGone(t, pid)
}

func TestTargetKillsLeftovers(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	tgt := execTestSetup(t, &Target{
		Command: execTestProgram(t, "target_grandchild.sh"),
		Args:    []string{pidFile, "exit"},
	})
	start := time.Now()
	if err := tgt.Deliver(t.Context(), targettest.Job("exec")); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	// The leftover sleep holds the output pipe; Deliver must not wait for it.
	if elapsed := time.Since(start); elapsed >= waitDelay {
		t.Errorf("Deliver took %v, waiting for the leftover", elapsed)
	}
	execTestGone(t, execTestPid(t, pidFile))
}

func TestTargetProgramResolution(t *testing.T) {
	notExecutable := filepath.Join(t.TempDir(), "plain.sh")
	if err := os.WriteFile(notExecutable, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		command  string
		wantPath string // resolved program, if Provision succeeds
		wantErr  string
	}{
		{name: "name found in PATH", command: "sh", wantPath: "/"},
		{name: "name missing from PATH", command: "caddywebhook-no-such-program", wantErr: `command: program "caddywebhook-no-such-program" does not exist`},
		{name: "absolute path existing", command: "/bin/sh", wantPath: "/bin/sh"},
		{name: "absolute path missing", command: "/nonexistent/deploy", wantErr: `command: program "/nonexistent/deploy" does not exist`},
		{name: "absolute path not executable", command: notExecutable, wantErr: "permission denied"},
		{name: "relative path resolved", command: "./testdata/target_exit.sh", wantPath: execTestProgram(t, "target_exit.sh")},
		{name: "relative path missing", command: "./testdata/no-such.sh", wantErr: `command: program "./testdata/no-such.sh" does not exist`},
		{name: "empty", command: "", wantErr: "command: required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tgt := &Target{Command: tt.command}
			err := tgt.Provision(targettest.Context(t))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("provision: %v", err)
			}
			if !strings.HasPrefix(tgt.path, tt.wantPath) || !filepath.IsAbs(tgt.path) {
				t.Errorf("path = %q, want %q", tgt.path, tt.wantPath)
			}
		})
	}
}

// TestTargetMissingProgramIsTransient removes the program after the
// config loaded: its deliveries fail and are retried.
func TestTargetMissingProgramIsTransient(t *testing.T) {
	program := filepath.Join(t.TempDir(), "deploy")
	if err := os.WriteFile(program, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tgt := execTestSetup(t, &Target{Command: program})
	if err := os.Remove(program); err != nil {
		t.Fatal(err)
	}
	err := tgt.Deliver(t.Context(), targettest.Job("exec"))
	if got := targettest.Outcome(err); got != "transient" || !strings.HasPrefix(err.Error(), "start program: ") {
		t.Fatalf("Deliver = %s (%v), want a transient start failure", got, err)
	}
}

func TestTargetConfigErrors(t *testing.T) {
	tests := []struct {
		name   string
		target Target
		want   string
	}{
		{name: "negative timeout", target: Target{Command: "sh", Timeout: -1}, want: "timeout: must not be negative"},
		{name: "reserved env", target: Target{Command: "sh", Env: map[string]string{"WEBHOOK_SOURCE": "x"}}, want: "env: WEBHOOK_SOURCE: the WEBHOOK_ prefix is reserved"},
		{name: "trace context env", target: Target{Command: "sh", Env: map[string]string{"TRACEPARENT": "x"}}, want: "env: TRACEPARENT is reserved for the delivery's trace context"},
		{name: "env name with =", target: Target{Command: "sh", Env: map[string]string{"A=B": "x"}}, want: `env: invalid variable name "A=B"`},
		{name: "exit code 0", target: Target{Command: "sh", PermanentExitCodes: []int{0}}, want: "permanent_exit_codes: 0 is not"},
		{name: "exit code 256", target: Target{Command: "sh", PermanentExitCodes: []int{256}}, want: "permanent_exit_codes: 256 is not"},
		{name: "misspelt placeholder", target: Target{Command: "sh", Args: []string{"--event={webhook.evnt_type}"}}, want: "args: unknown placeholder {webhook.evnt_type}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tgt := tt.target
			err := targettest.Provision(t, &tgt)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestTargetTailBuffer(t *testing.T) {
	const n = tailLen
	tests := []struct {
		name   string
		chunks []int // sizes of successive writes
	}{
		{name: "nothing", chunks: nil},
		{name: "one small write", chunks: []int{10}},
		{name: "exactly full", chunks: []int{n}},
		{name: "full in two writes", chunks: []int{n - 1, 1}},
		{name: "one byte over", chunks: []int{n + 1}},
		{name: "wraps in the middle", chunks: []int{n - 10, 25}},
		{name: "many small writes", chunks: []int{100, 700, 900, 300, 1000, 5, 2047, 1}},
		{name: "huge write after small", chunks: []int{3, 5 * n}},
		{name: "small after huge", chunks: []int{5 * n, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tail outputTail
			var all []byte
			next := byte(0)
			for _, size := range tt.chunks {
				chunk := make([]byte, size)
				for i := range chunk {
					chunk[i] = next
					next++
				}
				all = append(all, chunk...)
				if w, err := tail.Write(chunk); w != size || err != nil {
					t.Fatalf("Write = %d, %v; want %d, nil", w, err, size)
				}
			}
			want := all[max(len(all)-n, 0):]
			if got := tail.Bytes(); !bytes.Equal(got, want) {
				t.Errorf("Bytes: %d bytes, want the last %d written", len(got), len(want))
			}
		})
	}
}

func TestTargetUnmarshalCaddyfile(t *testing.T) {
	targettest.CheckCaddyfile(t, []targettest.CaddyfileCase[Target]{
		{
			Name:  "command only",
			Input: `exec /usr/local/bin/deploy`,
			Want:  Target{Command: "/usr/local/bin/deploy"},
		},
		{
			Name: "args and every option",
			Input: `exec /usr/local/bin/deploy --event {webhook.event_type} "two words" {
				timeout 5m
				dir /srv/app
				env APP_ENV production
				env TOKEN {env.DEPLOY_TOKEN}
				permanent_exit_codes 65 78
				permanent_exit_codes 77
				inherit_env
			}`,
			Want: Target{
				Command:            "/usr/local/bin/deploy",
				Args:               []string{"--event", "{webhook.event_type}", "two words"},
				Timeout:            caddy.Duration(5 * time.Minute),
				Dir:                "/srv/app",
				Env:                map[string]string{"APP_ENV": "production", "TOKEN": "{env.DEPLOY_TOKEN}"},
				PermanentExitCodes: []int{65, 78, 77},
				InheritEnv:         true,
			},
		},
		{Name: "command missing", Input: `exec`, WantErr: "exec target: missing the command"},
		{Name: "unknown option", Input: "exec /bin/true {\n shell bash\n}", WantErr: `unknown option "shell"`},
		{Name: "timeout bad", Input: "exec /bin/true {\n timeout forever\n}", WantErr: "timeout: "},
		{Name: "timeout missing", Input: "exec /bin/true {\n timeout\n}", WantErr: "timeout: missing the duration"},
		{Name: "dir missing", Input: "exec /bin/true {\n dir\n}", WantErr: "dir: takes one path"},
		{Name: "env without value", Input: "exec /bin/true {\n env KEY\n}", WantErr: "env: takes a name and a value"},
		{Name: "exit codes missing", Input: "exec /bin/true {\n permanent_exit_codes\n}", WantErr: "permanent_exit_codes: missing"},
		{Name: "exit code not a number", Input: "exec /bin/true {\n permanent_exit_codes 65 abc\n}", WantErr: `permanent_exit_codes: "abc" is not`},
		{Name: "exit code 0", Input: "exec /bin/true {\n permanent_exit_codes 0\n}", WantErr: `permanent_exit_codes: "0" is not`},
		{Name: "inherit_env with argument", Input: "exec /bin/true {\n inherit_env yes\n}", WantErr: "inherit_env: takes no arguments"},
	})
}

// TestTargetKillsSetsidDescendant: a grandchild that calls setsid
// leaves the program's process group, and once the program exits it is
// re-parented away from it; it must still be killed after the run, and a
// process the run did not start (another child of Caddy, here of the
// test) must not be, even one carrying another run's marker.
func TestTargetKillsSetsidDescendant(t *testing.T) {
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("finding descendants outside the process group needs Linux's /proc")
	}
	bystander := exec.Command("sleep", "300")
	bystander.Env = append(os.Environ(), runEnv+"="+runToken())
	if err := bystander.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = bystander.Process.Kill()
		_ = bystander.Wait()
	})
	pidFile := filepath.Join(t.TempDir(), "pid")
	tgt := execTestSetup(t, &Target{
		Command: execTestProgram(t, "target_grandchild.sh"),
		Args:    []string{pidFile, "setsid"},
	})
	if err := tgt.Deliver(t.Context(), targettest.Job("exec")); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	pid := execTestPid(t, pidFile)
	// "pid (comm) state ppid pgrp …": the grandchild leads a group of its
	// own, so the group kill did not reach it.
	if stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat")); err == nil {
		if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 2 && f[2] != strconv.Itoa(pid) {
			t.Errorf("the grandchild's process group is %s, want its own (%d): it did not escape", f[2], pid)
		}
	}
	execTestGone(t, pid)
	if stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(bystander.Process.Pid), "stat")); err != nil || bytes.Contains(stat, []byte(") Z ")) {
		t.Errorf("a process the run did not start was killed (%v)", err)
	}
}

// BenchmarkKillMarked is the cost the search for escaped descendants
// adds to every run: one walk of /proc that finds nothing.
func BenchmarkKillMarked(b *testing.B) {
	since, ok := startTime(os.Getpid())
	if !ok {
		b.Skip("needs Linux's /proc")
	}
	token := runToken()
	for b.Loop() {
		killMarked(token, since)
	}
}
