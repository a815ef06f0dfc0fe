package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/loopback"
	"github.com/caddywebhook/caddywebhook/queue"
)

// pairing is how a phase is paired with itself: from the window's start
// its requests alternate between two halves every pairSlice, each half
// rated over its own share of the window. The second half carries a trace
// context (traced, the traced phases) or, with a filter (the rules
// phase), goes to a receiver of its own on pathHookFiltered whose target
// has that filter.
type pairing struct {
	traced bool
	filter string
}

// every is the pair's slice, 0 for a phase that is not paired.
func (p *pairing) every() time.Duration {
	if p == nil {
		return 0
	}
	return pairSlice
}

// receiverFilter is the filter of the second receiver's target, "" for
// none (and then no second receiver).
func (p *pairing) receiverFilter() string {
	if p == nil {
		return ""
	}
	return p.filter
}

// secondPath is where the second half posts, "" for the first half's path.
func (p *pairing) secondPath() string {
	if p.receiverFilter() == "" {
		return ""
	}
	return pathHookFiltered
}

// Reference rates of the slow-upstream phases: what N workers could reach
// if each delivery cost exactly the upstream's 5 ms.
const (
	slowRef1  = 200.0
	slowRef32 = 6400.0
)

// pairSlice is how long a paired phase sends as one half, then as the
// other, in turn: long against a request's few milliseconds, so few
// straddle a switch, and short against the window, so both halves see the
// same machine.
const pairSlice = 100 * time.Millisecond

// The rate phase's target rate: 32 workers could deliver far more, so the
// delivered rate is the limiter's.
const (
	rateRef     = 200.0
	rateSetting = "200/s"
)

// runner holds what the phases share.
type runner struct {
	o       options
	log     io.Writer // progress lines
	dir     string
	caddies []*caddyProc // one, or -instances on one Postgres schema
	up      *upstream
	rep     *report
	pair    *pairing // how the phase running now is paired; nil: it is not

	adminAddrs, httpAddrs []string              // by instance
	srv                   *serverWatch          // postgres: the server's counters
	seeds                 map[string]seedResult // by database name

	round  int           // 1-based, the round running now
	window time.Duration // each phase's window in one round
	rate   string        // the target's rate in the phase running now; "" for none
	stripe bool          // the phase running now sends 2 KB Stripe-like bodies
	pull   bool          // the target is a pull target in the phase running now
	sealed bool          // the webhook app seals what it stores in the phase running now (sealed.go)
	db     string        // the database of the receiving phase running now, for its cost table
	bin    string        // the Caddy binary, which also runs the listeners
}

// run executes the selected phases and returns their report. An error
// means the run could not be carried out; failed count checks are in the
// report.
func run(ctx context.Context, o options, logw io.Writer) (rep *report, err error) {
	// Whatever went wrong, the error must not carry the DSN's password.
	defer func() { err = o.redact.Error(err) }()
	r := &runner{o: o, log: logw, seeds: make(map[string]seedResult)}
	r.rep = newReport(o)

	if r.dir = o.dir; r.dir == "" {
		if r.dir, err = os.MkdirTemp("", "webhook-loadtest-"); err != nil {
			return nil, fmt.Errorf("create work directory: %w", err)
		}
		// A failed run keeps its directory: the error points into it.
		defer func() {
			if err == nil && !o.keep && len(r.rep.failedChecks()) == 0 {
				os.RemoveAll(r.dir)
			} else {
				r.rep.dir = r.dir
				r.logf("work directory kept: %s", r.dir)
			}
		}()
	} else if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return nil, fmt.Errorf("create work directory: %w", err)
	}
	r.rep.dir = r.dir

	bin := o.caddy
	if bin == "" {
		r.logf("building ./cmd/caddy")
		if bin, err = buildCaddy(ctx, r.dir); err != nil {
			return nil, err
		}
	}

	if o.storage == "postgres" {
		// Not err: the deferred drop below must see the run's result.
		perr := r.preparePostgres(ctx)
		if r.srv != nil {
			defer r.srv.close()
		}
		if perr != nil {
			return nil, perr
		}
		// Registered before Caddy starts, so it runs after the instances
		// have stopped: a failed run keeps its schemas, as its directory,
		// for a look; the next run drops them first.
		defer func() {
			if err != nil || o.keep || len(r.rep.failedChecks()) > 0 {
				r.logf("postgres schemas kept: %s*", o.schemaPrefix)
				return
			}
			if derr := dropSchemas(context.WithoutCancel(ctx), o.dsn, r.schemas()); derr != nil {
				err = derr
			}
		}()
	}

	if err := r.seedAll(ctx); err != nil {
		return nil, err
	}

	if r.up, err = startUpstream(); err != nil {
		return nil, err
	}
	defer r.up.close()
	// Before the start, so an instance that fails to start does not leave
	// the ones before it running.
	defer func() {
		for _, c := range r.caddies {
			if c != nil {
				c.kill()
			}
		}
	}()
	r.bin = bin
	if err := r.startCaddies(ctx, bin); err != nil {
		return nil, err
	}

	// The phases run in rounds, each with a share of the window, so that
	// a change in the shared machine's load during the run weighs on every
	// phase alike and the ratios stay comparable.
	r.window = o.duration / time.Duration(o.rounds)
	r.up.reset(o.delay)
	for r.round = 1; r.round <= o.rounds; r.round++ {
		for _, p := range allPhases {
			if !slices.Contains(o.phases, p) {
				continue
			}
			if err := r.runPhase(ctx, p); err != nil {
				return r.rep, fmt.Errorf("phase %s, round %d: %w (caddy log: %s)", p, r.round, err, strings.Join(r.logPaths(), ", "))
			}
		}
	}
	for _, pr := range r.rep.phases {
		pr.finish()
	}
	var errs []error
	for i, c := range r.caddies {
		r.caddies[i] = nil
		errs = append(errs, c.stop(context.WithoutCancel(ctx)))
	}
	return r.rep, errors.Join(errs...)
}

