// Command webhook-loadtest measures the webhook receiver against Caddy's own
// ceiling, on one Caddy process (or, on Postgres, several sharing a queue),
// and checks that the counts add up.
//
// It builds Caddy with the plugin (or takes -caddy), writes its own JSON
// config into a temporary directory, starts Caddy on loopback, and drives it
// with a load generator of its own: keep-alive connections, each sending its
// next request as soon as the last is answered, 512-byte bodies signed with
// the GitHub scheme, a unique delivery id per request. The phases, in order,
// each loading its own config into the same Caddy through the admin API:
//
//	static          a respond route: Caddy's ceiling on this machine
//	ingest          signed events to webhook_receiver, workers 0, synchronous=full
//	ingest-traced   ingest paired with itself: the requests alternate every
//	                100ms between a W3C traceparent and tracestate on every
//	                request and none, and the two halves are counted apart
//	baseline        ingest with one commit per request (storage.max_batch 1)
//	e2e             ingest with 32 workers delivering to a respond route
//	e2e-traced      e2e paired the same way, so each traced event's delivery
//	                sends a traceparent: the trace context's cost is the
//	                traced half's rate over the plain half's
//	slow1, slow32   1 and 32 workers delivering to an upstream that takes 5 ms
//	rate            32 workers delivering to that upstream through a target
//	                with rate 200/s: the delivered rate must be within 5 %
//	listen          a pull target's jobs delivered to that upstream by
//	                `caddy webhook listen --concurrency 32`, beside slow32's
//	                http target
//	backlog         ingest, then e2e, with a million jobs already pending
//	orphans         e2e with 500,000 pending jobs of a target the config does
//	                not have (-orphans): no claim may read them
//	replay          ingest while the admin API replays 500,000 dead jobs
//	                (-dead), in chunks
//	rules           ingest of 2 KB Stripe-like bodies paired as the traced
//	                phases are: every 100ms the requests switch between a
//	                receiver without a filter and one whose target's filter
//	                reads two body fields; the filter must cost less than 5 %
//	search          no traffic: the admin API searches a million stored
//	                events (-search) by content for the 10 whose body
//	                matches, request after request from the cursor; events
//	                walked per second and Caddy's RSS before and at its peak
//	sealed          ingest and e2e again with encryption at rest on (the
//	                webhook app's encryption block), set beside the plain
//	                ingest and e2e of the same run (sealed.go)
//
// Every 202 is looked up in the database afterwards, and every job the
// database calls done in the slow phases must have reached the recording
// upstream; the program exits 1 when a count does not add up (and with
// -strict when a target is missed). Run it on a quiet machine:
//
//	go run ./cmd/webhook-loadtest
//	go run ./cmd/webhook-loadtest -smoke       # seconds, small counts (CI)
//	go run ./cmd/webhook-loadtest -phases ingest,e2e -d 20s -profile e2e -keep
//
// -profile names phases whose windows are CPU-profiled through Caddy's
// /debug/pprof/profile; each load phase of them (static, the ingest and
// e2e phases, backlog-ingest, backlog-e2e, orphans-e2e, replay-ingest,
// rules) also gets a cost table in the report, per accepted event over the
// same windows:
//
//	go run ./cmd/webhook-loadtest -phases static,ingest,e2e -d 6s -profile static,ingest,e2e
//
// -against judges a change: it runs the phases with the build before
// (-against) and the build under test (-caddy) in turn, -pairs times each,
// the order swapped in every other pair, and prints each pair and the
// means, how often the new build was ahead, and each phase over static in
// the same run (compare.go):
//
//	go run ./cmd/webhook-loadtest -caddy /tmp/caddy-new -against /tmp/caddy-old -pairs 6 -phases static,ingest,e2e -rounds 1 -d 4s
//
// The table's rows:
//
//   - disk: write_bytes, read_bytes, syscw and syscr deltas of
//     /proc/<caddy pid>/io (the syscalls count socket writes too);
//
//   - commits: the store's own counters, read between two batches through
//     the admin API's /debug/vars (webhook_writers): events and writes
//     per commit, and on SQLite the pages the writer sent to the WAL
//     (SQLITE_DBSTATUS_CACHE_WRITE), one frame each; on Postgres the
//     server's write transactions and WAL bytes per event;
//
//   - SQLite's WAL frames by table and index: the -wal file's frame
//     headers, read every 50 ms during the window, their page numbers
//     mapped through the dbstat table (a sample: a WAL generation that
//     starts and ends between two reads is missed);
//
//   - the idle time of each core, from /proc/stat (the whole machine);
//
//   - CPU µs per event and % of samples by stage: Caddy's HTTP, socket
//     syscalls, our handler, signature verify, the enqueue hand-off, the
//     writer's SQL per statement (named by its call site), the commit's
//     WAL writes and fsync, checkpoints, delivery, GC, scheduler
//     wake-ups, logging (classify in cost.go says which frames make each).
//
// The queue is a SQLite file per phase in the work directory, or with
// -storage postgres a schema per phase (lt_ingest_1, lt_backlog, …) on the
// server of -dsn or $CADDYWEBHOOK_TEST_POSTGRES_DSN, seeded with
// generate_series; -instances N then runs N Caddy processes on each
// phase's schema, each with the phase's workers, the connections spread
// round-robin over them:
//
//	eval "$(.ci/start-postgres)"
//	go run ./cmd/webhook-loadtest -storage postgres
//	go run ./cmd/webhook-loadtest -storage postgres -instances 2 -phases e2e,slow32
//
// The DSN reaches Caddy through its environment, never a config file, and
// its password is redacted from everything the program prints
// (postgres.Redactor, the rule of the store's own errors).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/caddywebhook/caddywebhook/queue/postgres"
)

