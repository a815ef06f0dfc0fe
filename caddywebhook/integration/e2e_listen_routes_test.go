package integration

// `caddy webhook listen` with routes by event type and several targets,
// end to end: real listen processes against a real Caddy.

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// routesConfig is a Caddy with a GitHub receiver whose events go to two
// pull targets, laptop and ci, both consumable with pullToken on
// /consume/*.
func routesConfig(t *testing.T, c *caddyInstance) caddyConfig {
	t.Helper()
	tokenFile := filepath.Join(c.dir, "pull-token")
	if err := os.WriteFile(tokenFile, []byte(pullToken), 0o600); err != nil {
		t.Fatal(err)
	}
	site := receiver("/hooks/github", "github", "github", "{env.E2E_GITHUB_SECRET}", "to pull {\n\tname laptop\n}", "to pull {\n\tname ci\n}") +
		fmt.Sprintf("\thandle /consume/* {\n\t\twebhook_consumer {\n\t\t\ttoken {file.%s}\n\t\t\ttargets laptop ci\n\t\t}\n\t}\n", tokenFile)
	return caddyConfig{Webhook: "lease 10s", Site: site}
}

// jobsByStatus counts target's jobs per (event type, status), with the
// attempts of pending ones.
func jobsByStatus(t *testing.T, c *caddyInstance) map[string]int {
	t.Helper()
	out := map[string]int{}
	c.queryDB(t, func(db *sql.DB) error {
		rows, err := db.Query(`SELECT j.target, e.event_type, j.status, j.attempts FROM jobs j JOIN events e ON e.id = j.event_id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var target, typ, status string
			var attempts int
			if err := rows.Scan(&target, &typ, &status, &attempts); err != nil {
				return err
			}
			key := target + " " + typ + " " + status
			if status == "pending" {
				key += fmt.Sprintf(" attempts=%d", attempts)
			}
			out[key]++
		}
		return rows.Err()
	})
	return out
}

// TestListenRoutesAndTargets: one listen consumes laptop and ci; pushes go
// to one app, releases to another, and issues, which no route takes with no
// default, are held, one line each naming its target, never delivered,
// and handed back uncharged at Ctrl-C; a listen started again with a
// default delivers them. Every line names its target.
func TestListenRoutesAndTargets(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs Caddy; skipped with -short")
	}
	c := newCaddy(t)
	c.start(t, routesConfig(t, c))
	pushes, releases, rest := newRecordingUpstream(t), newRecordingUpstream(t), newRecordingUpstream(t)
	for i := range 3 {
		sendGitHub(t, c, fmt.Sprintf("route-push-%d", i), "push")
	}
	sendGitHub(t, c, "route-release-0", "release")
	sendGitHub(t, c, "route-issues-0", "issues")

	l := startListenArgs(t, c, pullToken, "--target", "laptop,ci",
		"--forward-to", "push="+pushes.URL()+"/push", "--forward-to", "release,create="+releases.URL()+"/release")
	want := map[string]int{
		"laptop push done": 3, "ci push done": 3, "laptop release done": 1, "ci release done": 1,
		"laptop issues running": 1, "ci issues running": 1,
	}
	testutil.Eventually(t, func() bool { return fmt.Sprint(jobsByStatus(t, c)) == fmt.Sprint(want) }, func() string {
		return fmt.Sprintf("jobs %v, want %v\n%s", jobsByStatus(t, c), want, l.output(t))
	})
	testutil.Eventually(t, func() bool { return strings.Count(l.output(t), "route-issues-0  held") == 2 }, func() string {
		return "no held line for each target:\n" + l.output(t)
	})
	l.signal(syscall.SIGINT)
	if err := l.wait(t); err != nil {
		t.Fatalf("listen exited with %v after SIGINT:\n%s", err, l.output(t))
	}
	out := l.output(t)
	if pushes.count("/push") != 6 || releases.count("/release") != 2 {
		t.Errorf("the push app got %d requests, the release app %d; want 6 and 2", pushes.count("/push"), releases.count("/release"))
	}
	for _, target := range []string{"laptop", "ci"} {
		for _, id := range []string{"route-push-0", "route-push-1", "route-push-2", "route-release-0"} {
			if !regexp.MustCompile(`github → ` + target + `  \S+  ` + id + `  \[200\] done → `).MatchString(out) {
				t.Errorf("no line of %s for %s naming its target and route:\n%s", id, target, out)
			}
		}
		if !strings.Contains(out, "github → "+target+"  issues  route-issues-0  held") {
			t.Errorf("no held line of %s:\n%s", target, out)
		}
	}
	if n := strings.Count(out, "handed back 1 job uncharged (1 not started)"); n != 2 {
		t.Errorf("the stop says %d times that it handed back 1 job, want once per target:\n%s", n, out)
	}
	want = map[string]int{
		"laptop push done": 3, "ci push done": 3, "laptop release done": 1, "ci release done": 1,
		"laptop issues pending attempts=0": 1, "ci issues pending attempts=0": 1,
	}
	if got := jobsByStatus(t, c); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after the stop: jobs %v, want %v (the held jobs pending, uncharged)", got, want)
	}

	// Started again with a default, the held events are delivered.
	l = startListenArgs(t, c, pullToken, "--target", "laptop,ci", "--forward-to", rest.URL()+"/rest",
		"--forward-to", "push="+pushes.URL()+"/push")
	testutil.Eventually(t, func() bool { return rest.count("/rest") == 2 }, func() string {
		return fmt.Sprintf("the default got %d of the 2 held events\n%s", rest.count("/rest"), l.output(t))
	})
	testutil.Eventually(t, func() bool {
		got := jobsByStatus(t, c)
		return got["laptop issues done"] == 1 && got["ci issues done"] == 1
	}, func() string { return fmt.Sprint(jobsByStatus(t, c)) })
	l.signal(syscall.SIGINT)
	if err := l.wait(t); err != nil {
		t.Fatalf("listen exited with %v:\n%s", err, l.output(t))
	}
}

// TestListenPrintSecret: --print-secret prints a fresh secret in the form
// the scheme's SDK expects, and refuses an asymmetric scheme.
func TestListenPrintSecret(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Caddy; skipped with -short")
	}
	c := newCaddy(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--resign", "stripe"}, `^whsec_[0-9a-f]{64}\n$`},
		{[]string{"--resign", "github"}, `^[0-9a-f]{64}\n$`},
		{nil, `^whsec_[A-Za-z0-9+/]{32}\n$`},
		{[]string{"--resign", "discord"}, `only the provider can sign as this scheme: discord`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(append([]string{"print-secret"}, tt.args...), " "), func(t *testing.T) {
			out, _ := c.caddyCmd(t, append([]string{"webhook", "listen", "--print-secret"}, tt.args...)...)
			if !regexp.MustCompile(tt.want).MatchString(out) {
				t.Errorf("output %q, want %s", out, tt.want)
			}
		})
	}
}