// instanceName is the base name of instance i's config and log: caddy,
// then caddy-2, caddy-3, …; and the suffix of its data directories.
func instanceName(i int) (name, suffix string) {
	if i == 0 {
		return "caddy", ""
	}
	suffix = fmt.Sprintf("-%d", i+1)
	return "caddy" + suffix, suffix
}

// logPaths lists the instances' logs.
func (r *runner) logPaths() []string {
	out := make([]string, r.o.instances)
	for i := range out {
		name, _ := instanceName(i)
		out[i] = filepath.Join(r.dir, name+".log")
	}
	return out
}

// startCaddies starts the instances, each on an idle config with its own
// admin and HTTP address.
func (r *runner) startCaddies(ctx context.Context, bin string) error {
	n := r.o.instances
	r.adminAddrs, r.httpAddrs = make([]string, n), make([]string, n)
	r.caddies = make([]*caddyProc, n)
	env := []string{sealedEnv()}
	if r.o.storage == "postgres" {
		env = append(env, caddyDSNEnv+"="+r.o.dsn)
	}
	for i := range n {
		var err error
		if r.adminAddrs[i], err = loopback.FreeAddr(); err != nil {
			return err
		}
		if r.httpAddrs[i], err = loopback.FreeAddr(); err != nil {
			return err
		}
		cfg, err := caddyJSON(r.phaseConfig(i, "idle.db", 0, "", 0))
		if err != nil {
			return err
		}
		name, suffix := instanceName(i)
		r.logf("starting %s (admin %s, http %s)", name, r.adminAddrs[i], r.httpAddrs[i])
		if r.caddies[i], err = startCaddy(ctx, bin, r.dir, name, suffix, cfg, r.adminAddrs[i], env); err != nil {
			return err
		}
	}
	return nil
}

// schemas lists the Postgres schemas a run may use: every phase's, in
// every round.
func (r *runner) schemas() []string {
	dbs := []string{"idle.db", "static.db", "slow1.db", "slow32.db", "rate.db", "listen.db", "backlog.db", "orphans.db", "replay.db", "search.db"}
	for round := 1; round <= r.o.rounds; round++ {
		for _, p := range []string{"ingest", "ingest-traced", "baseline", "e2e", "e2e-traced", rulesPhase, "ingest-sealed", "e2e-sealed"} {
			dbs = append(dbs, fmt.Sprintf("%s-%d.db", p, round))
		}
	}
	out := make([]string, len(dbs))
	for i, db := range dbs {
		out[i] = schemaFor(r.o.schemaPrefix, db)
	}
	return out
}

// preparePostgres reads the server's version for the report and drops
// the schemas a previous run with the same prefix left, so every phase
// starts from an empty queue.
func (r *runner) preparePostgres(ctx context.Context) error {
	v, err := serverVersion(ctx, r.o.dsn)
	if err != nil {
		return err
	}
	r.rep.serverVersion = v
	if r.srv, err = openServerWatch(ctx, r.o.dsn); err != nil {
		return err
	}
	r.logf("postgres %s at %s: dropping the schemas %s* this run uses, should an earlier run have left them", v, r.o.dsnDesc, r.o.schemaPrefix)
	return dropSchemas(ctx, r.o.dsn, r.schemas())
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.log, "%s  %s\n", time.Now().Format("15:04:05"), r.o.redact.RedactPassword(fmt.Sprintf(format, args...)))
}

// jobsFor is how many jobs a delivery phase needs so that its queue cannot
// run dry before its last window ends, at rate per second and a margin.
func (r *runner) jobsFor(rate float64) int {
	total := time.Duration(r.o.rounds)*r.o.warmup + r.o.duration
	return int(rate*total.Seconds()*2) + 200
}

