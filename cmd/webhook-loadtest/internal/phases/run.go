// Package phases runs the load test's phases against Caddy processes it
// starts, measures each in rounds and checks that the counts add up: every
// 202 in the database, every job done at the upstream. Run returns the
// Results; package report judges and prints them.
package phases

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/monitor"
	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/queuedb"
	"github.com/caddywebhook/caddywebhook/internal/caddyproc"
	"github.com/caddywebhook/caddywebhook/internal/loopback"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/postgres"
)

// All are the phases in the order they run.
var All = []string{"static", "ingest", "ingest-traced", "baseline", "e2e", "e2e-traced", "slow1", "slow32", "rate", "listen", "backlog", "orphans", "replay", "rules", "search", sealedPhase}

// Options say what a run does: the command's flags, checked.
type Options struct {
	Caddy       string        // Caddy binary; empty: build ./cmd/caddy
	Dir         string        // work directory; empty: a temporary one
	Keep        bool          // keep the work directory
	Duration    time.Duration // measured window per phase
	Warmup      time.Duration // traffic before each window
	Rounds      int           // the phases run this many times, each with a share of the window
	Conns       int           // load connections
	BodySize    int           // bytes per body
	Phases      []string      // which phases, in All's order
	Backlog     int           // jobs pending before the backlog phase
	Orphans     int           // unroutable jobs pending before the orphans phase
	Dead        int           // dead jobs before the replay phase
	Search      int           // events in the store of the search phase
	Workers     int           // workers of the e2e and backlog phases
	Delay       time.Duration // the slow upstream's answer time
	Profile     []string      // phases whose window is CPU-profiled
	Trace       []string      // phases whose window is traced
	LogLevel    string        // Caddy's log level
	Synchronous string        // storage.synchronous of every phase
	Args        []string      // the command line, for the report

	Storage      string             // sqlite or postgres
	DSN          string             // the Postgres server; never printed
	DSNDesc      string             // the DSN without its password, for the report
	SchemaPrefix string             // the phases' Postgres schemas are named with it
	Instances    int                // Caddy processes sharing each phase's queue
	Redact       *postgres.Redactor // takes the DSN's password out of what is printed
}

// Reference rates of the slow-upstream phases: what N workers could reach
// if each delivery cost exactly the upstream's 5 ms.
const (
	slowRef1  = 200.0
	slowRef32 = 6400.0
)

// The rate phase's target rate: 32 workers could deliver far more, so the
// delivered rate is the limiter's.
const (
	rateRef     = 200.0
	rateSetting = "200/s"
)

// runner holds what the phases share.
type runner struct {
	o       Options
	log     io.Writer // progress lines
	dir     string
	caddies []*caddyproc.Process // one, or -instances on one Postgres schema
	up      *upstream
	res     *Results
	pair    *pairing // how the phase running now is paired; nil: it is not

	adminAddrs, httpAddrs []string                      // by instance
	srv                   *monitor.ServerWatch          // postgres: the server's counters
	seeds                 map[string]queuedb.SeedResult // by database name

	round  int           // 1-based, the round running now
	window time.Duration // each phase's window in one round
	rate   string        // the target's rate in the phase running now; "" for none
	stripe bool          // the phase running now sends 2 KB Stripe-like bodies
	pull   bool          // the target is a pull target in the phase running now
	sealed bool          // the webhook app seals what it stores in the phase running now (sealed.go)
	db     string        // the database of the receiving phase running now, for its cost table
	bin    string        // the Caddy binary, which also runs the listeners
}