// allPhases are the phases in the order they run.
var allPhases = []string{"static", "ingest", "ingest-traced", "baseline", "e2e", "e2e-traced", "slow1", "slow32", "rate", "listen", "backlog", "orphans", "replay", "rules", "search", sealedPhase}

// options are the command's flags.
type options struct {
	caddy       string        // Caddy binary; empty: build ./cmd/caddy
	dir         string        // work directory; empty: a temporary one
	keep        bool          // keep the work directory
	duration    time.Duration // measured window per phase
	warmup      time.Duration // traffic before each window
	rounds      int           // the phases run this many times, each with a share of the window
	conns       int           // load connections
	bodySize    int           // bytes per body
	phases      []string      // which phases, in allPhases order
	backlog     int           // jobs pending before the backlog phase
	orphans     int           // unroutable jobs pending before the orphans phase
	dead        int           // dead jobs before the replay phase
	search      int           // events in the store of the search phase
	workers     int           // workers of the e2e and backlog phases
	delay       time.Duration // the slow upstream's answer time
	smoke       bool          // small and short, for CI
	profile     []string      // phases whose window is CPU-profiled
	trace       []string      // phases whose window is traced
	logLevel    string        // Caddy's log level
	synchronous string        // storage.synchronous of every phase
	strict      bool          // a missed target fails the run
	against     string        // a second Caddy binary, the build before: compare the two (compare.go)
	pairs       int           // -against: runs of each binary, alternating
	args        []string      // the command line, for the report

	storage      string             // sqlite or postgres
	dsn          string             // the Postgres server; never printed
	dsnDesc      string             // the DSN without its password, for the report
	schemaPrefix string             // the phases' Postgres schemas are named with it
	instances    int                // Caddy processes sharing each phase's queue
	redact       *postgres.Redactor // takes the DSN's password out of what is printed
}