// seedAll pre-fills the databases of the phases that start with pending
// jobs, before Caddy starts.
func (r *runner) seedAll(ctx context.Context) error {
	n := float64(r.o.instances)
	todo := []struct {
		phase, db string
		n         int
		target    string
		status    queue.Status
	}{
		{"slow1", "slow1.db", r.jobsFor(slowRef1 * n), targetName, queue.StatusPending},
		{"slow32", "slow32.db", r.jobsFor(slowRef32 * n), targetName, queue.StatusPending},
		{"rate", "rate.db", r.jobsFor(rateRef * n), targetName, queue.StatusPending},
		{"listen", "listen.db", r.jobsFor(slowRef32 * n), targetName, queue.StatusPending},
		{"backlog", "backlog.db", r.o.backlog, targetName, queue.StatusPending},
		{"orphans", "orphans.db", r.o.orphans, orphanTarget, queue.StatusPending},
		{"replay", "replay.db", r.o.dead, targetName, queue.StatusDead},
		{"search", "search.db", r.o.search, targetName, queue.StatusDone},
	}
	for _, t := range todo {
		if !slices.Contains(r.o.phases, t.phase) {
			continue
		}
		if r.o.storage == "postgres" {
			schema := schemaFor(r.o.schemaPrefix, t.db)
			r.logf("seeding schema %s with %d %s jobs for %s", schema, t.n, t.status, t.target)
			s, err := seedPostgres(ctx, r.o.dsn, schema, t.phase, t.n, r.o.bodySize, source, t.target, t.status)
			if err != nil {
				return err
			}
			r.logf("seeded %s: %d jobs in %s (vacuum analyze included), %.0f MiB", schema, s.jobs, s.took.Round(time.Millisecond), float64(s.dbBytes)/(1<<20))
			r.seeds[t.db] = s
			ckpt := "checkpointed"
			if !s.checkpoint {
				ckpt = "not checkpointed: the user may not CHECKPOINT, so the server writes the pages out in its own time"
			}
			r.rep.seeds = append(r.rep.seeds, fmt.Sprintf("%s: %d jobs in %s (%.0f MiB, vacuum analyze included; %s)",
				schema, s.jobs, s.took.Round(100*time.Millisecond), float64(s.dbBytes)/(1<<20), ckpt))
			continue
		}
		path := filepath.Join(r.dir, t.db)
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("remove old %s: %w", t.db, err)
			}
		}
		r.logf("seeding %s with %d %s jobs for %s", t.db, t.n, t.status, t.target)
		s, err := seed(ctx, path, t.phase, t.n, r.o.bodySize, source, t.target, t.status)
		if err != nil {
			return err
		}
		r.logf("seeded %s: %d jobs in %s, %.0f MiB", t.db, s.jobs, s.took.Round(time.Millisecond), float64(s.dbBytes)/(1<<20))
		r.seeds[t.db] = s
		r.rep.seeds = append(r.rep.seeds, fmt.Sprintf("%s: %d jobs in %s (%.0f MiB)", t.db, s.jobs, s.took.Round(100*time.Millisecond), float64(s.dbBytes)/(1<<20)))
	}
	return nil
}

// phaseConfig is instance i's config of a phase. Without an upstream
// each instance delivers to its own no-op route.
func (r *runner) phaseConfig(i int, db string, workers int, upstream string, maxBatch int) phaseConfig {
	if upstream == "" {
		upstream = "http://" + r.httpAddrs[i] + pathNoop
	}
	pc := phaseConfig{
		workers:    workers,
		upstream:   upstream,
		maxBatch:   maxBatch,
		rate:       r.rate,
		pairFilter: r.pair.receiverFilter(),
		pull:       r.pull,
		sealed:     r.sealed,
		logLevel:   r.o.logLevel,
		adminAddr:  r.adminAddrs[i],
		httpAddr:   r.httpAddrs[i],
	}
	if r.o.storage == "postgres" {
		pc.schema = schemaFor(r.o.schemaPrefix, db)
	} else {
		pc.db = filepath.Join(r.dir, db)
		pc.sync = r.o.synchronous
	}
	return pc
}

// openQueue opens the count checks' reader of a phase's database.
func (r *runner) openQueue(ctx context.Context, db string) (queueReader, error) {
	if r.o.storage == "postgres" {
		return openPgQueue(ctx, r.o.dsn, schemaFor(r.o.schemaPrefix, db))
	}
	return openQueueDB(filepath.Join(r.dir, db))
}

