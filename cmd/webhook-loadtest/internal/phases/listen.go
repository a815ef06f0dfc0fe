package phases

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/monitor"
	"github.com/caddywebhook/caddywebhook/internal/caddyproc"
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
	pr := r.res.Phase(name)
	pr.Ref = slowRef32 * float64(r.o.Instances)
	mon := monitor.Start(r.caddies, r.srv)
	r.pull = true
	defer func() { r.pull = false }()
	if err := r.loadConfig(ctx, db, 0, r.up.url(), 0); err != nil {
		return err
	}
	procs := make([]*caddyproc.Process, len(r.caddies))
	defer func() {
		for _, p := range procs {
			if p != nil {
				p.Kill()
			}
		}
	}()
	// Each start returns once its listener says it is ready: until then
	// a SIGINT would kill it rather than stop it, and the warmup would
	// measure its start.
	if err := r.eachCaddy(func(i int, _ *caddyproc.Process) error {
		var err error
		procs[i], err = r.startListener(ctx, i)
		return err
	}); err != nil {
		return err
	}
	r.logf("%s: %d listener(s), %d deliveries at once each, to an upstream that answers in %s%s",
		name, len(procs), listenConcurrency, r.o.Delay, r.perInstance())
	w, err := r.watchUpstream(ctx, pr, mon)
	if err != nil {
		return err
	}
	// SIGINT: each listener hands back what it holds and exits.
	for _, p := range procs {
		_ = p.Signal(syscall.SIGINT)
	}
	for _, p := range procs {
		if err := p.Wait(time.Minute); err != nil {
			return fmt.Errorf("listener: %w", err)
		}
	}
	procs = nil
	pr.addWindow(mon.Stop())
	w.addTo(pr, r.window)
	r.logf("%s: %.0f delivered/s through the listeners; the upstream held each %s on average",
		name, float64(w.delivered())/r.window.Seconds(), w.meanHold().Round(time.Microsecond))

	done, mine, _, err := r.checkArrived(ctx, pr, name, db)
	if err != nil {
		return err
	}
	pr.Counts = append(pr.Counts, fmt.Sprintf("round %d: %d jobs done so far, all at the upstream: %d unique ids there", r.round, done, mine))
	return nil
}

// listenerLog is listener i's log in the work directory.
func (r *runner) listenerLog(i int) string {
	return filepath.Join(r.dir, fmt.Sprintf("listen-%d.log", i+1))
}

// startListener runs `caddy webhook listen` against instance i's consumer
// endpoint, forwarding to the recording upstream, and returns once it says
// it is forwarding; its output goes to listen-<i>.log in the work
// directory, new for each round.
func (r *runner) startListener(ctx context.Context, i int) (*caddyproc.Process, error) {
	logPath := r.listenerLog(i)
	if err := os.WriteFile(logPath, nil, 0o600); err != nil {
		return nil, fmt.Errorf("create listener log: %w", err)
	}
	p, err := caddyproc.Start(ctx, caddyproc.Config{
		Bin: r.bin,
		Args: []string{"webhook", "listen",
			"--url", "http://" + r.httpAddrs[i] + pathPull,
			"--token-env", listenTokenEnv,
			"--target", targetName,
			"--forward-to", r.up.url(),
			"--concurrency", fmt.Sprint(listenConcurrency),
			"--wait", "1s"},
		Env:          append(os.Environ(), listenTokenEnv+"="+consumerToken),
		LogPath:      logPath,
		ReadyText:    "Ready! Forwarding",
		StartTimeout: time.Minute,
	})
	if err != nil {
		b, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("listener %d: %w: %s", i+1, err, b)
	}
	return p, nil
}