// parseFlags reads the command line. -smoke changes the defaults of the
// sizes and times, not values given explicitly.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	o := options{args: args}
	fs := flag.NewFlagSet("webhook-loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.caddy, "caddy", "", "Caddy binary with the plugin (default: go build ./cmd/caddy into the work directory)")
	fs.StringVar(&o.dir, "dir", "", "work directory for the binary, configs, databases and logs (default: a new temporary directory)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work directory (databases, caddy.log, profiles)")
	fs.DurationVar(&o.duration, "d", 10*time.Second, "measured window of each phase")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "load before each phase's window, not measured")
	fs.IntVar(&o.rounds, "rounds", 3, "run the phases this many times in turn, each with a 1/rounds share of the window, so the machine's changing load weighs on every phase alike")
	fs.IntVar(&o.conns, "c", 32, "connections of the load generator")
	fs.IntVar(&o.bodySize, "body", 512, "body size in bytes")
	phases := fs.String("phases", strings.Join(allPhases, ","), "phases to run, comma-separated: "+strings.Join(allPhases, ", "))
	fs.IntVar(&o.backlog, "backlog", 1_000_000, "jobs already pending in the backlog phase, seeded into the database before Caddy starts")
	fs.IntVar(&o.orphans, "orphans", 500_000, "pending jobs of a target the config does not have, seeded before the orphans phase")
	fs.IntVar(&o.dead, "dead", 500_000, "dead jobs seeded before the replay phase, which replays them all during its window")
	fs.IntVar(&o.search, "search", 1_000_000, "events seeded before the search phase, which searches them by content for the 10 that match")
	fs.IntVar(&o.workers, "workers", 32, "workers in the e2e and backlog phases")
	fs.DurationVar(&o.delay, "delay", 5*time.Millisecond, "how long the slow upstream takes to answer")
	fs.BoolVar(&o.smoke, "smoke", false, "CI mode: 1s windows, 8 connections, a 20,000-job backlog; fails when a count does not add up")
	profile := fs.String("profile", "", "comma-separated phases to CPU-profile through Caddy's /debug/pprof, each with a cost table per event in the report (implies -keep); e.g. ingest,e2e,backlog-e2e")
	trace := fs.String("trace", "", "comma-separated phases to capture an execution trace of through /debug/pprof/trace (implies -keep)")
	fs.StringVar(&o.logLevel, "log-level", "INFO", "Caddy's log level (its log goes to caddy.log in the work directory)")
	fs.StringVar(&o.synchronous, "synchronous", "full", "storage.synchronous of the queue: full (the default, and the figures' condition) or normal, to see what fsync costs")
	fs.BoolVar(&o.strict, "strict", false, "exit 1 when a target is missed, not only when a count is wrong")
	fs.StringVar(&o.against, "against", "", "a second Caddy binary, the build before a change: run the phases with it and with -caddy in turn, -pairs times each, and print the two side by side")
	fs.IntVar(&o.pairs, "pairs", 3, "with -against: how many runs of each binary")
	fs.StringVar(&o.storage, "storage", "sqlite", "queue backend: sqlite (a file per phase in the work directory) or postgres (a schema per phase on the -dsn server)")
	// No default in the flag itself: -help would print it, password and all.
	fs.StringVar(&o.dsn, "dsn", "", "PostgreSQL connection string for -storage postgres (default: $"+dsnEnv+"); its password is never printed")
	fs.StringVar(&o.schemaPrefix, "schema-prefix", "lt_", "prefix of the phases' Postgres schemas (lt_ingest_1, lt_backlog, …); the run drops those it uses before it starts and, unless -keep, at its end")
	fs.IntVar(&o.instances, "instances", 1, "Caddy processes sharing each phase's queue, each with the phase's workers; the load is spread over them (postgres only)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.smoke {
		defaults := []struct {
			name string
			f    func()
		}{
			{"d", func() { o.duration = time.Second }},
			{"warmup", func() { o.warmup = 200 * time.Millisecond }},
			{"c", func() { o.conns = 8 }},
			{"backlog", func() { o.backlog = 20_000 }},
			{"orphans", func() { o.orphans = 20_000 }},
			{"dead", func() { o.dead = 20_000 }},
			{"search", func() { o.search = 20_000 }},
			{"rounds", func() { o.rounds = 1 }},
		}
		for _, d := range defaults {
			if !set[d.name] {
				d.f()
			}
		}
	}
	for p := range strings.SplitSeq(*phases, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !slices.Contains(allPhases, p) {
			return o, fmt.Errorf("-phases: unknown phase %q (want %s)", p, strings.Join(allPhases, ", "))
		}
		o.phases = append(o.phases, p)
	}
	if len(o.phases) == 0 {
		return o, fmt.Errorf("-phases: no phase given")
	}
	if *profile != "" {
		o.profile = strings.Split(*profile, ",")
		o.keep = true
	}
	if *trace != "" {
		o.trace = strings.Split(*trace, ",")
		o.keep = true
	}
	switch {
	case o.duration < 100*time.Millisecond:
		return o, fmt.Errorf("-d %s: at least 100ms", o.duration)
	case o.warmup < 0:
		return o, fmt.Errorf("-warmup %s: must not be negative", o.warmup)
	case o.rounds < 1:
		return o, fmt.Errorf("-rounds %d: at least 1", o.rounds)
	case o.duration/time.Duration(max(o.rounds, 1)) < 100*time.Millisecond:
		return o, fmt.Errorf("-d %s in %d rounds: at least 100ms a round", o.duration, o.rounds)
	case o.conns < 1:
		return o, fmt.Errorf("-c %d: at least 1", o.conns)
	case o.bodySize < minBodySize:
		return o, fmt.Errorf("-body %d: at least %d bytes", o.bodySize, minBodySize)
	case o.backlog < 1:
		return o, fmt.Errorf("-backlog %d: at least 1", o.backlog)
	case o.orphans < 1:
		return o, fmt.Errorf("-orphans %d: at least 1", o.orphans)
	case o.dead < 1:
		return o, fmt.Errorf("-dead %d: at least 1", o.dead)
	case o.search < 10*searchMatches:
		return o, fmt.Errorf("-search %d: at least %d", o.search, 10*searchMatches)
	case o.workers < 1:
		return o, fmt.Errorf("-workers %d: at least 1", o.workers)
	case o.synchronous != "full" && o.synchronous != "normal":
		return o, fmt.Errorf("-synchronous %q: full or normal", o.synchronous)
	case o.delay < 0:
		return o, fmt.Errorf("-delay %s: must not be negative", o.delay)
	case o.instances < 1:
		return o, fmt.Errorf("-instances %d: at least 1", o.instances)
	case o.conns < o.instances:
		return o, fmt.Errorf("-c %d: at least one connection per instance (-instances %d)", o.conns, o.instances)
	}
	if err := o.checkComparison(set); err != nil {
		return o, err
	}
	return o, o.checkStorage(set)
}

