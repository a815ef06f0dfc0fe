package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

// Names in the configs the load test writes.
const (
	source = "lt" // the receiver's source
	// sourceFiltered is the rules phase's second receiver, whose target
	// has the filter (phaseConfig.pairFilter).
	sourceFiltered = "lt-filtered"
	targetName     = "out" // its one target
	// orphanTarget is a target no config of the run has: the orphans
	// phase's seeded jobs are for it, so no worker may take them.
	orphanTarget = "gone"
	secret       = "load-test-secret-not-for-production"
	// consumerToken is the token of the listen phase's webhook_consumer.
	consumerToken = "load-test-consumer-token-not-for-production"

	pathStatic = "/static" // Caddy's ceiling: respond 200, nothing else
	pathHook   = "/hook"   // the webhook_receiver
	// pathHookFiltered is the rules phase's receiver with a filter.
	pathHookFiltered = "/hook-filtered"
	pathNoop         = "/noop"    // the no-op upstream: respond 200 on the same Caddy
	pathPull         = "/consume" // the webhook_consumer of the listen phase
	statusNoop       = http.StatusOK
)

// buildCaddy builds ./cmd/caddy of the module that contains this program's
// working directory into dir and returns the binary's path.
func buildCaddy(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("find module root: run from inside the caddywebhook module, or pass -caddy")
	}
	bin := filepath.Join(dir, "caddy")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/caddy")
	cmd.Dir = filepath.Dir(gomod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build caddy: %w\n%s", err, out)
	}
	return bin, nil
}

// phaseConfig is what changes between the configs of the phases.
type phaseConfig struct {
	db       string // queue database file (sqlite)
	schema   string // queue schema (postgres); set: the backend is postgres
	workers  int    // 0: receive only
	upstream string // the target's URL
	maxBatch int    // storage.max_batch, 0 to leave it out
	rate     string // the target's rate, "" for none
	// pairFilter, when set, adds a second receiver on pathHookFiltered,
	// source sourceFiltered, whose target has this filter: the rules
	// phase's paired half.
	pairFilter string
	pull       bool   // the target is a pull target, consumed on pathPull
	sealed     bool   // the webhook app's encryption block is on (sealed.go)
	sync       string // storage.synchronous (sqlite)
	logLevel   string // Caddy's default log level
	adminAddr  string
	httpAddr   string
}

// target is the receiver's one target.
func (pc phaseConfig) target() map[string]any {
	t := map[string]any{
		"name":    targetName,
		"deliver": map[string]any{"kind": "http", "url": pc.upstream},
	}
	if pc.pull {
		t["deliver"] = map[string]any{"kind": "pull"}
	}
	if pc.rate != "" {
		t["rate"] = pc.rate
	}
	return t
}

// storageJSON is the webhook app's storage block of pc. The Postgres DSN
// is a placeholder for the variable startCaddy sets, so no config holds the
// password; synchronous is SQLite's alone.
func (pc phaseConfig) storageJSON() map[string]any {
	var storage map[string]any
	if pc.schema != "" {
		storage = map[string]any{"backend": "postgres", "dsn": "{env." + caddyDSNEnv + "}", "schema": pc.schema}
	} else {
		storage = map[string]any{"backend": "sqlite", "path": pc.db, "synchronous": pc.sync}
	}
	if pc.maxBatch > 0 {
		storage["max_batch"] = pc.maxBatch
	}
	return storage
}

// caddyJSON returns the whole Caddy config of one phase: a static route,
// the no-op upstream route, and the webhook receiver (GitHub scheme, one
// http target) on one server; the webhook app with the phase's database and
// workers; the admin API on loopback.
func caddyJSON(pc phaseConfig) ([]byte, error) {
	storage := pc.storageJSON()
	route := func(path string, handler map[string]any) map[string]any {
		return map[string]any{
			"match":  []any{map[string]any{"path": []string{path}}},
			"handle": []any{handler},
		}
	}
	receiver := func(src string, target map[string]any) map[string]any {
		return map[string]any{
			"handler": "webhook_receiver",
			"source":  src,
			"scheme":  "github",
			"secrets": []string{secret},
			"targets": []any{target},
		}
	}
	routes := []any{
		route(pathStatic, map[string]any{"handler": "static_response", "status_code": http.StatusOK}),
		route(pathNoop, map[string]any{"handler": "static_response", "status_code": statusNoop}),
		route(pathHook, receiver(source, pc.target())),
	}
	if pc.pairFilter != "" {
		t := pc.target()
		t["filter"] = pc.pairFilter
		routes = append(routes, route(pathHookFiltered, receiver(sourceFiltered, t)))
	}
	if pc.pull {
		routes = append(routes, route(pathPull+"/*", map[string]any{
			"handler": "webhook_consumer",
			"tokens":  []string{consumerToken},
			"targets": []string{targetName},
		}))
	}
	cfg := map[string]any{
		"admin": map[string]any{
			"listen": pc.adminAddr,
			"config": map[string]any{"persist": false},
		},
		"logging": map[string]any{
			"logs": map[string]any{"default": map[string]any{"level": pc.logLevel}},
		},
		"apps": map[string]any{
			"http": map[string]any{
				"servers": map[string]any{
					"loadtest": map[string]any{
						"listen":          []string{pc.httpAddr},
						"automatic_https": map[string]any{"disable": true},
						"routes":          routes,
					},
				},
			},
			"webhook": map[string]any{
				"storage": storage,
				"workers": pc.workers,
			},
		},
	}
	if pc.sealed {
		cfg["apps"].(map[string]any)["webhook"].(map[string]any)["encryption"] = encryptionJSON()
	}
	return json.MarshalIndent(cfg, "", "\t")
}

