package phases

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/loadgen"
	"github.com/caddywebhook/caddywebhook/queue"
)

// The receiving phases: static, the ingest phases (ingest, the traced
// and rules pairs, baseline, backlog-ingest, replay), and the end-to-end
// ones (e2e, e2e-traced, backlog-e2e, orphans-e2e).

func (r *runner) static(ctx context.Context) error {
	pr := r.res.Phase("static")
	r.db = "" // a respond route: no store to count
	if err := r.loadConfig(ctx, "static.db", 0, "", 0); err != nil {
		return err
	}
	r.logf("static: POST %s, %d connections", pathStatic, r.o.Conns)
	res, err := r.drive(ctx, pr, r.newLoad("static", pathStatic, 200), nil)
	if err != nil {
		return err
	}
	r.logf("static: %.0f/s", res.OKRate())
	return nil
}

// ingest drives the receiver with the pool paused (workers 0), then checks
// that every 202 is in the database with its pending job.
func (r *runner) ingest(ctx context.Context, name, db string, maxBatch int, during func(windowStart time.Time)) error {
	pr := r.res.Phase(name)
	q, after, err := r.openPhase(ctx, db, 0, maxBatch)
	if err != nil {
		return err
	}
	defer q.Close()
	paths := pathHook
	if second := r.pair.secondPath(); second != "" {
		paths += " and " + second + ", in turn"
	}
	r.logf("%s: POST %s, workers 0, %d connections", name, paths, r.o.Conns)
	l := r.newLoad(name, pathHook, 202)
	res, err := r.drive(ctx, pr, l, during)
	if err != nil {
		return err
	}
	r.logf("%s: %.0f accepted/s, p50 %s, p99 %s", name, res.OKRate(), loadgen.Millis(loadgen.Percentile(res.Lat, 0.5)), loadgen.Millis(loadgen.Percentile(res.Lat, 0.99)))
	found, byStatus, err := r.checkStored(ctx, pr, res, q, after, l.Tag)
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
		out, err = r.caddies[0].Admin().Call(ctx, http.MethodPost, "/webhook/replay?status=dead", nil)
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
	r.res.Notes = append(r.res.Notes, note)
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
			if _, err := r.caddies[0].Admin().Call(ctx, http.MethodGet, path, nil); err != nil {
				return err
			}
			took = append(took, time.Since(t0))
		}
		slices.Sort(took)
		note := fmt.Sprintf("%s round %d: GET %s median %s, slowest %s (5 calls)", phase, r.round, path,
			took[len(took)/2].Round(10*time.Microsecond), took[len(took)-1].Round(10*time.Microsecond))
		r.logf("%s", note)
		r.res.Notes = append(r.res.Notes, note)
	}
	return nil
}

// e2e drives the receiver while the pool delivers to the no-op upstream,
// a respond route on the same Caddy. Delivered/s is the growth of the done
// jobs across the window, read from the database; the backlog of the
// phase's own events is sampled every second.
func (r *runner) e2e(ctx context.Context, name, db string) error {
	pr := r.res.Phase(name)
	q, after, err := r.openPhase(ctx, db, r.o.Workers, 0)
	if err != nil {
		return err
	}
	defer q.Close()
	r.logf("%s: POST %s, %d workers delivering to %s, %d connections%s", name, pathHook, r.o.Workers, pathNoop, r.o.Conns, r.perInstance())
	l := r.newLoad(name, pathHook, 202)
	var (
		done0, done1 int64
		samples      []backlogSample
		sampleErr    error
	)
	during := func(windowStart time.Time) {
		end := windowStart.Add(l.Duration)
		if done0, sampleErr = q.Done(ctx); sampleErr != nil {
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
			byStatus, err := q.StatusAfter(ctx, after)
			if err != nil {
				sampleErr = err
				return
			}
			samples = append(samples, backlogSample{
				at:      time.Since(windowStart),
				backlog: byStatus[string(queue.StatusPending)] + byStatus[string(queue.StatusRunning)],
			})
			if !next.Before(end) {
				done1, sampleErr = q.Done(ctx)
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
	pr.Delivered += done1 - done0
	pr.DeliveredWindow += l.Duration
	pr.slopes = append(pr.slopes, slope(samples))

	// Every instance reads the same queue; the first one's answer will do.
	st, err := stats(ctx, r.caddies[0].Admin())
	if err != nil {
		return err
	}
	pr.BacklogEnd = 0
	for _, c := range st.Counts {
		if c.Status == queue.StatusPending || c.Status == queue.StatusRunning {
			pr.BacklogEnd += c.Jobs
		}
	}
	r.logf("%s: %.0f accepted/s, %.0f delivered/s, backlog %d at the end", name, res.OKRate(), float64(done1-done0)/l.Duration.Seconds(), pr.BacklogEnd)

	found, byStatus, err := r.checkStored(ctx, pr, res, q, after, l.Tag)
	if err != nil {
		return err
	}
	var total int64
	for _, n := range byStatus {
		total += n
	}
	pr.check(total == found && byStatus[string(queue.StatusDead)] == 0,
		"jobs of the phase's events by status %v, want %d in all and none dead", byStatus, found)
	pr.Counts = append(pr.Counts, fmt.Sprintf("round %d: the round's jobs: %d done, %d pending, %d running", r.round,
		byStatus[string(queue.StatusDone)], byStatus[string(queue.StatusPending)], byStatus[string(queue.StatusRunning)]))
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
