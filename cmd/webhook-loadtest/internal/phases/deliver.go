package phases

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/monitor"
)

// The delivering phases with seeded jobs: slow1, slow32 and rate, to the
// recording upstream.

// slow lets workers deliver pre-seeded jobs to the recording upstream,
// which answers after the delay, and counts deliveries at the upstream.
// It then pauses the pool and checks that every done job arrived there.
func (r *runner) slow(ctx context.Context, name, db string, workers int, ref float64) error {
	pr := r.res.Phase(name)
	// The reference is what all the instances' workers could reach.
	pr.Ref = ref * float64(r.o.Instances)
	mon := monitor.Start(r.caddies, r.srv)
	if err := r.loadConfig(ctx, db, workers, r.up.url(), 0); err != nil {
		return err
	}
	r.logf("%s: %d worker(s) delivering to an upstream that answers in %s%s", name, workers, r.o.Delay, r.perInstance())
	w, err := r.watchUpstream(ctx, pr, mon)
	if err != nil {
		return err
	}
	// Pause the pool: the same database with no workers. The reload stops
	// the pool, which lets running deliveries finish and records them.
	if err := r.loadConfig(ctx, db, 0, r.up.url(), 0); err != nil {
		return err
	}
	pr.addWindow(mon.Stop())
	w.addTo(pr, r.window)
	// The measured reference: as many plain net/http senders as there are
	// workers, against the same upstream, right after the workers'
	// window, while the pool is paused.
	senders := workers * r.o.Instances
	ceiling, err := clientCeiling(ctx, r.up.url(), senders, r.o.BodySize, r.o.Warmup, r.window)
	if err != nil {
		return err
	}
	pr.ceiling += ceiling * r.window.Seconds()
	pr.ceilingWindow += r.window
	r.logf("%s: %.0f delivered/s; the upstream held each %s on average; %d plain Go senders: %.0f/s",
		name, float64(w.delivered())/r.window.Seconds(), w.meanHold().Round(time.Microsecond), senders, ceiling)

	done, mine, repeats, err := r.checkArrived(ctx, pr, name, db)
	if err != nil {
		return err
	}
	pr.Counts = append(pr.Counts, fmt.Sprintf("round %d: %d jobs done so far, all at the upstream: %d unique ids there, %d repeated deliveries in the run", r.round, done, mine, repeats))
	return nil
}

// checkArrived checks a slow phase's jobs against the recording upstream:
// every job the database calls done arrived there, no more ids arrived
// than were seeded, and the seed did not run dry. It returns the jobs done,
// the phase's unique ids at the upstream and the repeated deliveries of
// the run.
func (r *runner) checkArrived(ctx context.Context, pr *Phase, name, db string) (done, mine int64, repeats int, err error) {
	q, err := r.openQueue(ctx, db)
	if err != nil {
		return 0, 0, 0, err
	}
	defer q.Close()
	// The upstream keeps every id of the run; the seeded ids of each
	// database start with its phase's name.
	seen, repeats := r.up.snapshot()
	for id := range seen {
		if strings.HasPrefix(id, name+"-") {
			mine++
		}
	}
	var notArrived int64
	if err := q.DoneIDs(ctx, func(id string) {
		done++
		if seen[id] == 0 {
			notArrived++
		}
	}); err != nil {
		return 0, 0, 0, err
	}
	seeded := int64(r.seeds[db].Jobs)
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
	pr := r.res.Phase(name)
	pr.Ref = rateRef * float64(r.o.Instances)
	mon := monitor.Start(r.caddies, r.srv)
	r.rate = rateSetting
	defer func() { r.rate = "" }()
	if err := r.loadConfig(ctx, db, workers, r.up.url(), 0); err != nil {
		return err
	}
	r.logf("%s: %d workers delivering to an upstream that answers in %s through a target with rate %s%s", name, workers, r.o.Delay, rateSetting, r.perInstance())
	if !sleepCtx(ctx, r.o.Warmup) {
		return ctx.Err()
	}
	mon.WindowStart()
	a0 := r.up.answered.Load()
	if !sleepCtx(ctx, r.window) {
		return ctx.Err()
	}
	a1 := r.up.answered.Load()
	mon.WindowEnd()
	r.rate = ""
	if err := r.loadConfig(ctx, db, 0, r.up.url(), 0); err != nil {
		return err
	}
	pr.addWindow(mon.Stop())
	pr.Delivered += a1 - a0
	pr.DeliveredWindow += r.window
	r.logf("%s: %.1f delivered/s with rate %s", name, float64(a1-a0)/r.window.Seconds(), rateSetting)
	q, err := r.openQueue(ctx, db)
	if err != nil {
		return err
	}
	defer q.Close()
	var done int64
	if err := q.DoneIDs(ctx, func(string) { done++ }); err != nil {
		return err
	}
	seeded := int64(r.seeds[db].Jobs)
	pr.check(done < seeded, "all %d seeded jobs were delivered: the queue ran dry, so the rate is a floor; raise the seed", seeded)
	pr.Counts = append(pr.Counts, fmt.Sprintf("round %d: %d jobs done so far", r.round, done))
	return nil
}