// caddyProc is the Caddy under test.
type caddyProc struct {
	cmd    *exec.Cmd
	admin  string // host:port
	log    *os.File
	exited chan struct{}
	err    error // the process's exit, once exited is closed
	client *http.Client
}

// startCaddy runs `caddy run` with cfg and waits for its admin API. Its
// config and log are dir/name.json and dir/name.log; suffix ("" or "-2",
// …) tells instances apart in Caddy's data and config directories, which
// are put under dir, so a load test never touches the user's. env is added
// to the process's environment.
func startCaddy(ctx context.Context, bin, dir, name, suffix string, cfg []byte, admin string, env []string) (*caddyProc, error) {
	cfgPath := filepath.Join(dir, name+".json")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		return nil, fmt.Errorf("write caddy config: %w", err)
	}
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, fmt.Errorf("create caddy log: %w", err)
	}
	cmd := exec.Command(bin, "run", "--config", cfgPath)
	cmd.Env = append(os.Environ(),
		"XDG_DATA_HOME="+filepath.Join(dir, "data"+suffix),
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"+suffix),
	)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start caddy: %w", err)
	}
	c := &caddyProc{
		cmd:    cmd,
		admin:  admin,
		log:    logf,
		exited: make(chan struct{}),
		// No keep-alive: each config load replaces Caddy's admin server,
		// and a request on an idle connection to the old one is reset.
		client: &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{DisableKeepAlives: true}},
	}
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	// Poll the admin API: Caddy is an external process with no readiness
	// signal of its own.
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/config/", nil)
		resp, err := c.client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return c, nil
			}
		}
		select {
		case <-c.exited:
			logf.Close()
			return nil, fmt.Errorf("start caddy: exited (%v); see %s", c.err, logf.Name())
		case <-ctx.Done():
			c.kill()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.kill()
			return nil, fmt.Errorf("start caddy: admin API at %s not up after 30s; see %s", admin, logf.Name())
		}
	}
}

// adminDo sends one admin API request and returns the body of a 2xx
// answer, or an error quoting the answer.
func (c *caddyProc) adminDo(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+c.admin+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(out))
	}
	return out, nil
}

// load replaces the running config; Caddy answers once the new one runs
// (and the old one, with its worker pool, has stopped).
func (c *caddyProc) load(ctx context.Context, cfg []byte) error {
	_, err := c.adminDo(ctx, http.MethodPost, "/load", cfg)
	return err
}

// stats reads GET /webhook/stats.
func (c *caddyProc) stats(ctx context.Context) (queue.Stats, error) {
	var st queue.Stats
	out, err := c.adminDo(ctx, http.MethodGet, "/webhook/stats", nil)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return st, fmt.Errorf("decode /webhook/stats: %w", err)
	}
	return st, nil
}

// capture saves a CPU profile (kind "profile") or an execution trace
// ("trace") of the next d from Caddy's admin pprof endpoint into path.
func (c *caddyProc) capture(ctx context.Context, kind string, d time.Duration, path string) error {
	secs := max(int(d.Round(time.Second)/time.Second), 1)
	out, err := c.adminDo(ctx, http.MethodGet, "/debug/pprof/"+kind+"?seconds="+strconv.Itoa(secs), nil)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}

// stop asks Caddy to stop through the admin API and waits for the process;
// it kills the process if it has not exited within a minute.
func (c *caddyProc) stop(ctx context.Context) error {
	defer c.log.Close()
	if _, err := c.adminDo(ctx, http.MethodPost, "/stop", nil); err != nil {
		c.kill()
		return err
	}
	select {
	case <-c.exited:
		return nil
	case <-time.After(time.Minute):
		c.kill()
		return errors.New("stop caddy: still running a minute after /stop; killed")
	}
}

// kill ends the process without waiting for a graceful stop.
func (c *caddyProc) kill() {
	c.cmd.Process.Kill()
	<-c.exited
}

// memory reads Caddy's resident set size and its peak, in bytes, from
// /proc.
func (c *caddyProc) memory() (rss, peak int64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(c.cmd.Process.Pid) + "/status")
	if err != nil {
		return 0, 0, fmt.Errorf("read caddy memory: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		name, value, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("read caddy memory: %s: %w", name, err)
		}
		if name == "VmRSS" {
			rss = kb << 10
		} else {
			peak = kb << 10
		}
	}
	return rss, peak, nil
}

// resetPeak resets the kernel's VmHWM of Caddy to its current RSS (writing
// 5 to clear_refs), so each phase reports its own peak. It fails without
// permission to write the file; the phases then fall back on sampling.
func (c *caddyProc) resetPeak() error {
	return os.WriteFile("/proc/"+strconv.Itoa(c.cmd.Process.Pid)+"/clear_refs", []byte("5"), 0)
}

// cpuTime is the CPU time Caddy has used, user and system.
func (c *caddyProc) cpuTime() (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(c.cmd.Process.Pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("read caddy cpu time: %w", err)
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: state is field 3, utime 14, stime 15.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("read caddy cpu time: malformed stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, errors.New("read caddy cpu time: malformed stat")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("read caddy cpu time: %w", err)
	}
	// USER_HZ is 100 on every Linux the load test runs on.
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}
