// Package report judges a load test's results against their targets and
// prints them: the run's circumstances, one row per phase, the figures
// and their ratios, what the count checks found and the cost tables.
package report

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/loadgen"
	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/phases"
)

// staticRef is the reference for the static phase: Caddy's respond route
// under wrk on these 2-core machines (docs: DESIGN.md, "How it gets fast").
const staticRef = 35000.0

// rssBudget is the allowed RSS growth with a million jobs pending.
const rssBudget = 32 << 20

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
func figures(res *phases.Results) []figure {
	var out []figure
	rate := func(v float64) string { return fmt.Sprintf("%.0f/s", v) }
	ge := func(name, value, ref string, ratio, min float64) figure {
		return figure{name: name, value: value, ref: ref, ratio: ratio, target: fmt.Sprintf("≥ %.2f", min), ok: ratio >= min, hasCheck: true}
	}
	// ran reports whether the named phases all ran; when one did not, it
	// adds the figure name as missing in its place.
	ran := func(name, target string, names ...string) bool {
		for _, p := range names {
			if res.Ran(p) == nil {
				out = append(out, figure{name: name, target: target, missing: p + " not run"})
				return false
			}
		}
		return true
	}
	// pair adds a paired phase's figure: its second half's rate over its
	// first's, both from the same moments of the same machine.
	pair := func(name, phase string, min float64) {
		if !ran(name, fmt.Sprintf("≥ %.2f", min), phase) {
			return
		}
		p := res.Ran(phase)
		ratio := 0.0
		if p.FirstRate > 0 {
			ratio = p.SecondRate / p.FirstRate
		}
		out = append(out, ge(name, rate(p.SecondRate), rate(p.FirstRate), ratio, min))
	}

	if ran("static / wrk reference", "—", "static") {
		s := res.Ran("static")
		out = append(out, figure{name: "static / wrk reference", value: rate(s.Rate), ref: rate(staticRef), ratio: s.Rate / staticRef, target: "—"})
	}
	if ran("ingest / static", "≥ 0.50", "ingest", "static") {
		i, s := res.Ran("ingest"), res.Ran("static")
		out = append(out, ge("ingest / static", rate(i.Rate), rate(s.Rate), i.Rate/s.Rate, 0.5))
	}
	if ran("p99 group commit / p99 one commit", "≤ 1.00", "ingest", "baseline") {
		i, b := res.Ran("ingest"), res.Ran("baseline")
		ratio := float64(i.P99) / float64(b.P99)
		out = append(out, figure{name: "p99 group commit / p99 one commit", value: i.P99.Round(10 * time.Microsecond).String(),
			ref: b.P99.Round(10 * time.Microsecond).String(), ratio: ratio, target: "≤ 1.00", ok: ratio <= 1, hasCheck: true})
	}
	if ran("e2e delivered / accepted", "≥ 0.80, bounded", "e2e") {
		e := res.Ran("e2e")
		fg := ge("e2e delivered / accepted", rate(e.DeliveredRate), rate(e.Rate), e.DeliveredRate/e.Rate, 0.8)
		fg.target = "≥ 0.80, bounded"
		fg.ok = fg.ok && bounded(e)
		out = append(out, fg)
	}
	// The trace context's cost: the traced phases' requests alternate
	// every pairSlice between a traceparent on every request and none.
	pair("traceparent: ingest, traced / plain", "ingest-traced", 0.97)
	pair("traceparent: e2e, traced / plain", "e2e-traced", 0.97)
	out = append(out, sealedFigures(res)...)
	for _, s := range []struct{ phase, name string }{{"slow1", "5 ms upstream, 1 worker"}, {"slow32", "5 ms upstream, 32 workers"}} {
		if ran(s.name, "≥ 0.95", s.phase) {
			pr := res.Ran(s.phase)
			out = append(out, ge(s.name, rate(pr.DeliveredRate), rate(pr.Ref), pr.DeliveredRate/pr.Ref, 0.95))
			if c := pr.CeilingRate(); c > 0 {
				out = append(out, figure{name: "  … / plain Go client, same upstream", value: rate(pr.DeliveredRate), ref: rate(c), ratio: pr.DeliveredRate / c, target: "—"})
			}
		}
	}
	// A pull target through `caddy webhook listen` beside the http target
	// of slow32: the same upstream, as many deliveries at once.
	if ran("listen, 32 at once / slow32 http target", "≥ 0.50", "listen", "slow32") {
		l, s := res.Ran("listen"), res.Ran("slow32")
		out = append(out, ge("listen, 32 at once / slow32 http target", rate(l.DeliveredRate), rate(s.DeliveredRate), l.DeliveredRate/s.DeliveredRate, 0.5))
	}
	if ran("rate 200/s: delivered / rate", "0.95–1.05", "rate") {
		pr := res.Ran("rate")
		ratio := pr.DeliveredRate / pr.Ref
		out = append(out, figure{name: "rate 200/s: delivered / rate", value: rate(pr.DeliveredRate), ref: rate(pr.Ref),
			ratio: ratio, target: "0.95–1.05", ok: ratio >= 0.95 && ratio <= 1.05, hasCheck: true})
	}
	backlogName := fmt.Sprintf("backlog %s", count(res.Options.Backlog))
	if ran(backlogName+": ingest / empty", "≥ 0.80", "backlog-ingest", "ingest") {
		b, i := res.Ran("backlog-ingest"), res.Ran("ingest")
		out = append(out, ge(backlogName+": ingest / empty", rate(b.Rate), rate(i.Rate), b.Rate/i.Rate, 0.8))
	}
	if ran(backlogName+": delivered / empty", "≥ 0.80", "backlog-e2e", "e2e") {
		b, e := res.Ran("backlog-e2e"), res.Ran("e2e")
		out = append(out, ge(backlogName+": delivered / empty", rate(b.DeliveredRate), rate(e.DeliveredRate), b.DeliveredRate/e.DeliveredRate, 0.8))
		out = append(out, figure{name: backlogName + ": e2e accepted / empty", value: rate(b.Rate), ref: rate(e.Rate), ratio: b.Rate / e.Rate, target: "—"})
	}
	orphansName := fmt.Sprintf("orphans %s: p99 / e2e p99", count(res.Options.Orphans))
	if ran(orphansName, "≤ 2.00", "orphans-e2e", "e2e") {
		o, e := res.Ran("orphans-e2e"), res.Ran("e2e")
		ratio := float64(o.P99) / float64(e.P99)
		out = append(out, figure{name: orphansName, value: o.P99.Round(10 * time.Microsecond).String(),
			ref: e.P99.Round(10 * time.Microsecond).String(), ratio: ratio, target: "≤ 2.00", ok: ratio <= 2, hasCheck: true})
	}
	replayName := fmt.Sprintf("replay %s dead: p99 / ingest p99", count(res.Options.Dead))
	if ran(replayName, "—", "replay-ingest", "ingest") {
		p, i := res.Ran("replay-ingest"), res.Ran("ingest")
		out = append(out, figure{name: replayName, value: p.P99.Round(10 * time.Microsecond).String(),
			ref: i.P99.Round(10 * time.Microsecond).String(), ratio: float64(p.P99) / float64(i.P99), target: "—"})
	}
	if ran(backlogName+": RSS growth", "≤ 32 MiB", "backlog-ingest", "ingest", "backlog-e2e", "e2e") {
		growth := max(res.Ran("backlog-ingest").PeakRSS-res.Ran("ingest").PeakRSS,
			res.Ran("backlog-e2e").PeakRSS-res.Ran("e2e").PeakRSS)
		out = append(out, figure{name: backlogName + ": RSS growth", value: phases.MiB(growth), ref: phases.MiB(rssBudget),
			ratio: float64(growth) / rssBudget, target: "≤ 32 MiB", ok: growth <= rssBudget, hasCheck: true})
	}
	// The filter's cost: the rules phase's requests alternate between a
	// receiver without the filter and one with it.
	pair("2 KB ingest with a filter / without", "rules", 0.95)
	return out
}