// eachCaddy calls f for every instance at once and returns the first
// instance's error, if any failed.
func (r *runner) eachCaddy(f func(i int, c *caddyProc) error) error {
	errs := make([]error, len(r.caddies))
	var wg sync.WaitGroup
	for i, c := range r.caddies {
		wg.Go(func() { errs[i] = f(i, c) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil && len(errs) > 1 {
			name, _ := instanceName(i)
			return fmt.Errorf("%s: %w", name, err)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// loadConfig loads the config of a phase into the running Caddy. Each
// config listens on a new port: Caddy returns from a reload once the old
// servers have begun to shut down, not once they have, and an old server
// still accepting on a shared listener would take some of the next phase's
// connections, serve them with the old config, then close them.
//
// With several instances each gets the same config but its own addresses,
// loaded at once, so their pools start together.
func (r *runner) loadConfig(ctx context.Context, db string, workers int, upstream string, maxBatch int) error {
	cfgs := make([][]byte, len(r.caddies))
	for i := range r.caddies {
		addr, err := loopback.FreeAddr()
		if err != nil {
			return err
		}
		r.httpAddrs[i] = addr
		if cfgs[i], err = caddyJSON(r.phaseConfig(i, db, workers, upstream, maxBatch)); err != nil {
			return err
		}
	}
	return r.eachCaddy(func(i int, c *caddyProc) error { return c.load(ctx, cfgs[i]) })
}

// openPhase loads the config of a phase that receives on pathHook and
// delivers, if workers > 0, to the no-op route, then opens the reader of
// its database. The phase's events are those after the returned id, read
// before any load is sent.
func (r *runner) openPhase(ctx context.Context, db string, workers, maxBatch int) (q queueReader, after int64, err error) {
	if err := r.loadConfig(ctx, db, workers, "", maxBatch); err != nil {
		return nil, 0, err
	}
	r.db = db
	if q, err = r.openQueue(ctx, db); err != nil {
		return nil, 0, err
	}
	if after, err = q.lastEvent(ctx); err != nil {
		q.close()
		return nil, 0, err
	}
	return q, after, nil
}

// runPhase runs one round of phase p. The ingest and e2e phases get a
// fresh database each round, so each round starts from an empty queue.
func (r *runner) runPhase(ctx context.Context, p string) error {
	fresh := func(name string) string { return fmt.Sprintf("%s-%d.db", name, r.round) }
	switch p {
	case "static":
		return r.static(ctx)
	case "ingest":
		return r.ingest(ctx, "ingest", fresh("ingest"), 0, nil)
	case "ingest-traced":
		r.pair = &pairing{traced: true}
		defer func() { r.pair = nil }()
		return r.ingest(ctx, "ingest-traced", fresh("ingest-traced"), 0, nil)
	case "baseline":
		return r.ingest(ctx, "baseline", fresh("baseline"), 1, nil)
	case "e2e":
		return r.e2e(ctx, "e2e", fresh("e2e"))
	case "e2e-traced":
		r.pair = &pairing{traced: true}
		defer func() { r.pair = nil }()
		return r.e2e(ctx, "e2e-traced", fresh("e2e-traced"))
	case "slow1":
		return r.slow(ctx, "slow1", "slow1.db", 1, slowRef1)
	case "slow32":
		return r.slow(ctx, "slow32", "slow32.db", 32, slowRef32)
	case "rate":
		return r.rated(ctx)
	case "listen":
		return r.listen(ctx)
	case "backlog":
		if err := r.ingest(ctx, "backlog-ingest", "backlog.db", 0, nil); err != nil {
			return err
		}
		if err := r.e2e(ctx, "backlog-e2e", "backlog.db"); err != nil {
			return err
		}
		return r.timeStats(ctx, "backlog")
	case "orphans":
		if err := r.e2e(ctx, "orphans-e2e", "orphans.db"); err != nil {
			return err
		}
		return r.timeStats(ctx, "orphans")
	case "replay":
		return r.replay(ctx)
	case "rules":
		return r.rules(ctx)
	case "search":
		return r.search(ctx)
	case sealedPhase:
		return r.runSealed(ctx)
	}
	return fmt.Errorf("unknown phase %q", p)
}

// newLoad is one round of the phase's traffic to path; the round is in
// the delivery ids.
func (r *runner) newLoad(name, path string, want int) load {
	l := load{
		addrs:     slices.Clone(r.httpAddrs),
		path:      path,
		secret:    secret,
		tag:       fmt.Sprintf("%s-%d", name, r.round),
		bodySize:  r.o.bodySize,
		conns:     r.o.conns,
		warmup:    r.o.warmup,
		duration:  r.window,
		want:      want,
		stripe:    r.stripe,
		pairEvery: r.pair.every(),
		// Odd rounds start with the first half, even ones with the second.
		secondFirst:  r.round%2 == 0,
		secondTraced: r.pair != nil && r.pair.traced,
		secondPath:   r.pair.secondPath(),
	}
	if r.stripe {
		l.bodySize = rulesBodySize
	}
	return l
}

// drive runs l while the monitor watches Caddy, and profiles the window
// when asked.
func (r *runner) drive(ctx context.Context, pr *phaseResult, l load, during func(windowStart time.Time)) (*loadResult, error) {
	mon := startMonitor(r.caddies, r.srv)
	probe := r.costProbe(pr.name)
	start := time.Now()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if !sleepCtx(ctx, time.Until(start.Add(l.warmup))) {
			return
		}
		// The profile starts first: the probe's reads of the store's
		// counters wait for the writer's batch.
		wait := r.capture(ctx, pr, l.duration)
		if probe != nil {
			probe.begin(ctx)
		}
		mon.windowStart()
		if during != nil {
			during(start.Add(l.warmup))
		}
		wait()
	}()
	res, err := l.run(ctx)
	mon.windowEnd()
	if probe != nil {
		probe.finish(ctx)
	}
	wg.Wait()
	mon.stop(pr)
	if err != nil {
		return nil, err
	}
	pr.addLoad(res)
	if probe != nil {
		r.addCost(ctx, pr, probe, res.okRate(), l.duration)
	}
	pr.check(res.transport == 0, "round %d: %d requests got no answer; the last: %s", r.round, res.transport, res.lastErr)
	for status, n := range res.statuses {
		pr.check(status == l.want, "%d requests answered %d, want %d", n, status, l.want)
	}
	return res, nil
}

// capture starts the CPU profile and the execution trace of the next d
// that -profile and -trace ask for in this phase, and returns a function
// that waits for them. A failed capture is logged, not fatal: the
// figures do not depend on it.
func (r *runner) capture(ctx context.Context, pr *phaseResult, d time.Duration) (wait func()) {
	var wg sync.WaitGroup
	kinds := []struct {
		on   bool
		kind string
		dst  *string
	}{
		{slices.Contains(r.o.profile, pr.name), "profile", &pr.profile},
		{slices.Contains(r.o.trace, pr.name), "trace", &pr.trace},
	}
	var mu sync.Mutex
	for _, k := range kinds {
		if !k.on {
			continue
		}
		// One file per instance: name.profile, then name-2.profile, ….
		for i, c := range r.caddies {
			wg.Go(func() {
				_, suffix := instanceName(i)
				path := filepath.Join(r.dir, pr.name+suffix+"."+k.kind)
				if err := c.capture(ctx, k.kind, d, path); err != nil {
					r.logf("%s: %s: %v", pr.name, k.kind, err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if k.kind == "profile" {
					pr.roundProfiles = append(pr.roundProfiles, path)
				}
				// Each round writes the same file again.
				if slices.Contains(strings.Split(*k.dst, ", "), path) {
					return
				}
				if *k.dst != "" {
					*k.dst += ", "
				}
				*k.dst += path
			})
		}
	}
	return wg.Wait
}

// sleepCtx waits d or until ctx ends; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (r *runner) static(ctx context.Context) error {
	pr := r.rep.phase("static")
	r.db = "" // a respond route: no store to count
	if err := r.loadConfig(ctx, "static.db", 0, "", 0); err != nil {
		return err
	}
	r.logf("static: POST %s, %d connections", pathStatic, r.o.conns)
	res, err := r.drive(ctx, pr, r.newLoad("static", pathStatic, 200), nil)
	if err != nil {
		return err
	}
	r.logf("static: %.0f/s", res.okRate())
	return nil
}

// ingest drives the receiver with the pool paused (workers 0), then checks
// that every 202 is in the database with its pending job.
func (r *runner) ingest(ctx context.Context, name, db string, maxBatch int, during func(windowStart time.Time)) error {
	pr := r.rep.phase(name)
	q, after, err := r.openPhase(ctx, db, 0, maxBatch)
	if err != nil {
		return err
	}
	defer q.close()
	paths := pathHook
	if second := r.pair.secondPath(); second != "" {
		paths += " and " + second + ", in turn"
	}
	r.logf("%s: POST %s, workers 0, %d connections", name, paths, r.o.conns)
	l := r.newLoad(name, pathHook, 202)
	res, err := r.drive(ctx, pr, l, during)
	if err != nil {
		return err
	}
	r.logf("%s: %.0f accepted/s, p50 %s, p99 %s", name, res.okRate(), ms(percentile(res.lat, 0.5)), ms(percentile(res.lat, 0.99)))
	found, byStatus, err := r.checkStored(ctx, pr, res, q, after, l.tag)
	if err != nil {
		return err
	}
	pr.check(byStatus[string(queue.StatusPending)] >= found && len(byStatus) <= 1,
		"jobs of the phase's events by status %v, want %d pending and nothing else", byStatus, found)
	return nil
}

// replay runs ingest on the replay phase's queue and, when its window
// starts, asks the admin API to replay every dead job: the 202s' latency
// is what the replay costs the senders. Only the first round finds dead
// jobs to replay.
func (r *runner) replay(ctx context.Context) error {
	var (
		took     time.Duration
		replayed string
		err      error
	)
	during := func(time.Time) {
		t0 := time.Now()
		var out []byte
		out, err = r.caddies[0].adminDo(ctx, http.MethodPost, "/webhook/replay?status=dead", nil)
		took, replayed = time.Since(t0), string(bytes.TrimSpace(out))
	}
	if ierr := r.ingest(ctx, "replay-ingest", "replay.db", 0, during); ierr != nil {
		return ierr
	}
	if err != nil {
		return fmt.Errorf("replay dead jobs: %w", err)
	}
	note := fmt.Sprintf("replay round %d: POST /webhook/replay?status=dead answered %s in %s, during the window", r.round, replayed, took.Round(time.Millisecond))
	r.logf("%s", note)
	r.rep.notes = append(r.rep.notes, note)
	return nil
}

// timeStats measures GET /webhook/stats and a /metrics scrape on the
// phase's queue, after its delivery window, a few times each; the median
// and the slowest go to the report.
func (r *runner) timeStats(ctx context.Context, phase string) error {
	for _, path := range []string{"/webhook/stats", "/metrics"} {
		var took []time.Duration
		for range 5 {
			t0 := time.Now()
			if _, err := r.caddies[0].adminDo(ctx, http.MethodGet, path, nil); err != nil {
				return err
			}
			took = append(took, time.Since(t0))
		}
		slices.Sort(took)
		note := fmt.Sprintf("%s round %d: GET %s median %s, slowest %s (5 calls)", phase, r.round, path,
			took[len(took)/2].Round(10*time.Microsecond), took[len(took)-1].Round(10*time.Microsecond))
		r.logf("%s", note)
		r.rep.notes = append(r.rep.notes, note)
	}
	return nil
}

// checkStored looks up every delivery id answered 202 in the events after
// the given id and returns how many events the phase stored, and their
// jobs by status, read after the events.
func (r *runner) checkStored(ctx context.Context, pr *phaseResult, res *loadResult, q queueReader, after int64, tag string) (stored int64, byStatus map[string]int64, err error) {
	want := res.acceptedIDs(tag)
	found, missing, extra, err := q.matchEvents(ctx, after, want)
	if err != nil {
		return 0, nil, err
	}
	pr.check(missing == 0, "%d of %d events answered 202 are not in the database", missing, len(want))
	// An event stored but not seen answered is possible only when a
	// connection broke before its answer arrived.
	pr.check(extra <= res.transport, "%d events in the database were never answered 202", extra)
	pr.counts = append(pr.counts, fmt.Sprintf("round %d: %d answered 202, %d of them in the database", r.round, len(want), found))
	if byStatus, err = q.statusAfter(ctx, after); err != nil {
		return 0, nil, err
	}
	return found + extra, byStatus, nil
}

// e2e drives the receiver while the pool delivers to the no-op upstream,
// a respond route on the same Caddy. Delivered/s is the growth of the done
// jobs across the window, read from the database; the backlog of the
// phase's own events is sampled every second.
func (r *runner) e2e(ctx context.Context, name, db string) error {
	pr := r.rep.phase(name)
	q, after, err := r.openPhase(ctx, db, r.o.workers, 0)
	if err != nil {
		return err
	}
	defer q.close()
	r.logf("%s: POST %s, %d workers delivering to %s, %d connections%s", name, pathHook, r.o.workers, pathNoop, r.o.conns, r.perInstance())
	l := r.newLoad(name, pathHook, 202)
	var (
		done0, done1 int64
		samples      []backlogSample
		sampleErr    error
	)
	during := func(windowStart time.Time) {
		end := windowStart.Add(l.duration)
		if done0, sampleErr = q.done(ctx); sampleErr != nil {
			return
		}
		for {
			next := time.Now().Add(time.Second)
			if next.After(end) {
				next = end
			}
			if !sleepCtx(ctx, time.Until(next)) {
				return
			}
			byStatus, err := q.statusAfter(ctx, after)
			if err != nil {
				sampleErr = err
				return
			}
			samples = append(samples, backlogSample{
				at:      time.Since(windowStart),
				backlog: byStatus[string(queue.StatusPending)] + byStatus[string(queue.StatusRunning)],
			})
			if !next.Before(end) {
				done1, sampleErr = q.done(ctx)
				return
			}
		}
	}
	res, err := r.drive(ctx, pr, l, during)
	if err != nil {
		return err
	}
	if sampleErr != nil {
		return sampleErr
	}
	pr.delivered += done1 - done0
	pr.deliveredWindow += l.duration
	pr.slopes = append(pr.slopes, slope(samples))

	// Every instance reads the same queue; the first one's answer will do.
	st, err := r.caddies[0].stats(ctx)
	if err != nil {
		return err
	}
	pr.backlogEnd = 0
	for _, c := range st.Counts {
		if c.Status == queue.StatusPending || c.Status == queue.StatusRunning {
			pr.backlogEnd += c.Jobs
		}
	}
	r.logf("%s: %.0f accepted/s, %.0f delivered/s, backlog %d at the end", name, res.okRate(), float64(done1-done0)/l.duration.Seconds(), pr.backlogEnd)

	found, byStatus, err := r.checkStored(ctx, pr, res, q, after, l.tag)
	if err != nil {
		return err
	}
	var total int64
	for _, n := range byStatus {
		total += n
	}
	pr.check(total == found && byStatus[string(queue.StatusDead)] == 0,
		"jobs of the phase's events by status %v, want %d in all and none dead", byStatus, found)
	pr.counts = append(pr.counts, fmt.Sprintf("round %d: the round's jobs: %d done, %d pending, %d running", r.round,
		byStatus[string(queue.StatusDone)], byStatus[string(queue.StatusPending)], byStatus[string(queue.StatusRunning)]))
	return nil
}

// slow lets workers deliver pre-seeded jobs to the recording upstream,
// which answers after the delay, and counts deliveries at the upstream.
// It then pauses the pool and checks that every done job arrived there.
func (r *runner) slow(ctx context.Context, name, db string, workers int, ref float64) error {
	pr := r.rep.phase(name)
	// The reference is what all the instances' workers could reach.
	pr.ref = ref * float64(r.o.instances)
	mon := startMonitor(r.caddies, r.srv)
	if err := r.loadConfig(ctx, db, workers, r.up.url(), 0); err != nil {
		return err
	}
	r.logf("%s: %d worker(s) delivering to an upstream that answers in %s%s", name, workers, r.o.delay, r.perInstance())
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
	// Pause the pool: the same database with no workers. The reload stops
	// the pool, which lets running deliveries finish and records them.
	if err := r.loadConfig(ctx, db, 0, r.up.url(), 0); err != nil {
		return err
	}
	mon.stop(pr)
	pr.delivered += a1 - a0
	pr.deliveredWindow += r.window
	pr.held += time.Duration(h1 - h0)
	pr.heldCount += a1 - a0
	// The measured reference: as many plain net/http senders as there are
	// workers, against the same upstream, right after the workers'
	// window, while the pool is paused.
	senders := workers * r.o.instances
	ceiling, err := clientCeiling(ctx, r.up.url(), senders, r.o.bodySize, r.o.warmup, r.window)
	if err != nil {
		return err
	}
	pr.ceiling += ceiling * r.window.Seconds()
	pr.ceilingWindow += r.window
	r.logf("%s: %.0f delivered/s; the upstream held each %s on average; %d plain Go senders: %.0f/s",
		name, float64(a1-a0)/r.window.Seconds(), meanHold(a0, h0, a1, h1).Round(time.Microsecond), senders, ceiling)

	done, mine, repeats, err := r.checkArrived(ctx, pr, name, db)
	if err != nil {
		return err
	}
	pr.counts = append(pr.counts, fmt.Sprintf("round %d: %d jobs done so far, all at the upstream: %d unique ids there, %d repeated deliveries in the run", r.round, done, mine, repeats))
	return nil
}

// checkArrived checks a slow phase's jobs against the recording upstream:
// every job the database calls done arrived there, no more ids arrived
// than were seeded, and the seed did not run dry. It returns the jobs done,
// the phase's unique ids at the upstream and the repeated deliveries of
// the run.
func (r *runner) checkArrived(ctx context.Context, pr *phaseResult, name, db string) (done, mine int64, repeats int, err error) {
	q, err := r.openQueue(ctx, db)
	if err != nil {
		return 0, 0, 0, err
	}
	defer q.close()
	// The upstream keeps every id of the run; the seeded ids of each
	// database start with its phase's name.
	seen, repeats := r.up.snapshot()
	for id := range seen {
		if strings.HasPrefix(id, name+"-") {
			mine++
		}
	}
	var notArrived int64
	if err := q.doneIDs(ctx, func(id string) {
		done++
		if seen[id] == 0 {
			notArrived++
		}
	}); err != nil {
		return 0, 0, 0, err
	}
	seeded := int64(r.seeds[db].jobs)
	pr.check(notArrived == 0, "%d of %d jobs done in the database never arrived at the upstream", notArrived, done)
	pr.check(mine <= seeded, "the upstream saw %d ids, more than the %d jobs seeded", mine, seeded)
	pr.check(done < seeded, "all %d seeded jobs were delivered: the queue ran dry, so the rate is a floor; raise the seed", seeded)
	return done, mine, repeats, nil
}

// rated delivers a seeded backlog with 32 workers to the 5 ms upstream
// through a target with rate 200/s: what arrives in the window is the
// limiter's rate, which must be within 5 % of the setting. The rate is per
// instance, so with -instances N the reference is N × 200/s.
func (r *runner) rated(ctx context.Context) error {
	const name, db, workers = "rate", "rate.db", 32
	pr := r.rep.phase(name)
	pr.ref = rateRef * float64(r.o.instances)
	mon := startMonitor(r.caddies, r.srv)
	r.rate = rateSetting
	defer func() { r.rate = "" }()
	if err := r.loadConfig(ctx, db, workers, r.up.url(), 0); err != nil {
		return err
	}
	r.logf("%s: %d workers delivering to an upstream that answers in %s through a target with rate %s%s", name, workers, r.o.delay, rateSetting, r.perInstance())
	if !sleepCtx(ctx, r.o.warmup) {
		return ctx.Err()
	}
	mon.windowStart()
	a0 := r.up.answered.Load()
	if !sleepCtx(ctx, r.window) {
		return ctx.Err()
	}
	a1 := r.up.answered.Load()
	mon.windowEnd()
	r.rate = ""
	if err := r.loadConfig(ctx, db, 0, r.up.url(), 0); err != nil {
		return err
	}
	mon.stop(pr)
	pr.delivered += a1 - a0
	pr.deliveredWindow += r.window
	r.logf("%s: %.1f delivered/s with rate %s", name, float64(a1-a0)/r.window.Seconds(), rateSetting)
	q, err := r.openQueue(ctx, db)
	if err != nil {
		return err
	}
	defer q.close()
	var done int64
	if err := q.doneIDs(ctx, func(string) { done++ }); err != nil {
		return err
	}
	seeded := int64(r.seeds[db].jobs)
	pr.check(done < seeded, "all %d seeded jobs were delivered: the queue ran dry, so the rate is a floor; raise the seed", seeded)
	pr.counts = append(pr.counts, fmt.Sprintf("round %d: %d jobs done so far", r.round, done))
	return nil
}

// backlogSample is the phase's backlog some time into the window.
type backlogSample struct {
	at      time.Duration
	backlog int64
}

// slope is the least-squares growth of the backlog, in jobs per second.
func slope(s []backlogSample) float64 {
	if len(s) < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for _, p := range s {
		x, y := p.at.Seconds(), float64(p.backlog)
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
	}
	n := float64(len(s))
	den := n*sxx - sx*sx
	if den == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / den
}

// monitor samples the memory of the Caddy instances during a phase and
// their CPU time across the window: CPU summed over the instances, memory
// the largest instance's.
type monitor struct {
	cs       []*caddyProc
	quit     chan struct{}
	done     chan struct{}
	startRSS int64 // the largest instance's
	peak     int64 // sampled VmRSS, the largest instance's
	mu       sync.Mutex
	cpu0     time.Duration
	cpuOK    bool // cpu0 was read
	self0    time.Duration
	t0       time.Time
	took     time.Duration // the window, as it ran
	cores    float64       // Caddy's, summed over the instances
	selfCore float64       // this process's: the load generator and upstream
	hwmOK    bool

	srv      *serverWatch // nil with sqlite
	srv0     serverSample
	srvDelta serverSample // across the window
	srvOK    bool         // both samples were read
}

// monitorEvery is the memory sampling interval, a fallback for kernels
// that do not let us reset VmHWM.
const monitorEvery = 100 * time.Millisecond

func startMonitor(cs []*caddyProc, srv *serverWatch) *monitor {
	m := &monitor{cs: cs, srv: srv, quit: make(chan struct{}), done: make(chan struct{}), hwmOK: true}
	for _, c := range cs {
		m.hwmOK = c.resetPeak() == nil && m.hwmOK
		rss, _, _ := c.memory()
		m.startRSS = max(m.startRSS, rss)
	}
	m.peak = m.startRSS
	go func() {
		defer close(m.done)
		t := time.NewTicker(monitorEvery)
		defer t.Stop()
		for {
			select {
			case <-m.quit:
				return
			case <-t.C:
				for _, c := range cs {
					if rss, _, err := c.memory(); err == nil {
						m.mu.Lock()
						m.peak = max(m.peak, rss)
						m.mu.Unlock()
					}
				}
			}
		}
	}()
	return m
}

// serverSampleTimeout bounds a read of the server's counters at a window's
// edge, so a server that stalls cannot hang the run; the window's server
// figures are then left out.
const serverSampleTimeout = 5 * time.Second

// cpuTime is the instances' CPU time, summed.
func (m *monitor) cpuTime() (time.Duration, error) {
	var sum time.Duration
	for _, c := range m.cs {
		t, err := c.cpuTime()
		if err != nil {
			return 0, err
		}
		sum += t
	}
	return sum, nil
}

func (m *monitor) windowStart() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.t0 = time.Now()
	var err error
	m.cpu0, err = m.cpuTime()
	m.cpuOK = err == nil
	m.self0 = selfCPU()
	if m.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), serverSampleTimeout)
		defer cancel()
		m.srv0, err = m.srv.sample(ctx)
		m.srvOK = err == nil
	}
}

func (m *monitor) windowEnd() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.t0.IsZero() {
		return
	}
	m.took = time.Since(m.t0)
	if cpu, err := m.cpuTime(); err == nil && m.cpuOK {
		m.cores = (cpu - m.cpu0).Seconds() / m.took.Seconds()
	}
	m.selfCore = (selfCPU() - m.self0).Seconds() / m.took.Seconds()
	if m.srv != nil && m.srvOK {
		ctx, cancel := context.WithTimeout(context.Background(), serverSampleTimeout)
		defer cancel()
		s1, err := m.srv.sample(ctx)
		m.srvOK = err == nil
		m.srvDelta = serverSample{cpu: s1.cpu - m.srv0.cpu, cpuOK: s1.cpuOK && m.srv0.cpuOK, xid: s1.xid - m.srv0.xid, lsn: s1.lsn - m.srv0.lsn}
	}
}

