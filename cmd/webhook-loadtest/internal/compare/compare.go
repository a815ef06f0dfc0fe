// Package compare judges a change (the load test's -against): it runs the
// same phases with two Caddy binaries in turn, in pairs, so that a change
// is judged against the build before it on the same machine in the same
// minutes. On a shared machine one build's rate moves 20 % between two
// runs a minute apart, more than most changes are worth; runs that
// alternate, many of them, are what lets a difference show. Each pair runs
// the two builds in the other order from the pair before (A B, B A, A B,
// …), so a machine that slows down or speeds up during the comparison
// weighs on both alike.
package compare

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/phases"
	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/report"
)

// buildRun is one run of the phases with one binary: each phase's
// headline figure (headline), keyed by phase.
type buildRun map[string]float64

// Comparison holds the runs of the two builds: a is -against (the build
// before), b is -caddy (the build under test).
type Comparison struct {
	a, b   string
	phases []string // the phases' results, in the order they ran
	runsA  []buildRun
	runsB  []buildRun
}

// headline is the figure a phase is judged by: delivered jobs per second
// where the phase delivers, otherwise answered requests per second.
func headline(pr *phases.Phase) float64 {
	if pr.DeliveredRate > 0 {
		return pr.DeliveredRate
	}
	return pr.Rate
}

// Run runs o's phases pairs times with each binary, against (the build
// before) and o.Caddy (the build under test), and returns the comparison.
// A run that fails, or whose counts do not add up, ends it with an error:
// its figures would not be comparable. Each run's progress and whole
// report go to logw.
func Run(ctx context.Context, o phases.Options, against string, pairs int, logw io.Writer) (*Comparison, error) {
	c := &Comparison{a: against, b: o.Caddy}
	for i := range pairs {
		order := []string{against, o.Caddy}
		if i%2 == 1 {
			order = []string{o.Caddy, against}
		}
		for _, bin := range order {
			one := o
			one.Caddy = bin
			fmt.Fprintf(logw, "pair %d of %d: %s\n", i+1, pairs, bin)
			res, err := phases.Run(ctx, one, logw)
			if err != nil {
				return c, fmt.Errorf("pair %d, %s: %w", i+1, bin, err)
			}
			// Each run's whole report goes to the log: the figures
			// besides the headline (p99s, RSS) are compared from it.
			report.Print(logw, res)
			if bad := res.FailedChecks(); len(bad) > 0 {
				return c, fmt.Errorf("pair %d, %s: count checks failed: %s", i+1, bin, strings.Join(bad, "; "))
			}
			br := buildRun{}
			// The results' names, not the flag's: backlog reports
			// backlog-ingest and backlog-e2e, replay replay-ingest.
			for _, pr := range res.Phases {
				if !pr.Finished {
					continue
				}
				br[pr.Name] = headline(pr)
				if !slices.Contains(c.phases, pr.Name) {
					c.phases = append(c.phases, pr.Name)
				}
			}
			if bin == against {
				c.runsA = append(c.runsA, br)
			} else {
				c.runsB = append(c.runsB, br)
			}
		}
	}
	return c, nil
}

// phaseSummary is one phase's figures over the pairs.
type phaseSummary struct {
	phase        string
	meanA, meanB float64
	bAhead       int // pairs in which B's figure was higher
	pairs        int
	// The phase's figure over static's in the same run, averaged over
	// the runs; 0 when static did not run or this is static.
	ratioA, ratioB float64
}

// pairs is the number of pairs that ran both builds.
func (c *Comparison) pairs() int { return min(len(c.runsA), len(c.runsB)) }

// summarise reduces the runs to a summary per phase, in the phases' order.
func (c *Comparison) summarise() []phaseSummary {
	var out []phaseSummary
	for _, ph := range c.phases {
		s := phaseSummary{phase: ph}
		var ra, rb float64
		var rn int
		for i := range c.pairs() {
			a, okA := c.runsA[i][ph]
			b, okB := c.runsB[i][ph]
			if !okA || !okB {
				continue
			}
			s.pairs++
			s.meanA += a
			s.meanB += b
			if b > a {
				s.bAhead++
			}
			sa, sb := c.runsA[i]["static"], c.runsB[i]["static"]
			if ph != "static" && sa > 0 && sb > 0 {
				ra += a / sa
				rb += b / sb
				rn++
			}
		}
		if s.pairs == 0 {
			continue
		}
		s.meanA /= float64(s.pairs)
		s.meanB /= float64(s.pairs)
		if rn > 0 {
			s.ratioA, s.ratioB = ra/float64(rn), rb/float64(rn)
		}
		out = append(out, s)
	}
	return out
}

// Print writes each pair's figures and the summary.
func (c *Comparison) Print(w io.Writer) {
	fmt.Fprintf(w, "A: %s (-against)\nB: %s (-caddy)\n", c.a, c.b)
	fmt.Fprintf(w, "%d pairs, the order alternating (A B, B A, …); a figure is delivered/s where the phase delivers, else answered/s\n\n", c.pairs())
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tpair\tA\tB\tB/A\t")
	for _, ph := range c.phases {
		for i := range c.pairs() {
			a, okA := c.runsA[i][ph]
			b, okB := c.runsB[i][ph]
			if !okA || !okB {
				continue
			}
			fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%s\t\n", ph, i+1, a, b, ratioText(b, a))
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tmean A\tmean B\tB/A\tB ahead\t/static A\t/static B\t")
	for _, s := range c.summarise() {
		ra, rb := "—", "—"
		if s.ratioA > 0 {
			ra, rb = fmt.Sprintf("%.3f", s.ratioA), fmt.Sprintf("%.3f", s.ratioB)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%s\t%d of %d\t%s\t%s\t\n", s.phase, s.meanA, s.meanB, ratioText(s.meanB, s.meanA), s.bAhead, s.pairs, ra, rb)
	}
	tw.Flush()
}

// ratioText is b/a to two places, "—" when a is 0.
func ratioText(b, a float64) string {
	if a == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", b/a)
}
