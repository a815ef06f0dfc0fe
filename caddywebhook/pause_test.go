package caddywebhook

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/queue"
)

// TestAdminPause drives POST /webhook/pause and /webhook/resume step by
// step: what each answers, what stats mark paused, and the app's pause set
// the pool reads, which each change refreshes at once.
func TestAdminPause(t *testing.T) {
	t.Parallel()
	f := setupAdmin(t)
	f.addJob(t, jobSpec{source: "github", target: "http", status: queue.StatusPending})
	f.addJob(t, jobSpec{source: "github", target: "exec", status: queue.StatusPending})
	f.addJob(t, jobSpec{source: "stripe", target: "http", status: queue.StatusPending})
	set := newPauseSet(f.store, zap.NewNop())
	f.cfg.Store(&runningConfig{Store: f.store, Retention: 24 * time.Hour, Routes: adminRoutes, pauses: set})

	ghHTTP, ghExec, stripe := queue.Route{Source: "github", Target: "http"}, queue.Route{Source: "github", Target: "exec"}, queue.Route{Source: "stripe", Target: "http"}
	steps := []struct {
		name       string
		method     string
		path       string
		status     int
		paused     bool          // the response's paused, for a 200
		pausedSet  []queue.Route // the routes the pool now leaves out
		statsMarks []queue.Route // the stats counts marked paused
	}{
		{"pause a target", http.MethodPost, "/webhook/pause?source=github&target=http", 200, true, []queue.Route{ghHTTP}, []queue.Route{ghHTTP}},
		{"pause the whole source", http.MethodPost, "/webhook/pause?source=github", 200, true, []queue.Route{ghHTTP, ghExec}, []queue.Route{ghHTTP, ghExec}},
		{"resume a target of a paused source", http.MethodPost, "/webhook/resume?source=github&target=http", 200, true, []queue.Route{ghHTTP, ghExec}, []queue.Route{ghHTTP, ghExec}},
		{"resume the source", http.MethodPost, "/webhook/resume?source=github", 200, false, nil, nil},
		{"pause another source", http.MethodPost, "/webhook/pause?source=stripe", 200, true, []queue.Route{stripe}, []queue.Route{stripe}},
		{"unknown source", http.MethodPost, "/webhook/pause?source=gitlab", 400, false, []queue.Route{stripe}, []queue.Route{stripe}},
		{"unknown target", http.MethodPost, "/webhook/pause?source=github&target=gone", 400, false, []queue.Route{stripe}, []queue.Route{stripe}},
		{"no source", http.MethodPost, "/webhook/pause", 400, false, []queue.Route{stripe}, []queue.Route{stripe}},
		{"misspelt parameter", http.MethodPost, "/webhook/resume?sorce=stripe", 400, false, []queue.Route{stripe}, []queue.Route{stripe}},
		{"GET is not allowed", http.MethodGet, "/webhook/pause?source=stripe", 405, false, []queue.Route{stripe}, []queue.Route{stripe}},
		{"resume what is gone from the config", http.MethodPost, "/webhook/resume?source=gitlab", 200, false, []queue.Route{stripe}, []queue.Route{stripe}},
		{"resume the last", http.MethodPost, "/webhook/resume?source=stripe", 200, false, nil, nil},
	}
	for _, st := range steps {
		rec := f.do(t, st.method, st.path)
		if rec.Code != st.status {
			t.Fatalf("%s: status %d, want %d; body %s", st.name, rec.Code, st.status, rec.Body)
		}
		if st.status == http.StatusOK {
			if resp := decode[adminapi.PauseResponse](t, rec); resp.Paused != st.paused {
				t.Errorf("%s: paused = %v, want %v", st.name, resp.Paused, st.paused)
			}
		}
		for _, r := range adminRoutes {
			want := false
			for _, p := range st.pausedSet {
				want = want || p == r
			}
			if got := set.paused(r); got != want {
				t.Errorf("%s: pool sees %s/%s paused = %v, want %v", st.name, r.Source, r.Target, got, want)
			}
		}
		stats := decode[adminapi.StatsResponse](t, f.do(t, http.MethodGet, "/webhook/stats"))
		for _, c := range stats.Counts {
			want := false
			for _, p := range st.statsMarks {
				want = want || (p.Source == c.Source && p.Target == c.Target)
			}
			if c.Paused != want {
				t.Errorf("%s: stats mark %s/%s paused = %v, want %v", st.name, c.Source, c.Target, c.Paused, want)
			}
		}
	}
}

// TestCLIPause runs caddy webhook pause, stats and resume in order
// against the admin API, and the refusals.
func TestCLIPause(t *testing.T) {
	t.Parallel()
	f, _ := setupCLI(t)
	steps := []struct {
		name string
		args []string
		want []string // substrings of the squeezed output
	}{
		{"pause a target", []string{"pause", "--source", "github", "--target", "http"}, []string{"github/http: paused", "paused: github/http"}},
		{"stats mark it", []string{"stats"}, []string{"github | http (paused) |", "paused: github/http\n  resume with `caddy webhook resume --source github --target http --address "}},
		{"pause the source", []string{"pause", "--source", "github"}, []string{"github: paused", "paused: github (every target), github/http"}},
		{"resume the target alone", []string{"resume", "--source", "github", "--target", "http"}, []string{"github/http: paused", "paused: github (every target)"}},
		{"resume the source", []string{"resume", "--source", "github"}, []string{"github: delivering", "paused: nothing"}},
	}
	for _, st := range steps {
		out := squeeze(f.cliOK(t, st.args...))
		for _, w := range st.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q:\n%s", st.name, w, out)
			}
		}
	}
	if out := squeeze(f.cliOK(t, "stats")); strings.Contains(out, "paused") {
		t.Errorf("stats after the resume still mention a pause:\n%s", out)
	}
	errs := []struct {
		name string
		args []string
		want string
	}{
		{"no source", []string{"pause", "--target", "http"}, "--source is required"},
		{"unknown source", []string{"pause", "--source", "gitlab"}, `"gitlab" is not a source of the running config (HTTP 400)`},
		{"unknown target", []string{"pause", "--source", "github", "--target", "sms"}, `"sms" is not a target of source "github"`},
	}
	for _, tt := range errs {
		res := f.cli(t, tt.args...)
		if res.code != 1 || !strings.Contains(res.stderr+res.stdout, tt.want) {
			t.Errorf("%s: exit %d, stderr %q; want 1 and %q", tt.name, res.code, res.stderr, tt.want)
		}
	}
}