// selfCPU is the CPU time this process has used, user and system.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// stop ends sampling and adds the round's memory and CPU figures to the
// phase's.
func (m *monitor) stop(pr *phaseResult) {
	close(m.quit)
	<-m.done
	var rss, hwm int64
	for _, c := range m.cs {
		r, h, _ := c.memory()
		rss, hwm = max(rss, r), max(hwm, h)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if pr.startRSS == 0 {
		pr.startRSS = m.startRSS
	}
	pr.endRSS = rss
	pr.peakRSS = max(pr.peakRSS, m.peak, rss)
	if m.hwmOK {
		pr.peakRSS = max(pr.peakRSS, hwm)
	}
	pr.cpuSeconds += m.cores * m.took.Seconds()
	pr.selfSeconds += m.selfCore * m.took.Seconds()
	pr.cpuWindow += m.took
	if m.srv != nil && m.srvOK && m.took > 0 {
		pr.server.add(m.srvDelta, m.took)
	}
}

// perInstance is ", each of N instances" for progress lines, or nothing
// with one instance.
func (r *runner) perInstance() string {
	if r.o.instances == 1 {
		return ""
	}
	return fmt.Sprintf(" (the workers in each of %d instances, the connections spread over them)", r.o.instances)
}

// nproc is the number of CPUs this process may use.
func nproc() int { return runtime.NumCPU() }
