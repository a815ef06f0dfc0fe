package integration

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// testSearchReplay: after an incident, through the CLI of a real Caddy.
// Billing was broken: its jobs of two customers' pushes died, and their
// issues never went to billing (its filter takes pushes). `events --where`
// and `list --where` find one customer's; `replay --where --dry-run`
// changes nothing and sends nothing; the replay delivers exactly that
// customer's events to billing, once each, the dead jobs replayed and the
// issues sent as new jobs; run again, it queues nothing more.
func testSearchReplay(t *testing.T) {
	t.Parallel()
	broken := func(r *http.Request, _ string, _ int) int {
		if r.URL.Path == "/billing" {
			return http.StatusBadRequest // permanent: dead at once
		}
		return http.StatusOK
	}
	up := newUpstream(t, broken)
	c := newCaddy(t)
	c.start(t, caddyConfig{Site: receiver("/hooks/github", "github", "github", "{env.E2E_GITHUB_SECRET}",
		toHTTP(up.URL("/billing"), "name billing", `filter event_type == "push"`), toHTTP(up.URL("/chat"), "name chat"))})
	events := []struct{ id, event, customer string }{
		{"sr-1", "push", "cus_A"}, {"sr-2", "push", "cus_B"}, {"sr-3", "issues", "cus_A"},
		{"sr-4", "push", "cus_A"}, {"sr-5", "issues", "cus_B"},
	}
	for _, e := range events {
		body := fmt.Appendf(nil, `{"id":%q,"customer":%q,"note":"%s-%s"}`, e.id, e.customer, bodyMarker, e.id)
		if status, resp := post(t, c.URL("/hooks/github"), signGitHub(githubSecret, e.id, e.event, body), body); status != http.StatusAccepted {
			t.Fatalf("POST %s: %d %s", e.id, status, resp)
		}
	}
	// chat takes all five; billing's three pushes die.
	var js []jobRow
	testutil.Eventually(t, func() bool {
		js = c.jobs(t, "github")
		n := map[string]int{}
		for _, j := range js {
			n[j.Target+" "+j.Status]++
		}
		return len(js) == 8 && n["chat done"] == 5 && n["billing dead"] == 3
	}, func() string { return "chat's 5 jobs done and billing's 3 dead; have " + rowsString(js) })
	cli := func(args ...string) string {
		t.Helper()
		out, err := c.caddyCmd(t, append(append([]string{"webhook"}, args...), "--address", c.AdminAddr)...)
		if err != nil {
			t.Fatalf("caddy webhook %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	const customerA = `body.customer == "cus_A"`

	out := cli("events", "--where", customerA)
	if got := deliveriesIn(out, "sr-"); !slices.Equal(got, []string{"sr-1", "sr-3", "sr-4"}) {
		t.Errorf("events --where listed %v, want sr-1, sr-3, sr-4:\n%s", got, out)
	}
	out = cli("list", "--where", customerA+` && job.status == "dead"`)
	if got := deliveriesIn(out, "sr-"); !slices.Equal(got, []string{"sr-1", "sr-4"}) || strings.Count(out, " billing ") != 2 {
		t.Errorf("list --where listed %v, want billing's jobs of sr-1 and sr-4:\n%s", got, out)
	}

	up.setScript(always(http.StatusOK)) // billing is fixed
	before := c.jobs(t, "github")
	delivered := len(up.deliveries())
	out = cli("replay", "--where", customerA, "--target", "billing", "--status", "any", "--dry-run", "--show-request")
	for _, want := range []string{"dry run, nothing changed: would queue 3 jobs for 3 matching events", "replay 2 dead", "add 1 new job",
		"billing of source github would receive, for event"} {
		if !strings.Contains(out, want) {
			t.Errorf("the dry run's output lacks %q:\n%s", want, out)
		}
	}
	if after := c.jobs(t, "github"); rowsString(after) != rowsString(before) {
		t.Errorf("the dry run changed the jobs:\n%s\nto\n%s", rowsString(before), rowsString(after))
	}
	if n := len(up.deliveries()); n != delivered {
		t.Errorf("the dry run sent %d deliveries", n-delivered)
	}

	out = cli("replay", "--where", customerA, "--target", "billing", "--status", "any")
	if !strings.Contains(out, "queued 3 jobs for 3 matching events") {
		t.Errorf("replay: %s", out)
	}
	for _, id := range []string{"sr-1", "sr-3", "sr-4"} {
		up.waitAnswered(t, id, http.StatusOK, 2) // chat's, then billing's
	}
	for _, id := range []string{"sr-1", "sr-4"} {
		c.waitJobs(t, "github", id, "done")
	}
	if js := c.jobsFor(t, "github", "sr-3"); len(js) != 2 {
		t.Errorf("sr-3 has %s, want chat's job and billing's new one", rowsString(js))
	}
	// Nothing queued twice, and nothing of cus_B.
	out = cli("replay", "--where", customerA, "--target", "billing", "--status", "dead")
	if !strings.Contains(out, "no job to queue") && !strings.Contains(out, "queued 0") {
		t.Errorf("the replay again: %s", out)
	}
	billing := map[string]int{}
	for _, d := range up.deliveries() {
		if d.Path == "/billing" && d.Status == http.StatusOK {
			billing[d.Key]++
		}
	}
	if want := map[string]int{"sr-1": 1, "sr-3": 1, "sr-4": 1}; fmt.Sprint(billing) != fmt.Sprint(want) {
		t.Errorf("billing took %v, want %v", billing, want)
	}
	if js := c.jobsFor(t, "github", "sr-2"); !slices.ContainsFunc(js, func(j jobRow) bool { return j.Status == "dead" }) {
		t.Errorf("cus_B's sr-2 is %s, want its billing job still dead", rowsString(js))
	}

	// A bad expression: the position, and exit status 1.
	bad, err := c.caddyCmd(t, "webhook", "events", "--where", `body.customer ==`, "--address", c.AdminAddr)
	if err == nil || !strings.Contains(bad, "invalid --where: line 1, column 17: Syntax error") {
		t.Errorf("a bad expression: %v\n%s", err, bad)
	}
}

// deliveriesIn returns the words of out that start with prefix, in order,
// each once.
func deliveriesIn(out, prefix string) []string {
	var got []string
	for _, w := range strings.Fields(out) {
		if strings.HasPrefix(w, prefix) && !slices.Contains(got, w) {
			got = append(got, w)
		}
	}
	return got
}
