package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/loadgen"
	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/phases"
	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/queuedb"
	"github.com/caddywebhook/caddywebhook/queue/postgres"
)

// options are the command's flags: what a run does, and how the command
// runs it.
type options struct {
	phases.Options
	smoke   bool   // small and short, for CI
	strict  bool   // a missed target fails the run
	against string // a second Caddy binary, the build before: compare the two (package compare)
	pairs   int    // -against: runs of each binary, alternating
}

// parseFlags reads the command line. -smoke changes the defaults of the
// sizes and times, not values given explicitly.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	o := options{Options: phases.Options{Args: args}}
	fs := flag.NewFlagSet("webhook-loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Caddy, "caddy", "", "Caddy binary with the plugin (default: go build ./cmd/caddy into the work directory)")
	fs.StringVar(&o.Dir, "dir", "", "work directory for the binary, configs, databases and logs (default: a new temporary directory)")
	fs.BoolVar(&o.Keep, "keep", false, "keep the work directory (databases, caddy.log, profiles)")
	fs.DurationVar(&o.Duration, "d", 10*time.Second, "measured window of each phase")
	fs.DurationVar(&o.Warmup, "warmup", time.Second, "load before each phase's window, not measured")
	fs.IntVar(&o.Rounds, "rounds", 3, "run the phases this many times in turn, each with a 1/rounds share of the window, so the machine's changing load weighs on every phase alike")
	fs.IntVar(&o.Conns, "c", 32, "connections of the load generator")
	fs.IntVar(&o.BodySize, "body", 512, "body size in bytes")
	phaseList := fs.String("phases", strings.Join(phases.All, ","), "phases to run, comma-separated: "+strings.Join(phases.All, ", "))
	fs.IntVar(&o.Backlog, "backlog", 1_000_000, "jobs already pending in the backlog phase, seeded into the database before Caddy starts")
	fs.IntVar(&o.Orphans, "orphans", 500_000, "pending jobs of a target the config does not have, seeded before the orphans phase")
	fs.IntVar(&o.Dead, "dead", 500_000, "dead jobs seeded before the replay phase, which replays them all during its window")
	fs.IntVar(&o.Search, "search", 1_000_000, "events seeded before the search phase, which searches them by content for the 10 that match")
	fs.IntVar(&o.Workers, "workers", 32, "workers in the e2e and backlog phases")
	fs.DurationVar(&o.Delay, "delay", 5*time.Millisecond, "how long the slow upstream takes to answer")
	fs.BoolVar(&o.smoke, "smoke", false, "CI mode: 1s windows, 8 connections, a 20,000-job backlog; fails when a count does not add up")
	profile := fs.String("profile", "", "comma-separated phases to CPU-profile through Caddy's /debug/pprof, each with a cost table per event in the report (implies -keep); e.g. ingest,e2e,backlog-e2e")
	trace := fs.String("trace", "", "comma-separated phases to capture an execution trace of through /debug/pprof/trace (implies -keep)")
	fs.StringVar(&o.LogLevel, "log-level", "INFO", "Caddy's log level (its log goes to caddy.log in the work directory)")
	fs.StringVar(&o.Synchronous, "synchronous", "full", "storage.synchronous of the queue: full (the default, and the figures' condition) or normal, to see what fsync costs")
	fs.BoolVar(&o.strict, "strict", false, "exit 1 when a target is missed, not only when a count is wrong")
	fs.StringVar(&o.against, "against", "", "a second Caddy binary, the build before a change: run the phases with it and with -caddy in turn, -pairs times each, and print the two side by side")
	fs.IntVar(&o.pairs, "pairs", 3, "with -against: how many runs of each binary")
	fs.StringVar(&o.Storage, "storage", "sqlite", "queue backend: sqlite (a file per phase in the work directory) or postgres (a schema per phase on the -dsn server)")
	// No default in the flag itself: -help would print it, password and all.
	fs.StringVar(&o.DSN, "dsn", "", "PostgreSQL connection string for -storage postgres (default: $"+dsnEnv+"); its password is never printed")
	fs.StringVar(&o.SchemaPrefix, "schema-prefix", "lt_", "prefix of the phases' Postgres schemas (lt_ingest_1, lt_backlog, …); the run drops those it uses before it starts and, unless -keep, at its end")
	fs.IntVar(&o.Instances, "instances", 1, "Caddy processes sharing each phase's queue, each with the phase's workers; the load is spread over them (postgres only)")
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
			{"d", func() { o.Duration = time.Second }},
			{"warmup", func() { o.Warmup = 200 * time.Millisecond }},
			{"c", func() { o.Conns = 8 }},
			{"backlog", func() { o.Backlog = 20_000 }},
			{"orphans", func() { o.Orphans = 20_000 }},
			{"dead", func() { o.Dead = 20_000 }},
			{"search", func() { o.Search = 20_000 }},
			{"rounds", func() { o.Rounds = 1 }},
		}
		for _, d := range defaults {
			if !set[d.name] {
				d.f()
			}
		}
	}
	for p := range strings.SplitSeq(*phaseList, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !slices.Contains(phases.All, p) {
			return o, fmt.Errorf("-phases: unknown phase %q (want %s)", p, strings.Join(phases.All, ", "))
		}
		o.Phases = append(o.Phases, p)
	}
	if len(o.Phases) == 0 {
		return o, fmt.Errorf("-phases: no phase given")
	}
	if *profile != "" {
		o.Profile = strings.Split(*profile, ",")
		o.Keep = true
	}
	if *trace != "" {
		o.Trace = strings.Split(*trace, ",")
		o.Keep = true
	}
	switch {
	case o.Duration < 100*time.Millisecond:
		return o, fmt.Errorf("-d %s: at least 100ms", o.Duration)
	case o.Warmup < 0:
		return o, fmt.Errorf("-warmup %s: must not be negative", o.Warmup)
	case o.Rounds < 1:
		return o, fmt.Errorf("-rounds %d: at least 1", o.Rounds)
	case o.Duration/time.Duration(max(o.Rounds, 1)) < 100*time.Millisecond:
		return o, fmt.Errorf("-d %s in %d rounds: at least 100ms a round", o.Duration, o.Rounds)
	case o.Conns < 1:
		return o, fmt.Errorf("-c %d: at least 1", o.Conns)
	case o.BodySize < loadgen.MinBodySize:
		return o, fmt.Errorf("-body %d: at least %d bytes", o.BodySize, loadgen.MinBodySize)
	case o.Backlog < 1:
		return o, fmt.Errorf("-backlog %d: at least 1", o.Backlog)
	case o.Orphans < 1:
		return o, fmt.Errorf("-orphans %d: at least 1", o.Orphans)
	case o.Dead < 1:
		return o, fmt.Errorf("-dead %d: at least 1", o.Dead)
	case o.Search < 10*phases.SearchMatches:
		return o, fmt.Errorf("-search %d: at least %d", o.Search, 10*phases.SearchMatches)
	case o.Workers < 1:
		return o, fmt.Errorf("-workers %d: at least 1", o.Workers)
	case o.Synchronous != "full" && o.Synchronous != "normal":
		return o, fmt.Errorf("-synchronous %q: full or normal", o.Synchronous)
	case o.Delay < 0:
		return o, fmt.Errorf("-delay %s: must not be negative", o.Delay)
	case o.Instances < 1:
		return o, fmt.Errorf("-instances %d: at least 1", o.Instances)
	case o.Conns < o.Instances:
		return o, fmt.Errorf("-c %d: at least one connection per instance (-instances %d)", o.Conns, o.Instances)
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
	switch o.Storage {
	case "sqlite":
		switch {
		case o.Instances > 1:
			return fmt.Errorf("-instances %d: several Caddy instances share a queue only on postgres (-storage postgres)", o.Instances)
		case set["dsn"]:
			return errors.New("-dsn applies to -storage postgres only")
		case set["schema-prefix"]:
			return errors.New("-schema-prefix applies to -storage postgres only")
		}
		return nil
	case "postgres":
	default:
		return fmt.Errorf("-storage %q: sqlite or postgres", o.Storage)
	}
	if set["synchronous"] {
		return errors.New("-synchronous applies to sqlite only: every PostgreSQL commit is flushed (the store runs with synchronous_commit=on)")
	}
	if !queuedb.ValidSchemaPrefix(o.SchemaPrefix) {
		return fmt.Errorf("-schema-prefix %q: lower-case letters, digits and underscores, at most 32, not starting with a digit or pg_", o.SchemaPrefix)
	}
	if o.DSN == "" {
		o.DSN = os.Getenv(dsnEnv)
	}
	if o.DSN == "" {
		return errors.New(noDSNHelp)
	}
	o.Redact = postgres.NewRedactor(o.DSN)
	desc, err := checkDSN(o.DSN)
	if err != nil {
		return err
	}
	o.DSNDesc = desc
	return nil
}

// dsnEnv is the variable the Postgres tests and .ci/start-postgres use
// for the test server; -dsn defaults to it.
const dsnEnv = "CADDYWEBHOOK_TEST_POSTGRES_DSN"

// noDSNHelp is what a -storage postgres run without a server says.
const noDSNHelp = "-storage postgres needs a server: start one with " +
	`eval "$(.ci/start-postgres)"` + " (it exports " + dsnEnv + "), or pass -dsn"

// checkDSN makes sure dsn parses as a PostgreSQL connection string and
// returns a description of it without the password, for the report:
// user@host:port/database. pgconn's parse errors quote the string, so the
// error here says only that it did not parse.
func checkDSN(dsn string) (string, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "", errors.New("-dsn does not parse as a PostgreSQL connection string (a URL postgres://user:password@host:port/db or key=value pairs)")
	}
	return fmt.Sprintf("%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database), nil
}