// checkStorage checks the flags of the queue backend; set holds the flags
// given explicitly. With -storage postgres and no -dsn the DSN comes from
// $CADDYWEBHOOK_TEST_POSTGRES_DSN.
func (o *options) checkStorage(set map[string]bool) error {
	switch o.storage {
	case "sqlite":
		switch {
		case o.instances > 1:
			return fmt.Errorf("-instances %d: several Caddy instances share a queue only on postgres (-storage postgres)", o.instances)
		case set["dsn"]:
			return errors.New("-dsn applies to -storage postgres only")
		case set["schema-prefix"]:
			return errors.New("-schema-prefix applies to -storage postgres only")
		}
		return nil
	case "postgres":
	default:
		return fmt.Errorf("-storage %q: sqlite or postgres", o.storage)
	}
	if set["synchronous"] {
		return errors.New("-synchronous applies to sqlite only: every PostgreSQL commit is flushed (the store runs with synchronous_commit=on)")
	}
	if !schemaPrefixRE.MatchString(o.schemaPrefix) || strings.HasPrefix(o.schemaPrefix, "pg_") {
		return fmt.Errorf("-schema-prefix %q: lower-case letters, digits and underscores, at most 32, not starting with a digit or pg_", o.schemaPrefix)
	}
	if o.dsn == "" {
		o.dsn = os.Getenv(dsnEnv)
	}
	if o.dsn == "" {
		return errors.New(noDSNHelp)
	}
	o.redact = postgres.NewRedactor(o.dsn)
	desc, err := checkDSN(o.dsn)
	if err != nil {
		return err
	}
	o.dsnDesc = desc
	return nil
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if err == flag.ErrHelp {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "webhook-loadtest:", postgres.NewRedactor(o.dsn).Error(err))
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.against != "" {
		c, err := runComparison(ctx, o, os.Stderr)
		c.print(os.Stdout)
		if err != nil {
			fmt.Fprintln(os.Stderr, "webhook-loadtest:", o.redact.Error(err))
			os.Exit(1)
		}
		return
	}
	rep, err := run(ctx, o, os.Stderr)
	if rep != nil {
		rep.print(os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "webhook-loadtest:", o.redact.Error(err))
		os.Exit(1)
	}
	if bad := rep.failedChecks(); len(bad) > 0 {
		fmt.Fprintf(os.Stderr, "webhook-loadtest: %d count check(s) failed\n", len(bad))
		os.Exit(1)
	}
	if o.strict {
		if missed := rep.missedTargets(); len(missed) > 0 {
			fmt.Fprintf(os.Stderr, "webhook-loadtest: missed: %s\n", strings.Join(missed, "; "))
			os.Exit(1)
		}
	}
}
