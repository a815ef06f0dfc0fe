package integration

import (
	"encoding/json"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestHistoryExplainsEveryRun: every delivery the upstream saw has its row
// in the job's history, as `caddy webhook show --json` gives it, with the
// time it really began (invariant 16). A delivery cut short by a stop
// after the grace is handed_back, uncharged, with its start and how long
// it ran; one cut short by kill -9 is recorded as lease_lost, with its
// start, by the claim that takes the job next. Before, the first showed
// the hand-back's time and 0 ms, and the second left no row at all.
func TestHistoryExplainsEveryRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Caddy; skipped with -short")
	}
	tests := []struct {
		name    string
		webhook string
		stop    func(t *testing.T, c *caddyInstance)
		// What the history shows of the cut run, then of the delivery
		// that ended it.
		cut, cutAttempt, doneAttempt int
		cutOutcome                   string
		cutAtLeast                   time.Duration // its duration
	}{
		{
			name: "a stop's hand-back", webhook: "shutdown_grace 300ms",
			stop:       func(t *testing.T, c *caddyInstance) { c.signal(t, syscall.SIGTERM) },
			cutOutcome: "handed_back", cutAttempt: 1, doneAttempt: 1, cutAtLeast: 300 * time.Millisecond,
		},
		{
			name: "kill -9", webhook: "lease 2s",
			stop:       func(t *testing.T, c *caddyInstance) { c.signal(t, syscall.SIGKILL) },
			cutOutcome: "lease_lost", cutAttempt: 1, doneAttempt: 2, cutAtLeast: 2 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			up := newUpstream(t, func(r *http.Request, _ string, n int) int {
				if n == 1 {
					<-r.Context().Done() // the first delivery hangs until it is cut
				}
				return http.StatusOK
			})
			c := newCaddy(t)
			cfg := caddyConfig{Webhook: tt.webhook, Site: githubSite(up.URL("/github"), "timeout 1m")}
			c.start(t, cfg)
			const id = "history-1"
			sendGitHub(t, c, id, "push")
			first := up.waitFor(t, "the first delivery", func(ds []delivery) bool { return len(ds) == 1 })[0]
			tt.stop(t, c)
			c.wait(t, stopTimeout)
			c.start(t, cfg)
			js := c.waitJobs(t, "github", id, "done")
			if js[0].Attempts != tt.doneAttempt {
				t.Errorf("job %s, want done by attempt %d", js[0], tt.doneAttempt)
			}

			out, err := c.caddyCmd(t, "webhook", "show", strconv.FormatInt(js[0].ID, 10), "--json", "--address", c.AdminAddr)
			if err != nil {
				t.Fatalf("caddy webhook show: %v\n%s", err, out)
			}
			var shown struct {
				History []struct {
					Attempt  int           `json:"attempt"`
					Started  time.Time     `json:"started"`
					Duration time.Duration `json:"duration_ns"`
					Outcome  string        `json:"outcome"`
				} `json:"history"`
			}
			if err := json.Unmarshal([]byte(out), &shown); err != nil {
				t.Fatal(err)
			}
			if len(shown.History) != 2 {
				t.Fatalf("history has %d rows, want the cut run and the delivery:\n%s", len(shown.History), out)
			}
			cut, last := shown.History[0], shown.History[1]
			if cut.Outcome != tt.cutOutcome || cut.Attempt != tt.cutAttempt {
				t.Errorf("the cut run's row: attempt %d %s, want attempt %d %s:\n%s", cut.Attempt, cut.Outcome, tt.cutAttempt, tt.cutOutcome, out)
			}
			// The row's start is when the claim or the run began: just
			// before the upstream saw the request, never after it.
			if gap := first.Start.Sub(cut.Started); gap < 0 || gap > 2*time.Second {
				t.Errorf("the cut run started at %s, the upstream saw it at %s: want the row's start just before", cut.Started, first.Start)
			}
			if cut.Duration < tt.cutAtLeast {
				t.Errorf("the cut run's duration %s, want at least %s", cut.Duration, tt.cutAtLeast)
			}
			if last.Outcome != "delivered" || last.Attempt != tt.doneAttempt {
				t.Errorf("the last row: attempt %d %s, want attempt %d delivered:\n%s", last.Attempt, last.Outcome, tt.doneAttempt, out)
			}
		})
	}
}