// Run executes o's phases and returns their results; it writes its
// progress to logw. An error means the run could not be carried out
// (the results then hold what ran before it); failed count checks are in
// the results.
func Run(ctx context.Context, o Options, logw io.Writer) (res *Results, err error) {
	// Whatever went wrong, the error must not carry the DSN's password.
	defer func() { err = o.Redact.Error(err) }()
	r := &runner{o: o, log: logw, seeds: make(map[string]queuedb.SeedResult)}
	r.res = NewResults(o)

	if r.dir = o.Dir; r.dir == "" {
		if r.dir, err = os.MkdirTemp("", "webhook-loadtest-"); err != nil {
			return nil, fmt.Errorf("create work directory: %w", err)
		}
		// A failed run keeps its directory: the error points into it.
		defer func() {
			if err == nil && !o.Keep && len(r.res.FailedChecks()) == 0 {
				os.RemoveAll(r.dir)
			} else {
				r.res.Dir = r.dir
				r.logf("work directory kept: %s", r.dir)
			}
		}()
	} else if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return nil, fmt.Errorf("create work directory: %w", err)
	}
	r.res.Dir = r.dir

	bin := o.Caddy
	if bin == "" {
		r.logf("building ./cmd/caddy")
		if bin, err = caddyproc.Build(ctx, r.dir, false); err != nil {
			return nil, fmt.Errorf("%w (or pass -caddy)", err)
		}
	}

	if o.Storage == "postgres" {
		// Not err: the deferred drop below must see the run's result.
		perr := r.preparePostgres(ctx)
		if r.srv != nil {
			defer r.srv.Close()
		}
		if perr != nil {
			return nil, perr
		}
		// Registered before Caddy starts, so it runs after the instances
		// have stopped: a failed run keeps its schemas, as its directory,
		// for a look; the next run drops them first.
		defer func() {
			if err != nil || o.Keep || len(r.res.FailedChecks()) > 0 {
				r.logf("postgres schemas kept: %s*", o.SchemaPrefix)
				return
			}
			if derr := queuedb.DropSchemas(context.WithoutCancel(ctx), o.DSN, r.schemas()); derr != nil {
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
				c.Kill()
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
	r.window = o.Duration / time.Duration(o.Rounds)
	r.up.reset(o.Delay)
	for r.round = 1; r.round <= o.Rounds; r.round++ {
		for _, p := range All {
			if !slices.Contains(o.Phases, p) {
				continue
			}
			if err := r.runPhase(ctx, p); err != nil {
				return r.res, fmt.Errorf("phase %s, round %d: %w (caddy log: %s)", p, r.round, err, strings.Join(r.logPaths(), ", "))
			}
		}
	}
	for _, pr := range r.res.Phases {
		pr.finish()
	}
	var errs []error
	for i, c := range r.caddies {
		r.caddies[i] = nil
		errs = append(errs, c.Stop(stopTimeout))
	}
	return r.res, errors.Join(errs...)
}

// InstanceName is the base name of instance i's config and log in the
// work directory: caddy, then caddy-2, caddy-3, …; and the suffix of its
// data directories.
func InstanceName(i int) (name, suffix string) {
	if i == 0 {
		return "caddy", ""
	}
	suffix = fmt.Sprintf("-%d", i+1)
	return "caddy" + suffix, suffix
}

// logPaths lists the instances' logs.
func (r *runner) logPaths() []string {
	out := make([]string, r.o.Instances)
	for i := range out {
		name, _ := InstanceName(i)
		out[i] = filepath.Join(r.dir, name+".log")
	}
	return out
}

// stopTimeout bounds how long an instance may take to stop; then it is
// killed.
const stopTimeout = time.Minute

// startCaddies starts the instances, each on an idle config with its own
// admin and HTTP address. Each instance's config and log are
// dir/name.json and dir/name.log, its data and config directories under
// dir, so a load test never touches the user's.
func (r *runner) startCaddies(ctx context.Context, bin string) error {
	n := r.o.Instances
	r.adminAddrs, r.httpAddrs = make([]string, n), make([]string, n)
	r.caddies = make([]*caddyproc.Process, n)
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
		name, suffix := InstanceName(i)
		r.logf("starting %s (admin %s, http %s)", name, r.adminAddrs[i], r.httpAddrs[i])
		cfgPath, logPath := filepath.Join(r.dir, name+".json"), filepath.Join(r.dir, name+".log")
		if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
			return fmt.Errorf("write caddy config: %w", err)
		}
		// A new log for this run, should -dir hold an earlier one.
		if err := os.WriteFile(logPath, nil, 0o600); err != nil {
			return fmt.Errorf("create caddy log: %w", err)
		}
		env := append(os.Environ(),
			"XDG_DATA_HOME="+filepath.Join(r.dir, "data"+suffix),
			"XDG_CONFIG_HOME="+filepath.Join(r.dir, "config"+suffix),
			sealedEnv())
		if r.o.Storage == "postgres" {
			env = append(env, caddyDSNEnv+"="+r.o.DSN)
		}
		r.caddies[i], err = caddyproc.Start(ctx, caddyproc.Config{
			Bin:     bin,
			Args:    []string{"run", "--config", cfgPath},
			Env:     env,
			LogPath: logPath,
			Admin:   r.adminAddrs[i],
		})
		if err != nil {
			return fmt.Errorf("%w; see %s", err, logPath)
		}
	}
	return nil
}

// schemas lists the Postgres schemas a run may use: every phase's, in
// every round.
func (r *runner) schemas() []string {
	dbs := []string{"idle.db", "static.db", "slow1.db", "slow32.db", "rate.db", "listen.db", "backlog.db", "orphans.db", "replay.db", "search.db"}
	for round := 1; round <= r.o.Rounds; round++ {
		for _, p := range []string{"ingest", "ingest-traced", "baseline", "e2e", "e2e-traced", rulesPhase, "ingest-sealed", "e2e-sealed"} {
			dbs = append(dbs, fmt.Sprintf("%s-%d.db", p, round))
		}
	}
	out := make([]string, len(dbs))
	for i, db := range dbs {
		out[i] = queuedb.SchemaFor(r.o.SchemaPrefix, db)
	}
	return out
}

// preparePostgres reads the server's version for the report and drops
// the schemas a previous run with the same prefix left, so every phase
// starts from an empty queue.
func (r *runner) preparePostgres(ctx context.Context) error {
	v, err := queuedb.ServerVersion(ctx, r.o.DSN)
	if err != nil {
		return err
	}
	r.res.ServerVersion = v
	if r.srv, err = monitor.OpenServerWatch(ctx, r.o.DSN); err != nil {
		return err
	}
	r.logf("postgres %s at %s: dropping the schemas %s* this run uses, should an earlier run have left them", v, r.o.DSNDesc, r.o.SchemaPrefix)
	return queuedb.DropSchemas(ctx, r.o.DSN, r.schemas())
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.log, "%s  %s\n", time.Now().Format("15:04:05"), r.o.Redact.RedactPassword(fmt.Sprintf(format, args...)))
}

