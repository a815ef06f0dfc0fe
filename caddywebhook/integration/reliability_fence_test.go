package integration

import (
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// fenceScript is the exec target of the fence scenarios: one delivery that
// takes SECONDS. It holds an exclusive lock on its job's lock file while it
// runs, so a second run of the same job at the same moment cannot take it
// and records the overlap; it logs "start N" and "end N" per attempt N.
// The lock dies with the process group the exec target kills.
const fenceScript = `#!/bin/sh
out=$1
secs=$2
exec 9>"$out/$WEBHOOK_DELIVERY_ID.lock"
if ! flock -n 9; then
	echo "$WEBHOOK_DELIVERY_ID attempt $WEBHOOK_ATTEMPT" >>"$out/overlaps"
fi
echo "start $WEBHOOK_ATTEMPT" >>"$out/$WEBHOOK_DELIVERY_ID.runs"
cat >/dev/null
sleep "$secs"
echo "end $WEBHOOK_ATTEMPT" >>"$out/$WEBHOOK_DELIVERY_ID.runs"
`

// fenceSetup writes fenceScript and returns its path and its output
// directory.
func fenceSetup(t *testing.T) (script, out string) {
	t.Helper()
	dir := t.TempDir()
	out = filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	script = filepath.Join(dir, "run.sh")
	if err := os.WriteFile(script, []byte(fenceScript), 0o755); err != nil {
		t.Fatal(err)
	}
	return script, out
}

// runLines returns the lines run.sh logged for one delivery ("start N",
// "end N").
func runLines(out, id string) []string {
	b, _ := os.ReadFile(filepath.Join(out, id+".runs"))
	if s := strings.TrimSpace(string(b)); s != "" {
		return strings.Split(s, "\n")
	}
	return nil
}

// history returns the attempt numbers and outcomes of a job's history.
func (c *caddyInstance) history(t *testing.T, jobID int64) (attempts []int, outcomes []string) {
	t.Helper()
	c.queryDB(t, func(db *sql.DB) error {
		rows, err := db.Query(`SELECT attempt, outcome FROM attempts WHERE job_id = ?1 ORDER BY seq`, jobID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var a int
			var o string
			if err := rows.Scan(&a, &o); err != nil {
				return err
			}
			attempts, outcomes = append(attempts, a), append(outcomes, o)
		}
		return rows.Err()
	})
	return attempts, outcomes
}

// testSigstop: Caddy is paused (SIGSTOP) for 4 s, twice its 2 s lease,
// while an exec delivery of 6 s runs, ten times over. The pool resumes
// to find its lease run out and may claim the job again; it must cancel
// the paused run before the new one starts, never run one job twice at
// once, and record each result under its own attempt.
func testSigstop(t *testing.T) {
	t.Parallel()
	const rounds = 10
	const pause = 4 * time.Second
	fig := newFigures(t, "sigstop")
	script, out := fenceSetup(t)
	c := newCaddy(t)
	c.start(t, caddyConfig{
		Webhook: "lease 2s\npoll_interval 200ms\nbackoff 100ms 200ms",
		Site: receiver("/hooks/github", "github", "github", "{env.E2E_GITHUB_SECRET}",
			fmt.Sprintf("to exec %s %s 6 {\n\ttimeout 30s\n}", script, out)),
	})
	var ids []string
	for i := range rounds {
		id := fmt.Sprintf("sigstop-%d", i)
		ids = append(ids, id)
		sendGitHub(t, c, id, "push")
		testutil.Eventually(t, func() bool { return len(runLines(out, id)) > 0 },
			func() string { return fmt.Sprintf("round %d: the delivery did not start\n%s", i+1, c.logTail()) })
		c.signal(t, syscall.SIGSTOP)
		time.Sleep(pause) // the pause itself, longer than the lease
		c.signal(t, syscall.SIGCONT)
	}
	testutil.EventuallyWithin(t, 2*time.Minute, func() bool { return settled(jobStatuses(t, c)) },
		func() string { return fmt.Sprintf("jobs did not settle: %v\n%s", jobStatuses(t, c), c.logTail()) })

	if b, err := os.ReadFile(filepath.Join(out, "overlaps")); err == nil {
		t.Errorf("two runs of one job at once:\n%s", b)
	}
	reclaimed, runs := 0, 0
	for _, id := range ids {
		js := c.jobsFor(t, "github", id)
		if len(js) != 1 || js[0].Status != "done" {
			t.Errorf("%s: %s, want one job done", id, rowsString(js))
			continue
		}
		lines := runLines(out, id)
		ended := map[string]bool{}
		for _, l := range lines {
			if n, ok := strings.CutPrefix(l, "end "); ok {
				ended[n] = true
			}
			if strings.HasPrefix(l, "start ") {
				runs++
			}
		}
		attempts, outcomes := c.history(t, js[0].ID)
		seen := map[int]bool{}
		for i, a := range attempts {
			if seen[a] {
				t.Errorf("%s: attempt %d recorded twice in the history %v %v", id, a, attempts, outcomes)
			}
			seen[a] = true
			if outcomes[i] == "done" && !ended[fmt.Sprint(a)] {
				t.Errorf("%s: done recorded under attempt %d, but the run that finished was %v (runs %v)", id, a, ended, lines)
			}
		}
		if js[0].Attempts > 1 {
			reclaimed++
		}
	}
	fig.events, fig.accepted = rounds, rounds
	fig.extra = fmt.Sprintf("pauses=%d pause=%s lease=2s runs=%d reclaimed_after_pause=%d overlaps=0", rounds, pause, runs, reclaimed)
	fig.log(t)
}

// testReloadLongJobs: reloads while long exec deliveries run. Each reload
// returns at once instead of waiting shutdown_grace; the old pool's
// deliveries finish in the background and the new pool never starts them
// again, so each job runs exactly once, as attempt 1.
// The case to guard is 24 reloads during 30 s jobs; this one keeps the
// property with 4 s jobs and a reload every ~0.5 s, so that every job
// lives through several reloads and the suite's wall time stays short.
func testReloadLongJobs(t *testing.T) {
	t.Parallel()
	const reloads = 24
	fig := newFigures(t, "reload_long_jobs")
	script, out := fenceSetup(t)
	c := newCaddy(t)
	cfg := func(workers int) caddyConfig {
		return caddyConfig{
			Webhook: fmt.Sprintf("workers %d\nshutdown_grace 10s\nlease 2s\npoll_interval 200ms", workers),
			Site: receiver("/hooks/github", "github", "github", "{env.E2E_GITHUB_SECRET}",
				fmt.Sprintf("to exec %s %s 4 {\n\ttimeout 30s\n}", script, out)),
		}
	}
	c.start(t, cfg(4))
	client := &http.Client{Timeout: waitTimeout}
	var ids []string
	var latencies []time.Duration
	for i := range reloads {
		if i%3 == 0 {
			id := fmt.Sprintf("long-%d", i/3)
			ids = append(ids, id)
			sendGitHub(t, c, id, "push")
			testutil.Eventually(t, func() bool { return len(runLines(out, id)) > 0 },
				func() string { return fmt.Sprintf("%s did not start\n%s", id, c.logTail()) })
		}
		// A different worker count each time, so each reload starts a
		// new pool and drains the old one.
		req, err := http.NewRequest(http.MethodPost, c.AdminURL("/load"), strings.NewReader(c.Caddyfile(cfg(3+i%2*3))))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "text/caddyfile")
		began := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("reload %d: POST /load: %v", i+1, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		latencies = append(latencies, time.Since(began))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("reload %d: POST /load: %d %s\n%s", i+1, resp.StatusCode, body, c.logTail())
		}
		time.Sleep(500 * time.Millisecond) // the reload cadence, not a wait for a state
	}
	testutil.EventuallyWithin(t, time.Minute, func() bool { return settled(jobStatuses(t, c)) },
		func() string { return fmt.Sprintf("jobs did not settle: %v\n%s", jobStatuses(t, c), c.logTail()) })

	if b, err := os.ReadFile(filepath.Join(out, "overlaps")); err == nil {
		t.Errorf("two runs of one job at once:\n%s", b)
	}
	for _, id := range ids {
		js := c.jobsFor(t, "github", id)
		if len(js) != 1 || js[0].Status != "done" || js[0].Attempts != 1 {
			t.Errorf("%s: %s, want one job done after 1 attempt", id, rowsString(js))
		}
		if lines := runLines(out, id); !slices.Equal(lines, []string{"start 1", "end 1"}) {
			t.Errorf("%s: runs %q, want exactly one run, attempt 1, to its end", id, lines)
		}
	}
	sorted := slices.Clone(latencies)
	slices.Sort(sorted)
	p50, p99 := sorted[len(sorted)/2], sorted[min(len(sorted)-1, len(sorted)*99/100)]
	if p99 > 5*time.Second {
		t.Errorf("reload latency p99 %s, want far below shutdown_grace (10s): a reload must not wait for deliveries", p99)
	}
	fig.events, fig.accepted = len(ids), len(ids)
	fig.extra = fmt.Sprintf("reloads=%d job=4s reload_p50=%s reload_p99=%s reload_max=%s", reloads,
		p50.Round(time.Millisecond), p99.Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond))
	fig.log(t)
}
