package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// staticRef is the reference for the static phase: Caddy's respond route
// under wrk on these 2-core machines (docs: DESIGN.md, "How it gets fast").
const staticRef = 35000.0

// rssBudget is the allowed RSS growth with a million jobs pending.
const rssBudget = 32 << 20

// phaseResult is what one phase measured and checked.
type phaseResult struct {
	name string

	// Summed over the rounds; finish derives the figures below.
	load            *loadResult // every round's requests; accepted ids are not kept
	delivered       int64
	deliveredWindow time.Duration
	slopes          []float64 // per round
	cpuSeconds      float64   // Caddy's CPU time in the windows
	selfSeconds     float64   // the load test's own (generator, upstream)
	cpuWindow       time.Duration
	server          serverFigures // postgres: the server's share

	rate float64 // answers with the wanted status per second, in the windows
	// A paired phase: the rates of its two halves, the first (plain) and
	// the second (with a trace context in ingest-traced and e2e-traced, to
	// the filtered receiver in rules); rate is the second's.
	firstRate, secondRate float64
	p50, p99              time.Duration
	deliveredRate         float64
	backlogEnd            int64   // pending+running at the end, from GET /webhook/stats; -1 if not read
	backlogSlope          float64 // growth of the round's own backlog, jobs/s, mean of the rounds
	ref                   float64 // reference delivered/s of a slow phase
	ceiling               float64 // slow phases: requests a plain Go client got answered, summed over rounds (rate × window)
	ceilingWindow         time.Duration
	held                  time.Duration // slow phases: the upstream's hold time summed over the deliveries in the windows
	heldCount             int64

	startRSS, endRSS, peakRSS int64
	cores                     float64    // Caddy's CPU use in the windows, in cores
	selfCores                 float64    // the load test's own
	profile, trace            string     // files captured in the window
	roundProfiles             []string   // the CPU profiles of the round running, for the cost table
	cost                      *phaseCost // -profile: the cost per event

	finished bool     // the phase ran to its end
	counts   []string // what the checks counted, for the report
	failed   []string // count checks that failed
}

// serverFigures sum the server's counters over a phase's windows.
type serverFigures struct {
	window     time.Duration // windows with both samples read
	cpuWindow  time.Duration // those with the CPU time read too
	cpuSeconds float64
	xacts      int64 // transaction ids taken: write transactions
	walBytes   int64
}

// add adds one window's counters.
func (f *serverFigures) add(d serverSample, took time.Duration) {
	f.window += took
	f.xacts += d.xid
	f.walBytes += d.lsn
	if d.cpuOK {
		f.cpuWindow += took
		f.cpuSeconds += d.cpu.Seconds()
	}
}

// cores is the server's CPU use in cores, -1 when it was not read.
func (f serverFigures) cores() float64 {
	if f.cpuWindow <= 0 {
		return -1
	}
	return f.cpuSeconds / f.cpuWindow.Seconds()
}

// xactRate is the write transactions per second, across the server.
func (f serverFigures) xactRate() float64 {
	if f.window <= 0 {
		return 0
	}
	return float64(f.xacts) / f.window.Seconds()
}

// walRate is the WAL written per second, in MiB.
func (f serverFigures) walRate() float64 {
	if f.window <= 0 {
		return 0
	}
	return float64(f.walBytes) / (1 << 20) / f.window.Seconds()
}

// addLoad adds one round's traffic to the phase's.
func (pr *phaseResult) addLoad(res *loadResult) {
	if pr.load == nil {
		pr.load = &loadResult{statuses: make(map[int]int64)}
	}
	m := pr.load
	m.window += res.window
	m.sent += res.sent
	m.ok += res.ok
	m.okWindow += res.okWindow
	m.okSecond += res.okSecond
	m.windowSecond += res.windowSecond
	m.transport += res.transport
	for s, n := range res.statuses {
		m.statuses[s] += n
	}
	m.lat = append(m.lat, res.lat...)
}

// finish derives the phase's figures from its rounds.
func (pr *phaseResult) finish() {
	pr.finished = true
	if pr.load != nil {
		slices.Sort(pr.load.lat)
		pr.rate = pr.load.okRate()
		if first, second := pr.load.pairRates(); second > 0 {
			pr.firstRate, pr.secondRate, pr.rate = first, second, second
		}
		pr.p50 = percentile(pr.load.lat, 0.50)
		pr.p99 = percentile(pr.load.lat, 0.99)
	}
	if pr.deliveredWindow > 0 {
		pr.deliveredRate = float64(pr.delivered) / pr.deliveredWindow.Seconds()
	}
	if pr.cpuWindow > 0 {
		pr.cores = pr.cpuSeconds / pr.cpuWindow.Seconds()
		pr.selfCores = pr.selfSeconds / pr.cpuWindow.Seconds()
	}
	if len(pr.slopes) > 0 {
		var sum float64
		for _, v := range pr.slopes {
			sum += v
		}
		pr.backlogSlope = sum / float64(len(pr.slopes))
	}
}