// sealedFigures sets the sealed phase's rates, and Caddy's CPU per event,
// beside the plain phases' of the same run: encryption at rest is
// expected to cost a few per cent.
func sealedFigures(res *phases.Results) []figure {
	var out []figure
	for _, p := range phases.SealedPairs {
		name := "encryption: " + p[1] + ", sealed / plain"
		s, plain := res.Ran(p[0]), res.Ran(p[1])
		if s == nil || plain == nil {
			missing := p[0]
			if s != nil {
				missing = p[1]
			}
			out = append(out, figure{name: name, target: "≥ 0.95", missing: missing + " not run"})
			continue
		}
		sr, pr := s.Rate, plain.Rate
		if p[1] == "e2e" {
			sr, pr = s.DeliveredRate, plain.DeliveredRate
		}
		ratio := 0.0
		if pr > 0 {
			ratio = sr / pr
		}
		out = append(out, figure{name: name, value: fmt.Sprintf("%.0f/s", sr), ref: fmt.Sprintf("%.0f/s", pr),
			ratio: ratio, target: "≥ 0.95", ok: ratio >= 0.95, hasCheck: true})
		if sc, pc := s.CPUPerEvent(), plain.CPUPerEvent(); sc > 0 && pc > 0 {
			out = append(out, figure{name: "  … Caddy's CPU per event, sealed / plain", value: fmt.Sprintf("%.0f µs", sc),
				ref: fmt.Sprintf("%.0f µs", pc), ratio: sc / pc, target: "—"})
		}
	}
	return out
}

