package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// listenConcurrency is the deliveries each listener of the listen phase
// runs at once: as many as slow32's workers, so that the two phases'
// figures compare a pull target's path with the http target's.
const listenConcurrency = 32

// listenTokenEnv is the variable that hands the listeners the token.
const listenTokenEnv = "LT_CONSUMER_TOKEN"

// listen delivers a pull target's seeded jobs to the recording upstream
// through `caddy webhook listen` processes, one per instance, each with
// listenConcurrency deliveries at once, and counts the deliveries at the
// upstream as slow does. Caddy's pool claims none of them: the delivered
// rate is the consumer API's and the listener's. The listeners' own CPU is
// not in the phase's figures (they are not Caddy).
func (r *runner) listen(ctx context.Context) error {
	const name, db = "listen", "listen.db"
	pr := r.rep.phase(name)
	pr.ref = slowRef32 * float64(r.o.instances)
	mon := startMonitor(r.caddies, r.srv)
	r.pull = true
	defer func() { r.pull = false }()
	if err := r.loadConfig(ctx, db, 0, r.up.url(), 0); err != nil {
		return err
	}
	procs := make([]*exec.Cmd, 0, len(r.caddies))
	defer func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	}()
	for i := range r.caddies {
		p, err := r.startListener(i)
		if err != nil {
			return err
		}
		procs = append(procs, p)
	}
	// Until a listener is ready, a SIGINT would kill it rather than stop
	// it, and the warmup would measure its start.
	for i := range procs {
		if err := r.listenerReady(ctx, i); err != nil {
			return err
		}
	}
	r.logf("%s: %d listener(s), %d deliveries at once each, to an upstream that answers in %s%s",
		name, len(procs), listenConcurrency, r.o.delay, r.perInstance())
	if !sleepCtx(ctx, r.o.warmup) {
		return ctx.Err()
	}
	mon.windowStart()
	a0, h0 := r.up.answered.Load(), r.up.held.Load()
	wait := r.capture(ctx, pr, r.window)
	if !sleepCtx(ctx, r.window) {
		return ctx.Err()
	}
	a1, h1 := r.up.answered.Load(), r.up.held.Load()
	mon.windowEnd()
	wait()
	// SIGINT: each listener hands back what it holds and exits.
	for _, p := range procs {
		_ = p.Process.Signal(syscall.SIGINT)
	}
	for _, p := range procs {
		if err := p.Wait(); err != nil {
			return fmt.Errorf("listener: %w", err)
		}
	}
	procs = nil
	mon.stop(pr)
	pr.delivered += a1 - a0
	pr.deliveredWindow += r.window
	pr.held += time.Duration(h1 - h0)
	pr.heldCount += a1 - a0
	r.logf("%s: %.0f delivered/s through the listeners; the upstream held each %s on average",
		name, float64(a1-a0)/r.window.Seconds(), meanHold(a0, h0, a1, h1).Round(time.Microsecond))

	done, mine, _, err := r.checkArrived(ctx, pr, name, db)
	if err != nil {
		return err
	}
	pr.counts = append(pr.counts, fmt.Sprintf("round %d: %d jobs done so far, all at the upstream: %d unique ids there", r.round, done, mine))
	return nil
}

// listenerReady waits until listener i says it is forwarding.
func (r *runner) listenerReady(ctx context.Context, i int) error {
	path := r.listenerLog(i)
	deadline := time.Now().Add(time.Minute)
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read listener log: %w", err)
		}
		if bytes.Contains(b, []byte("Ready! Forwarding")) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("listener %d not ready after a minute: %s", i+1, b)
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
}

func (r *runner) listenerLog(i int) string {
	return filepath.Join(r.dir, fmt.Sprintf("listen-%d.log", i+1))
}

// startListener runs `caddy webhook listen` against instance i's consumer
// endpoint, forwarding to the recording upstream; its output goes to
// listen-<i>.log in the work directory.
func (r *runner) startListener(i int) (*exec.Cmd, error) {
	logf, err := os.OpenFile(r.listenerLog(i), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create listener log: %w", err)
	}
	defer logf.Close() // the child has its own copy
	cmd := exec.Command(r.bin, "webhook", "listen",
		"--url", "http://"+r.httpAddrs[i]+pathPull,
		"--token-env", listenTokenEnv,
		"--target", targetName,
		"--forward-to", r.up.url(),
		"--concurrency", fmt.Sprint(listenConcurrency),
		"--wait", "1s")
	cmd.Env = append(os.Environ(), listenTokenEnv+"="+consumerToken)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start listener: %w", err)
	}
	return cmd, nil
}
