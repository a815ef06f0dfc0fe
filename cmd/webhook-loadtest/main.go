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
//	                ingest and e2e of the same run
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
// the same run (package compare):
//
//	go run ./cmd/webhook-loadtest -caddy /tmp/caddy-new -against /tmp/caddy-old -pairs 6 -phases static,ingest,e2e -rounds 1 -d 4s
//
// The table's rows:
//
//   - disk: write_bytes, read_bytes, syscw and syscr deltas of
//     /proc/<caddy pid>/io (the syscalls count socket writes too);
//
//   - commits: the store's own counters, read between two batches through
//     the admin API's /metrics (caddy_webhook_store_*): events and writes
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
//     wake-ups, logging (classify in package monitor says which frames
//     make each).
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
//
// The program is main (this file) and its flags (flags.go) over the
// packages of internal/, one concern each: phases runs the phases and
// checks the counts, with loadgen's load generator, monitor's process
// monitor and cost table, and queuedb's seeds and readers of the queue;
// report judges and prints the results; compare runs -against's pairs.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/compare"
	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/phases"
	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/report"
	"github.com/caddywebhook/caddywebhook/queue/postgres"
)

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if err == flag.ErrHelp {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "webhook-loadtest:", postgres.NewRedactor(o.DSN).Error(err))
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.against != "" {
		c, err := compare.Run(ctx, o.Options, o.against, o.pairs, os.Stderr)
		c.Print(os.Stdout)
		if err != nil {
			fmt.Fprintln(os.Stderr, "webhook-loadtest:", o.Redact.Error(err))
			os.Exit(1)
		}
		return
	}
	res, err := phases.Run(ctx, o.Options, os.Stderr)
	if res != nil {
		report.Print(os.Stdout, res)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "webhook-loadtest:", o.Redact.Error(err))
		os.Exit(1)
	}
	if bad := res.FailedChecks(); len(bad) > 0 {
		fmt.Fprintf(os.Stderr, "webhook-loadtest: %d count check(s) failed\n", len(bad))
		os.Exit(1)
	}
	if o.strict {
		if missed := report.MissedTargets(res); len(missed) > 0 {
			fmt.Fprintf(os.Stderr, "webhook-loadtest: missed: %s\n", strings.Join(missed, "; "))
			os.Exit(1)
		}
	}
}

// checkComparison checks the flags of -against; set holds the flags given
// explicitly.
func (o *options) checkComparison(set map[string]bool) error {
	if o.against == "" {
		if set["pairs"] {
			return fmt.Errorf("-pairs applies to -against only")
		}
		return nil
	}
	switch {
	case o.Caddy == "":
		return fmt.Errorf("-against needs -caddy: the build under test, beside the build before (-against)")
	case o.Caddy == o.against:
		return fmt.Errorf("-against %s is -caddy itself", o.against)
	case o.pairs < 1:
		return fmt.Errorf("-pairs %d: at least 1", o.pairs)
	case o.Dir != "":
		return fmt.Errorf("-dir does not apply to -against: each run gets a work directory of its own")
	}
	return nil
}