// check records a failed count check with its message when ok is false.
func (pr *phaseResult) check(ok bool, format string, args ...any) {
	if !ok {
		pr.failed = append(pr.failed, fmt.Sprintf(format, args...))
	}
}

// report is a run's results.
type report struct {
	o         options
	started   time.Time
	loadavg   string
	dir       string
	seeds     []string
	notes     []string // single measurements (replay, stats timings) printed under the table
	phases    []*phaseResult
	byName    map[string]*phaseResult
	goVersion string

	serverVersion string // PostgreSQL's, with -storage postgres
}

func newReport(o options) *report {
	la, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(la))
	if len(f) > 3 {
		f = f[:3]
	}
	return &report{
		o:         o,
		started:   time.Now().UTC(),
		loadavg:   strings.Join(f, " "),
		byName:    make(map[string]*phaseResult),
		goVersion: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// phase returns the named phase's result, created on first use.
func (rep *report) phase(name string) *phaseResult {
	if pr := rep.byName[name]; pr != nil {
		return pr
	}
	pr := &phaseResult{name: name, backlogEnd: -1}
	rep.phases = append(rep.phases, pr)
	rep.byName[name] = pr
	return pr
}

// ran returns the named phase if it ran.
func (rep *report) ran(name string) *phaseResult {
	pr := rep.byName[name]
	if pr == nil || !pr.finished {
		return nil
	}
	return pr
}

// failedChecks lists every failed count check, prefixed with its phase.
func (rep *report) failedChecks() []string {
	var out []string
	for _, pr := range rep.phases {
		for _, f := range pr.failed {
			out = append(out, pr.name+": "+f)
		}
	}
	return out
}

// figure is one ratio with its target, as docs/BENCHMARKS.md lists them.
type figure struct {
	name     string
	value    string
	ref      string
	ratio    float64
	target   string
	ok       bool
	hasCheck bool // the figure has a target
	missing  string
}

// figures computes the ratios of the targets from the phases that ran.
func (rep *report) figures() []figure {
	var out []figure
	rate := func(v float64) string { return fmt.Sprintf("%.0f/s", v) }
	ge := func(name, value, ref string, ratio, min float64) figure {
		return figure{name: name, value: value, ref: ref, ratio: ratio, target: fmt.Sprintf("≥ %.2f", min), ok: ratio >= min, hasCheck: true}
	}
	need := func(name, target string, phases ...string) (figure, bool) {
		for _, p := range phases {
			if rep.ran(p) == nil {
				return figure{name: name, target: target, missing: p + " not run"}, false
			}
		}
		return figure{}, true
	}
	// pair is a paired phase's figure: its second half's rate over its
	// first's, both from the same moments of the same machine.
	pair := func(name, phase string, min float64) figure {
		f, ok := need(name, fmt.Sprintf("≥ %.2f", min), phase)
		if !ok {
			return f
		}
		p := rep.byName[phase]
		ratio := 0.0
		if p.firstRate > 0 {
			ratio = p.secondRate / p.firstRate
		}
		return ge(name, rate(p.secondRate), rate(p.firstRate), ratio, min)
	}

	if f, ok := need("static / wrk reference", "—", "static"); ok {
		s := rep.byName["static"]
		out = append(out, figure{name: "static / wrk reference", value: rate(s.rate), ref: rate(staticRef), ratio: s.rate / staticRef, target: "—"})
	} else {
		out = append(out, f)
	}
	if f, ok := need("ingest / static", "≥ 0.50", "ingest", "static"); ok {
		i, s := rep.byName["ingest"], rep.byName["static"]
		out = append(out, ge("ingest / static", rate(i.rate), rate(s.rate), i.rate/s.rate, 0.5))
	} else {
		out = append(out, f)
	}
	if f, ok := need("p99 group commit / p99 one commit", "≤ 1.00", "ingest", "baseline"); ok {
		i, b := rep.byName["ingest"], rep.byName["baseline"]
		ratio := float64(i.p99) / float64(b.p99)
		out = append(out, figure{name: "p99 group commit / p99 one commit", value: i.p99.Round(10 * time.Microsecond).String(),
			ref: b.p99.Round(10 * time.Microsecond).String(), ratio: ratio, target: "≤ 1.00", ok: ratio <= 1, hasCheck: true})
	} else {
		out = append(out, f)
	}
	if f, ok := need("e2e delivered / accepted", "≥ 0.80, bounded", "e2e"); ok {
		e := rep.byName["e2e"]
		fg := ge("e2e delivered / accepted", rate(e.deliveredRate), rate(e.rate), e.deliveredRate/e.rate, 0.8)
		fg.target = "≥ 0.80, bounded"
		fg.ok = fg.ok && e.bounded()
		out = append(out, fg)
	} else {
		out = append(out, f)
	}
	// The trace context's cost: the traced phases' requests alternate
	// every pairSlice between a traceparent on every request and none.
	out = append(out, pair("traceparent: ingest, traced / plain", "ingest-traced", 0.97),
		pair("traceparent: e2e, traced / plain", "e2e-traced", 0.97))
	out = append(out, rep.sealedFigures()...)
	for _, s := range []struct{ phase, name string }{{"slow1", "5 ms upstream, 1 worker"}, {"slow32", "5 ms upstream, 32 workers"}} {
		if f, ok := need(s.name, "≥ 0.95", s.phase); ok {
			pr := rep.byName[s.phase]
			out = append(out, ge(s.name, rate(pr.deliveredRate), rate(pr.ref), pr.deliveredRate/pr.ref, 0.95))
			if c := pr.ceilingRate(); c > 0 {
				out = append(out, figure{name: "  … / plain Go client, same upstream", value: rate(pr.deliveredRate), ref: rate(c), ratio: pr.deliveredRate / c, target: "—"})
			}
		} else {
			out = append(out, f)
		}
	}
	// A pull target through `caddy webhook listen` beside the http target
	// of slow32: the same upstream, as many deliveries at once.
	if f, ok := need("listen, 32 at once / slow32 http target", "≥ 0.50", "listen", "slow32"); ok {
		l, s := rep.byName["listen"], rep.byName["slow32"]
		out = append(out, ge("listen, 32 at once / slow32 http target", rate(l.deliveredRate), rate(s.deliveredRate), l.deliveredRate/s.deliveredRate, 0.5))
	} else {
		out = append(out, f)
	}
	if f, ok := need("rate 200/s: delivered / rate", "0.95–1.05", "rate"); ok {
		pr := rep.byName["rate"]
		ratio := pr.deliveredRate / pr.ref
		out = append(out, figure{name: "rate 200/s: delivered / rate", value: rate(pr.deliveredRate), ref: rate(pr.ref),
			ratio: ratio, target: "0.95–1.05", ok: ratio >= 0.95 && ratio <= 1.05, hasCheck: true})
	} else {
		out = append(out, f)
	}
	backlogName := fmt.Sprintf("backlog %s", count(rep.o.backlog))
	if f, ok := need(backlogName+": ingest / empty", "≥ 0.80", "backlog-ingest", "ingest"); ok {
		b, i := rep.byName["backlog-ingest"], rep.byName["ingest"]
		out = append(out, ge(backlogName+": ingest / empty", rate(b.rate), rate(i.rate), b.rate/i.rate, 0.8))
	} else {
		out = append(out, f)
	}
	if f, ok := need(backlogName+": delivered / empty", "≥ 0.80", "backlog-e2e", "e2e"); ok {
		b, e := rep.byName["backlog-e2e"], rep.byName["e2e"]
		out = append(out, ge(backlogName+": delivered / empty", rate(b.deliveredRate), rate(e.deliveredRate), b.deliveredRate/e.deliveredRate, 0.8))
		out = append(out, figure{name: backlogName + ": e2e accepted / empty", value: rate(b.rate), ref: rate(e.rate), ratio: b.rate / e.rate, target: "—"})
	} else {
		out = append(out, f)
	}
	orphansName := fmt.Sprintf("orphans %s: p99 / e2e p99", count(rep.o.orphans))
	if f, ok := need(orphansName, "≤ 2.00", "orphans-e2e", "e2e"); ok {
		o, e := rep.byName["orphans-e2e"], rep.byName["e2e"]
		ratio := float64(o.p99) / float64(e.p99)
		out = append(out, figure{name: orphansName, value: o.p99.Round(10 * time.Microsecond).String(),
			ref: e.p99.Round(10 * time.Microsecond).String(), ratio: ratio, target: "≤ 2.00", ok: ratio <= 2, hasCheck: true})
	} else {
		out = append(out, f)
	}
	replayName := fmt.Sprintf("replay %s dead: p99 / ingest p99", count(rep.o.dead))
	if f, ok := need(replayName, "—", "replay-ingest", "ingest"); ok {
		p, i := rep.byName["replay-ingest"], rep.byName["ingest"]
		out = append(out, figure{name: replayName, value: p.p99.Round(10 * time.Microsecond).String(),
			ref: i.p99.Round(10 * time.Microsecond).String(), ratio: float64(p.p99) / float64(i.p99), target: "—"})
	} else {
		out = append(out, f)
	}
	if f, ok := need(backlogName+": RSS growth", "≤ 32 MiB", "backlog-ingest", "ingest", "backlog-e2e", "e2e"); ok {
		growth := max(rep.byName["backlog-ingest"].peakRSS-rep.byName["ingest"].peakRSS,
			rep.byName["backlog-e2e"].peakRSS-rep.byName["e2e"].peakRSS)
		out = append(out, figure{name: backlogName + ": RSS growth", value: mib(growth), ref: mib(rssBudget),
			ratio: float64(growth) / rssBudget, target: "≤ 32 MiB", ok: growth <= rssBudget, hasCheck: true})
	} else {
		out = append(out, f)
	}
	// The filter's cost: the rules phase's requests alternate between a
	// receiver without the filter and one with it.
	out = append(out, pair("2 KB ingest with a filter / without", rulesPhase, 0.95))
	return out
}

// ceilingRate is what a plain Go client with one sender per worker got
// from the slow upstream, per second, 0 if not measured.
func (pr *phaseResult) ceilingRate() float64 {
	if pr.ceilingWindow <= 0 {
		return 0
	}
	return pr.ceiling / pr.ceilingWindow.Seconds()
}

// meanHeld is how long the upstream held a delivery on average in the
// windows, 0 if none.
func (pr *phaseResult) meanHeld() time.Duration {
	if pr.heldCount == 0 {
		return 0
	}
	return pr.held / time.Duration(pr.heldCount)
}

// bounded reports whether the phase's backlog stayed bounded: it grew by
// at most 5% of the accepted rate, or what is left is under a second of
// traffic.
func (pr *phaseResult) bounded() bool {
	return pr.backlogSlope <= 0.05*pr.rate || float64(pr.backlogEnd) <= pr.rate
}

// missedTargets lists the figures that have a target and missed it.
func (rep *report) missedTargets() []string {
	var out []string
	for _, f := range rep.figures() {
		if f.hasCheck && !f.ok {
			out = append(out, fmt.Sprintf("%s %.2f (target %s)", f.name, f.ratio, f.target))
		}
	}
	return out
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// count writes n as 1M, 20k or 512.
func count(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

func ms(d time.Duration) string {
	if d == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

// print writes the report: the run's circumstances, one row per phase,
// the target ratios, and what the count checks found.
//
// The password of the DSN is redacted: the command line may quote -dsn.
// The rest of what the store's errors hide (user, host, database) stays,
// since the report names the server on purpose.
func (rep *report) print(w io.Writer) {
	var b strings.Builder
	rep.write(&b)
	io.WriteString(w, rep.o.redact.RedactPassword(b.String()))
}

func (rep *report) write(w io.Writer) {
	o := rep.o
	fmt.Fprintf(w, "webhook load test  %s UTC  nproc %d  %s  load average before: %s\n",
		rep.started.Format("2006-01-02 15:04"), nproc(), rep.goVersion, rep.loadavg)
	fmt.Fprintf(w, "command: go run ./cmd/webhook-loadtest %s\n", strings.Join(o.args, " "))
	if o.storage == "postgres" {
		instances := "1 Caddy instance"
		if o.instances > 1 {
			instances = fmt.Sprintf("%d Caddy instances sharing each", o.instances)
		}
		fmt.Fprintf(w, "storage: postgres %s at %s, a schema per phase (%s…); %s; "+
			"synchronous does not apply (every PostgreSQL commit is flushed, synchronous_commit=on)\n",
			rep.serverVersion, o.dsnDesc, o.schemaPrefix, instances)
		fmt.Fprintf(w, "%d connections (round-robin over the instances), %d-byte bodies, %s window per phase in %d rounds (each after %s warmup), %d workers in e2e per instance, upstream delay %s\n",
			o.conns, o.bodySize, o.duration, o.rounds, o.warmup, o.workers, o.delay)
		if o.instances > 1 {
			fmt.Fprintln(w, "caddy CPU is summed over the instances, RSS is the largest instance's; the slow phases' references are per worker times all instances' workers")
		}
		fmt.Fprintln(w, "server CPU: every process named postgres on this machine (— for a remote server); write xacts/s: transaction ids taken, server-wide; both count other users of the server too")
	} else {
		fmt.Fprintln(w, "storage: sqlite, a file per phase in the work directory; 1 Caddy instance")
		fmt.Fprintf(w, "%d connections, %d-byte bodies, %s window per phase in %d rounds (each after %s warmup), synchronous=%s, %d workers in e2e, upstream delay %s\n",
			o.conns, o.bodySize, o.duration, o.rounds, o.warmup, o.synchronous, o.workers, o.delay)
	}
	for _, s := range rep.seeds {
		fmt.Fprintf(w, "seeded %s\n", s)
	}
	fmt.Fprintln(w)

	pg := o.storage == "postgres"
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "phase\trequests\t2xx/s\tp50\tp99\tdelivered/s\tbacklog end\tcaddy CPU\tloadgen CPU\tRSS start\tRSS peak\t")
	if pg {
		fmt.Fprint(tw, "server CPU\twrite xacts/s\tWAL MiB/s\t")
	}
	fmt.Fprintln(tw)
	for _, pr := range rep.phases {
		req, rate := "—", "—"
		if pr.load != nil {
			req, rate = fmt.Sprint(pr.load.sent), fmt.Sprintf("%.0f", pr.rate)
		}
		del := "—"
		if pr.deliveredRate > 0 || pr.delivered > 0 {
			del = fmt.Sprintf("%.0f", pr.deliveredRate)
		}
		backlog := "—"
		if pr.backlogEnd >= 0 {
			backlog = fmt.Sprint(pr.backlogEnd)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%.2f\t%s\t%s\t", pr.name, req, rate, ms(pr.p50), ms(pr.p99),
			del, backlog, pr.cores, pr.selfCores, mib(pr.startRSS), mib(pr.peakRSS))
		if pg {
			cpu := "—"
			if c := pr.server.cores(); c >= 0 {
				cpu = fmt.Sprintf("%.2f", c)
			}
			fmt.Fprintf(tw, "%s\t%.0f\t%.1f\t", cpu, pr.server.xactRate(), pr.server.walRate())
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintln(w)

	tw = tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tvalue\treference\tratio\ttarget\t")
	for _, f := range rep.figures() {
		if f.missing != "" {
			fmt.Fprintf(tw, "%s\t—\t—\t—\t%s\tn/a: %s\n", f.name, f.target, f.missing)
			continue
		}
		verdict := ""
		if f.hasCheck {
			verdict = "MISS"
			if f.ok {
				verdict = "ok"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%s\t%s\n", f.name, f.value, f.ref, f.ratio, f.target, verdict)
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, n := range rep.notes {
		fmt.Fprintln(w, n)
	}
	if len(rep.notes) > 0 {
		fmt.Fprintln(w)
	}

	for _, pr := range rep.phases {
		if pr.name == "e2e" || pr.name == "backlog-e2e" {
			fmt.Fprintf(w, "%s: backlog of the round's events grew %.0f jobs/s over the window (mean of the rounds)\n", pr.name, pr.backlogSlope)
		}
		if h := pr.meanHeld(); h > 0 {
			fmt.Fprintf(w, "%s: the upstream held each delivery %s on average (asked: %s); a plain Go client, one sender per worker, got %.0f/s from it\n",
				pr.name, h.Round(time.Microsecond), o.delay, pr.ceilingRate())
		}
		for _, c := range pr.counts {
			fmt.Fprintf(w, "%s: %s\n", pr.name, c)
		}
		for _, f := range pr.failed {
			fmt.Fprintf(w, "%s: COUNT CHECK FAILED: %s\n", pr.name, f)
		}
		if pr.profile != "" {
			fmt.Fprintf(w, "%s: CPU profile %s\n", pr.name, pr.profile)
		}
		if pr.cost != nil {
			pr.writeCost(w, o)
		}
		if pr.trace != "" {
			fmt.Fprintf(w, "%s: execution trace %s (go tool trace -pprof=syscall|sync|sched)\n", pr.name, pr.trace)
		}
	}
	if bad := rep.failedChecks(); len(bad) == 0 {
		fmt.Fprintln(w, "counts: every check passed")
	}
	if o.keep {
		fmt.Fprintf(w, "work directory: %s\n", rep.dir)
	}
}