// bounded reports whether the phase's backlog stayed bounded: it grew by
// at most 5% of the accepted rate, or what is left is under a second of
// traffic.
func bounded(pr *phases.Phase) bool {
	return pr.BacklogSlope <= 0.05*pr.Rate || float64(pr.BacklogEnd) <= pr.Rate
}

// MissedTargets lists the figures that have a target and missed it.
func MissedTargets(res *phases.Results) []string {
	var out []string
	for _, f := range figures(res) {
		if f.hasCheck && !f.ok {
			out = append(out, fmt.Sprintf("%s %.2f (target %s)", f.name, f.ratio, f.target))
		}
	}
	return out
}

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

// Print writes the report: the run's circumstances, one row per phase,
// the target ratios, and what the count checks found.
//
// The password of the DSN is redacted: the command line may quote -dsn.
// The rest of what the store's errors hide (user, host, database) stays,
// since the report names the server on purpose.
func Print(w io.Writer, res *phases.Results) {
	var b strings.Builder
	write(&b, res)
	io.WriteString(w, res.Options.Redact.RedactPassword(b.String()))
}

func write(w io.Writer, res *phases.Results) {
	o := res.Options
	fmt.Fprintf(w, "webhook load test  %s UTC  nproc %d  %s  load average before: %s\n",
		res.Started.Format("2006-01-02 15:04"), runtime.NumCPU(), res.GoVersion, res.LoadAvg)
	fmt.Fprintf(w, "command: go run ./cmd/webhook-loadtest %s\n", strings.Join(o.Args, " "))
	if o.Storage == "postgres" {
		instances := "1 Caddy instance"
		if o.Instances > 1 {
			instances = fmt.Sprintf("%d Caddy instances sharing each", o.Instances)
		}
		fmt.Fprintf(w, "storage: postgres %s at %s, a schema per phase (%s…); %s; "+
			"synchronous does not apply (every PostgreSQL commit is flushed, synchronous_commit=on)\n",
			res.ServerVersion, o.DSNDesc, o.SchemaPrefix, instances)
		fmt.Fprintf(w, "%d connections (round-robin over the instances), %d-byte bodies, %s window per phase in %d rounds (each after %s warmup), %d workers in e2e per instance, upstream delay %s\n",
			o.Conns, o.BodySize, o.Duration, o.Rounds, o.Warmup, o.Workers, o.Delay)
		if o.Instances > 1 {
			fmt.Fprintln(w, "caddy CPU is summed over the instances, RSS is the largest instance's; the slow phases' references are per worker times all instances' workers")
		}
		fmt.Fprintln(w, "server CPU: every process named postgres on this machine (— for a remote server); write xacts/s: transaction ids taken, server-wide; both count other users of the server too")
	} else {
		fmt.Fprintln(w, "storage: sqlite, a file per phase in the work directory; 1 Caddy instance")
		fmt.Fprintf(w, "%d connections, %d-byte bodies, %s window per phase in %d rounds (each after %s warmup), synchronous=%s, %d workers in e2e, upstream delay %s\n",
			o.Conns, o.BodySize, o.Duration, o.Rounds, o.Warmup, o.Synchronous, o.Workers, o.Delay)
	}
	for _, s := range res.Seeds {
		fmt.Fprintf(w, "seeded %s\n", s)
	}
	fmt.Fprintln(w)

	pg := o.Storage == "postgres"
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "phase\trequests\t2xx/s\tp50\tp99\tdelivered/s\tbacklog end\tcaddy CPU\tloadgen CPU\tRSS start\tRSS peak\t")
	if pg {
		fmt.Fprint(tw, "server CPU\twrite xacts/s\tWAL MiB/s\t")
	}
	fmt.Fprintln(tw)
	for _, pr := range res.Phases {
		req, rate := "—", "—"
		if pr.Load != nil {
			req, rate = fmt.Sprint(pr.Load.Sent), fmt.Sprintf("%.0f", pr.Rate)
		}
		del := "—"
		if pr.DeliveredRate > 0 || pr.Delivered > 0 {
			del = fmt.Sprintf("%.0f", pr.DeliveredRate)
		}
		backlog := "—"
		if pr.BacklogEnd >= 0 {
			backlog = fmt.Sprint(pr.BacklogEnd)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%.2f\t%s\t%s\t", pr.Name, req, rate, loadgen.Millis(pr.P50), loadgen.Millis(pr.P99),
			del, backlog, pr.Cores, pr.SelfCores, phases.MiB(pr.StartRSS), phases.MiB(pr.PeakRSS))
		if pg {
			cpu := "—"
			if c := pr.Server.Cores(); c >= 0 {
				cpu = fmt.Sprintf("%.2f", c)
			}
			fmt.Fprintf(tw, "%s\t%.0f\t%.1f\t", cpu, pr.Server.XactRate(), pr.Server.WALRate())
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintln(w)

	tw = tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tvalue\treference\tratio\ttarget\t")
	for _, f := range figures(res) {
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
	for _, n := range res.Notes {
		fmt.Fprintln(w, n)
	}
	if len(res.Notes) > 0 {
		fmt.Fprintln(w)
	}

	for _, pr := range res.Phases {
		if pr.Name == "e2e" || pr.Name == "backlog-e2e" {
			fmt.Fprintf(w, "%s: backlog of the round's events grew %.0f jobs/s over the window (mean of the rounds)\n", pr.Name, pr.BacklogSlope)
		}
		if h := pr.MeanHeld(); h > 0 {
			fmt.Fprintf(w, "%s: the upstream held each delivery %s on average (asked: %s); a plain Go client, one sender per worker, got %.0f/s from it\n",
				pr.Name, h.Round(time.Microsecond), o.Delay, pr.CeilingRate())
		}
		for _, c := range pr.Counts {
			fmt.Fprintf(w, "%s: %s\n", pr.Name, c)
		}
		for _, f := range pr.Failed {
			fmt.Fprintf(w, "%s: COUNT CHECK FAILED: %s\n", pr.Name, f)
		}
		if pr.Profile != "" {
			fmt.Fprintf(w, "%s: CPU profile %s\n", pr.Name, pr.Profile)
		}
		if pr.Cost != nil {
			pr.Cost.Write(w, pr.Name, o.Storage == "sqlite", pr.Rate, pr.Server)
		}
		if pr.Trace != "" {
			fmt.Fprintf(w, "%s: execution trace %s (go tool trace -pprof=syscall|sync|sched)\n", pr.Name, pr.Trace)
		}
	}
	if bad := res.FailedChecks(); len(bad) == 0 {
		fmt.Fprintln(w, "counts: every check passed")
	}
	if o.Keep {
		fmt.Fprintf(w, "work directory: %s\n", res.Dir)
	}
}
