package phases

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/loadgen"
	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/monitor"
	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/queuedb"
	"github.com/caddywebhook/caddywebhook/internal/caddyproc"
)

// The load and its window: how a phase's traffic is built, driven and watched.

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

// pairSlice is how long a paired phase sends as one half, then as the
// other, in turn: long against a request's few milliseconds, so few
// straddle a switch, and short against the window, so both halves see the
// same machine.
const pairSlice = 100 * time.Millisecond

// openPhase loads the config of a phase that receives on pathHook and
// delivers, if workers > 0, to the no-op route, then opens the reader of
// its database. The phase's events are those after the returned id, read
// before any load is sent.
func (r *runner) openPhase(ctx context.Context, db string, workers, maxBatch int) (q queuedb.Reader, after int64, err error) {
	if err := r.loadConfig(ctx, db, workers, "", maxBatch); err != nil {
		return nil, 0, err
	}
	r.db = db
	if q, err = r.openQueue(ctx, db); err != nil {
		return nil, 0, err
	}
	if after, err = q.LastEvent(ctx); err != nil {
		q.Close()
		return nil, 0, err
	}
	return q, after, nil
}

// newLoad is one round of the phase's traffic to path; the round is in
// the delivery ids.
func (r *runner) newLoad(name, path string, want int) loadgen.Load {
	l := loadgen.Load{
		Addrs:     slices.Clone(r.httpAddrs),
		Path:      path,
		Secret:    secret,
		Tag:       fmt.Sprintf("%s-%d", name, r.round),
		BodySize:  r.o.BodySize,
		Conns:     r.o.Conns,
		Warmup:    r.o.Warmup,
		Duration:  r.window,
		Want:      want,
		PairEvery: r.pair.every(),
		// Odd rounds start with the first half, even ones with the second.
		SecondFirst:  r.round%2 == 0,
		SecondTraced: r.pair != nil && r.pair.traced,
		SecondPath:   r.pair.secondPath(),
	}
	if r.stripe {
		l.BodySize, l.Fill = rulesBodySize, fillStripeBody
	}
	return l
}

// drive runs l while the monitor watches Caddy, and profiles the window
// when asked.
func (r *runner) drive(ctx context.Context, pr *Phase, l loadgen.Load, during func(windowStart time.Time)) (*loadgen.Result, error) {
	mon := monitor.Start(r.caddies, r.srv)
	probe := r.costProbe(pr.Name)
	start := time.Now()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if !sleepCtx(ctx, time.Until(start.Add(l.Warmup))) {
			return
		}
		// The profile starts first, then the probe's reads, the first
		// of them a /metrics scrape.
		wait := r.capture(ctx, pr, l.Duration)
		if probe != nil {
			probe.Begin(ctx)
		}
		mon.WindowStart()
		if during != nil {
			during(start.Add(l.Warmup))
		}
		wait()
	}()
	res, err := l.Run(ctx)
	mon.WindowEnd()
	if probe != nil {
		probe.Finish(ctx)
	}
	wg.Wait()
	pr.addWindow(mon.Stop())
	if err != nil {
		return nil, err
	}
	pr.addLoad(res)
	if probe != nil {
		r.addCost(ctx, pr, probe, res.OKRate(), l.Duration)
	}
	pr.check(res.Transport == 0, "round %d: %d requests got no answer; the last: %s", r.round, res.Transport, res.LastErr)
	for status, n := range res.Statuses {
		pr.check(status == l.Want, "%d requests answered %d, want %d", n, status, l.Want)
	}
	return res, nil
}

// capture starts the CPU profile and the execution trace of the next d
// that -profile and -trace ask for in this phase, and returns a function
// that waits for them. A failed capture is logged, not fatal: the
// figures do not depend on it.
func (r *runner) capture(ctx context.Context, pr *Phase, d time.Duration) (wait func()) {
	var wg sync.WaitGroup
	kinds := []struct {
		on   bool
		kind string
		dst  *string
	}{
		{slices.Contains(r.o.Profile, pr.Name), "profile", &pr.Profile},
		{slices.Contains(r.o.Trace, pr.Name), "trace", &pr.Trace},
	}
	var mu sync.Mutex
	for _, k := range kinds {
		if !k.on {
			continue
		}
		// One file per instance: name.profile, then name-2.profile, ….
		for i, c := range r.caddies {
			wg.Go(func() {
				_, suffix := InstanceName(i)
				path := filepath.Join(r.dir, pr.Name+suffix+"."+k.kind)
				if err := capture(ctx, c.Admin(), k.kind, d, path); err != nil {
					r.logf("%s: %s: %v", pr.Name, k.kind, err)
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

// capture saves a CPU profile (kind "profile") or an execution trace
// ("trace") of the next d from an instance's admin pprof endpoint into
// path.
func capture(ctx context.Context, admin caddyproc.Admin, kind string, d time.Duration, path string) error {
	secs := max(int(d.Round(time.Second)/time.Second), 1)
	out, err := admin.Call(ctx, http.MethodGet, "/debug/pprof/"+kind+"?seconds="+strconv.Itoa(secs), nil)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}

// costProbe returns the probe of a phase that -profile asks for, nil for
// the others.
func (r *runner) costProbe(phase string) *monitor.Probe {
	if !slices.Contains(r.o.Profile, phase) {
		return nil
	}
	var path string
	if r.db != "" && r.o.Storage == "sqlite" {
		if abs, err := filepath.Abs(filepath.Join(r.dir, r.db)); err == nil {
			path = abs
		}
	}
	return monitor.NewProbe(r.caddies, r.db != "", path)
}

// addCost adds a round's readings to the phase's cost table; what cannot
// be read is logged and left out, as the throughput does not depend on it.
func (r *runner) addCost(ctx context.Context, pr *Phase, p *monitor.Probe, rate float64, window time.Duration) {
	if pr.Cost == nil {
		pr.Cost = new(monitor.Cost)
	}
	for _, err := range pr.Cost.Add(ctx, p, rate, window, pr.roundProfiles) {
		r.logf("%s: cost table: %v", pr.Name, err)
	}
	pr.roundProfiles = nil
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

// checkStored looks up every delivery id answered 202 in the events after
// the given id and returns how many events the phase stored, and their
// jobs by status, read after the events.
func (r *runner) checkStored(ctx context.Context, pr *Phase, res *loadgen.Result, q queuedb.Reader, after int64, tag string) (stored int64, byStatus map[string]int64, err error) {
	want := res.AcceptedIDs(tag)
	found, missing, extra, err := q.MatchEvents(ctx, after, want)
	if err != nil {
		return 0, nil, err
	}
	pr.check(missing == 0, "%d of %d events answered 202 are not in the database", missing, len(want))
	// An event stored but not seen answered is possible only when a
	// connection broke before its answer arrived.
	pr.check(extra <= res.Transport, "%d events in the database were never answered 202", extra)
	pr.Counts = append(pr.Counts, fmt.Sprintf("round %d: %d answered 202, %d of them in the database", r.round, len(want), found))
	if byStatus, err = q.StatusAfter(ctx, after); err != nil {
		return 0, nil, err
	}
	return found + extra, byStatus, nil
}