// jobsFor is how many jobs a delivery phase needs so that its queue cannot
// run dry before its last window ends, at rate per second and a margin.
func (r *runner) jobsFor(rate float64) int {
	total := time.Duration(r.o.Rounds)*r.o.Warmup + r.o.Duration
	return int(rate*total.Seconds()*2) + 200
}

// seedAll pre-fills the databases of the phases that start with pending
// jobs, before Caddy starts.
func (r *runner) seedAll(ctx context.Context) error {
	n := float64(r.o.Instances)
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
		{"backlog", "backlog.db", r.o.Backlog, targetName, queue.StatusPending},
		{"orphans", "orphans.db", r.o.Orphans, orphanTarget, queue.StatusPending},
		{"replay", "replay.db", r.o.Dead, targetName, queue.StatusDead},
		{"search", "search.db", r.o.Search, targetName, queue.StatusDone},
	}
	for _, t := range todo {
		if !slices.Contains(r.o.Phases, t.phase) {
			continue
		}
		spec := queuedb.SeedSpec{IDPrefix: t.phase, Jobs: t.n, BodySize: r.o.BodySize, Source: source, Target: t.target, Status: t.status}
		if r.o.Storage == "postgres" {
			schema := queuedb.SchemaFor(r.o.SchemaPrefix, t.db)
			r.logf("seeding schema %s with %d %s jobs for %s", schema, t.n, t.status, t.target)
			s, err := queuedb.SeedPostgres(ctx, r.o.DSN, schema, spec)
			if err != nil {
				return err
			}
			r.logf("seeded %s: %d jobs in %s (vacuum analyze included), %.0f MiB", schema, s.Jobs, s.Took.Round(time.Millisecond), float64(s.DBBytes)/(1<<20))
			r.seeds[t.db] = s
			ckpt := "checkpointed"
			if !s.Checkpoint {
				ckpt = "not checkpointed: the user may not CHECKPOINT, so the server writes the pages out in its own time"
			}
			r.res.Seeds = append(r.res.Seeds, fmt.Sprintf("%s: %d jobs in %s (%.0f MiB, vacuum analyze included; %s)",
				schema, s.Jobs, s.Took.Round(100*time.Millisecond), float64(s.DBBytes)/(1<<20), ckpt))
			continue
		}
		path := filepath.Join(r.dir, t.db)
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("remove old %s: %w", t.db, err)
			}
		}
		r.logf("seeding %s with %d %s jobs for %s", t.db, t.n, t.status, t.target)
		s, err := queuedb.Seed(ctx, path, spec)
		if err != nil {
			return err
		}
		r.logf("seeded %s: %d jobs in %s, %.0f MiB", t.db, s.Jobs, s.Took.Round(time.Millisecond), float64(s.DBBytes)/(1<<20))
		r.seeds[t.db] = s
		r.res.Seeds = append(r.res.Seeds, fmt.Sprintf("%s: %d jobs in %s (%.0f MiB)", t.db, s.Jobs, s.Took.Round(100*time.Millisecond), float64(s.DBBytes)/(1<<20)))
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
		logLevel:   r.o.LogLevel,
		adminAddr:  r.adminAddrs[i],
		httpAddr:   r.httpAddrs[i],
	}
	if r.o.Storage == "postgres" {
		pc.schema = queuedb.SchemaFor(r.o.SchemaPrefix, db)
	} else {
		pc.db = filepath.Join(r.dir, db)
		pc.sync = r.o.Synchronous
	}
	return pc
}

// openQueue opens the count checks' reader of a phase's database.
func (r *runner) openQueue(ctx context.Context, db string) (queuedb.Reader, error) {
	if r.o.Storage == "postgres" {
		return queuedb.Open(ctx, queuedb.Location{DSN: r.o.DSN, Schema: queuedb.SchemaFor(r.o.SchemaPrefix, db)})
	}
	return queuedb.Open(ctx, queuedb.Location{Path: filepath.Join(r.dir, db)})
}

// eachCaddy calls f for every instance at once and returns the first
// instance's error, if any failed.
func (r *runner) eachCaddy(f func(i int, c *caddyproc.Process) error) error {
	errs := make([]error, len(r.caddies))
	var wg sync.WaitGroup
	for i, c := range r.caddies {
		wg.Go(func() { errs[i] = f(i, c) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil && len(errs) > 1 {
			name, _ := InstanceName(i)
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
	return r.eachCaddy(func(i int, c *caddyproc.Process) error { return c.Admin().Load(ctx, cfgs[i]) })
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

// perInstance is ", each of N instances" for progress lines, or nothing
// with one instance.
func (r *runner) perInstance() string {
	if r.o.Instances == 1 {
		return ""
	}
	return fmt.Sprintf(" (the workers in each of %d instances, the connections spread over them)", r.o.Instances)
}
