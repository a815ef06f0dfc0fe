package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// The content rules' recipes of docs/RULES.md, run as written (with the
// suite's secrets, programs and upstreams put in) through a real Caddy.

// recipe returns the first caddyfile block after heading in docs/RULES.md,
// with the replacements (old, new, …) made.
func recipe(t *testing.T, heading string, replacements ...string) string {
	t.Helper()
	return replaced(t, heading, docBlock(t, "RULES.md", heading), replacements...)
}

// docBlock returns the first caddyfile block after heading in the page of
// docs/ named page.
func docBlock(t *testing.T, page, heading string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", page))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/%s has no heading %q", page, heading)
	}
	_, block, ok := strings.Cut(after, "```caddyfile\n")
	if !ok {
		t.Fatalf("no caddyfile block after %q", heading)
	}
	block, _, _ = strings.Cut(block, "```")
	return block
}

// replaced returns block, the recipe under heading, with the replacements
// (old, new, …) made; each old must be in it, so a recipe that changes
// fails the test rather than running unreplaced.
func replaced(t *testing.T, heading, block string, replacements ...string) string {
	t.Helper()
	for i := 0; i+1 < len(replacements); i += 2 {
		if !strings.Contains(block, replacements[i]) {
			t.Fatalf("the recipe %q has no %q", heading, replacements[i])
		}
		block = strings.ReplaceAll(block, replacements[i], replacements[i+1])
	}
	return block
}

// chatScript answers as a Slack incoming webhook does: 400 unless the body
// is JSON with a string text (https://api.slack.com/messaging/webhooks).
func chatScript(body func(r *http.Request) []byte) script {
	return func(r *http.Request, _ string, _ int) int {
		var m map[string]any
		if json.Unmarshal(body(r), &m) != nil {
			return http.StatusBadRequest
		}
		if _, ok := m["text"].(string); !ok {
			return http.StatusBadRequest
		}
		return http.StatusOK
	}
}

// checkoutCompleted is a Stripe checkout.session.completed event.
func checkoutCompleted(id string) []byte {
	return fmt.Appendf(nil, `{"id":%q,"object":"event","type":"checkout.session.completed","data":{"object":{"id":"cs_test_%s","amount_total":4200,"currency":"eur","customer_details":{"email":"jenny@example.com"},"metadata":{"order_id":"6735"},"note":"%s"}}}`,
		id, id, bodyMarker)
}

func invoicePaid(id string, amount int) []byte {
	if amount < 0 {
		return fmt.Appendf(nil, `{"id":%q,"type":"invoice.paid","data":{"object":{"id":"in_%s"}}}`, id, id)
	}
	return fmt.Appendf(nil, `{"id":%q,"type":"invoice.paid","data":{"object":{"id":"in_%s","amount_paid":%d}}}`, id, id, amount)
}

func sendStripe(t *testing.T, c *caddyInstance, body []byte) {
	t.Helper()
	status, resp := post(t, c.URL("/hooks/stripe"), signStripe(stripeSecret, time.Now(), body), body)
	if status != http.StatusAccepted {
		t.Fatalf("POST: got %d %q, want 202\n%s", status, resp, c.logTail())
	}
}

// testRulesDeployOnMain: a push to main runs the program, a push to dev is
// stored without a job.
func testRulesDeployOnMain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := recordScript(t, dir)
	c := newCaddy(t)
	c.start(t, caddyConfig{Site: recipe(t, "### Deploy on a push to main",
		"{env.GITHUB_WEBHOOK_SECRET}", "{env.E2E_GITHUB_SECRET}",
		"to exec /usr/local/bin/deploy {", "to exec "+script+" "+dir+" {webhook.delivery_id} 0 {")})
	for _, push := range []struct{ id, ref string }{{"push-main", "refs/heads/main"}, {"push-dev", "refs/heads/dev"}} {
		body := fmt.Appendf(nil, `{"ref":%q,"note":%q}`, push.ref, bodyMarker)
		if status, resp := post(t, c.URL("/hooks/github"), signGitHub(githubSecret, push.id, "push", body), body); status != http.StatusAccepted {
			t.Fatalf("POST %s: %d %s", push.id, status, resp)
		}
	}
	c.waitJobs(t, "github", "push-main", "done")
	if b, err := os.ReadFile(filepath.Join(dir, "push-main.body")); err != nil || !strings.Contains(string(b), "refs/heads/main") {
		t.Errorf("the program got %q, %v; want the push to main", b, err)
	}
	if js := c.jobsFor(t, "github", "push-dev"); len(js) != 0 {
		t.Errorf("push to dev has jobs %s, want none", rowsString(js))
	}
	if n := c.eventCount(t, "github"); n != 2 {
		t.Errorf("%d events stored, want both pushes", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "push-dev.done")); err == nil {
		t.Error("the program ran for the push to dev")
	}
	entries := c.waitAccessLog(t, "/hooks/github", 2)
	outcomes := map[string]bool{}
	for _, e := range entries {
		outcomes[e.Outcome] = true
	}
	if !outcomes["accepted"] || !outcomes["no_target"] {
		t.Errorf("access log outcomes %v, want accepted and no_target", outcomes)
	}
}

// testRulesStripeToChat: a Stripe sale reaches a Slack-style sink as
// exactly {"text": …} with the header set; only large invoices reach the
// billing app.
func testRulesStripeToChat(t *testing.T) {
	t.Parallel()
	var chat *upstream
	chat = newUpstream(t, func(r *http.Request, key string, n int) int {
		ds := chat.deliveries()
		return chatScript(func(*http.Request) []byte { return ds[len(ds)-1].Body })(r, key, n)
	})
	billing := newUpstream(t, always(http.StatusOK))
	sale := recipe(t, "### A Stripe sale to a chat channel",
		"{env.STRIPE_WEBHOOK_SECRET}", "{env.E2E_STRIPE_SECRET}",
		"{env.SLACK_WEBHOOK_URL}", chat.URL("/slack"))
	invoices := recipe(t, "### Only invoices over an amount, to the billing app",
		"https://billing.internal/hooks/stripe", billing.URL("/billing"))
	// The billing target goes into the sale recipe's receiver.
	site := strings.Replace(sale, "\tto http "+chat.URL("/slack"), strings.ReplaceAll(strings.TrimSpace(invoices), "\n", "\n\t")+"\n\tto http "+chat.URL("/slack"), 1)
	c := newCaddy(t)
	c.start(t, caddyConfig{Site: site})

	sendStripe(t, c, checkoutCompleted("evt_sale_1"))
	got := chat.waitFor(t, "the sale", func(ds []delivery) bool { return len(ds) > 0 && ds[0].Status != 0 })
	d := got[0]
	if want := `{"text":"New sale: cs_test_evt_sale_1, 42 EUR"}`; string(d.Body) != want || d.Status != http.StatusOK {
		t.Errorf("the chat got %s (answered %d), want exactly %s", d.Body, d.Status, want)
	}
	if d.Header.Get("Content-Type") != "application/json" || d.Header.Get("X-Order") != "6735" {
		t.Errorf("headers %v: want Content-Type application/json and X-Order 6735", d.Header)
	}
	c.waitJobs(t, "stripe", "evt_sale_1", "done")

	for _, inv := range []struct {
		id     string
		amount int
		want   bool
	}{{"evt_inv_big", 150000, true}, {"evt_inv_small", 5000, false}, {"evt_inv_none", -1, false}} {
		sendStripe(t, c, invoicePaid(inv.id, inv.amount))
		if inv.want {
			billing.waitAnswered(t, inv.id, http.StatusOK, 1)
		} else if js := c.jobsFor(t, "stripe", inv.id); len(js) != 0 {
			t.Errorf("%s has jobs %s, want none", inv.id, rowsString(js))
		}
	}
	if ds := billing.deliveries(); len(ds) != 1 {
		t.Errorf("the billing app got %s, want the large invoice only", summarize(ds))
	}
	if ds := chat.deliveries(); len(ds) != 1 {
		t.Errorf("the chat got %s, want the sale only", summarize(ds))
	}
}

// testRulesBrokenTransform: a transform that fails sends the job dead with
// the error; a reload fixes it, and the replay delivers.
func testRulesBrokenTransform(t *testing.T) {
	t.Parallel()
	var chat *upstream
	chat = newUpstream(t, func(r *http.Request, key string, n int) int {
		ds := chat.deliveries()
		return chatScript(func(*http.Request) []byte { return ds[len(ds)-1].Body })(r, key, n)
	})
	site := func(body string) string {
		return receiver("/hooks/stripe", "stripe", "stripe", "{env.E2E_STRIPE_SECRET}",
			toHTTP(chat.URL("/slack"), "name sales-chat", "transform {\n\t\tbody `"+body+"`\n\t}"))
	}
	c := newCaddy(t)
	c.start(t, caddyConfig{Site: site(`{"text": "Sale to " + body.data.object.customer_email}`)})
	sendStripe(t, c, checkoutCompleted("evt_broken_1"))
	js := c.waitJobs(t, "stripe", "evt_broken_1", "dead")
	if !strings.Contains(js[0].LastError, "transform body: no such key: customer_email") || js[0].Attempts != 1 {
		t.Errorf("job %s: want dead at once, its last error naming the missing field", js[0])
	}
	if ds := chat.deliveries(); len(ds) != 0 {
		t.Fatalf("the chat got %s before the fix", summarize(ds))
	}

	// The rule test shows the failure, then the fix, on the stored job.
	id := strconv.FormatInt(js[0].ID, 10)
	out, err := c.caddyCmd(t, "webhook", "rules", "test", "--job", id, "--address", c.AdminAddr)
	if err != nil || !strings.Contains(out, "transform error (the job would go dead): transform body: no such key: customer_email") {
		t.Errorf("rules test before the fix: %v\n%s", err, out)
	}
	c.reload(t, caddyConfig{Site: site(`{"text": "Sale to " + get(body, "data.object.customer_details.email", "someone")}`)})
	out, err = c.caddyCmd(t, "webhook", "rules", "test", "--job", id, "--address", c.AdminAddr)
	if err != nil || !strings.Contains(out, "POST\n") || !strings.Contains(out, `{"text":"Sale to jenny@example.com"}`) {
		t.Errorf("rules test after the fix: %v\n%s", err, out)
	}
	if out, err := c.caddyCmd(t, "webhook", "replay", "--id", id, "--address", c.AdminAddr); err != nil {
		t.Fatalf("caddy webhook replay: %v\n%s", err, out)
	}
	got := chat.waitFor(t, "the replayed sale", func(ds []delivery) bool { return len(ds) > 0 && ds[0].Status != 0 })
	if string(got[0].Body) != `{"text":"Sale to jenny@example.com"}` || got[0].Status != http.StatusOK {
		t.Errorf("the chat got %s (%d)", got[0].Body, got[0].Status)
	}
	c.waitJobs(t, "stripe", "evt_broken_1", "done")
}

// testRulesValidate: `caddy validate` reports a broken filter with the
// receiver, the target, the directive and the column, and a broken
// transform with the header it may not set.
func testRulesValidate(t *testing.T) {
	t.Parallel()
	c := newCaddy(t)
	tests := []struct {
		name, target string
		want         []string
	}{
		{"filter", "to http http://127.0.0.1:9/ {\n\tname deploy\n\tfilter body.ref = \"refs/heads/main\"\n}",
			[]string{`webhook_receiver "github": target "deploy": filter: line 1, column 10: Syntax error`}},
		{"transform", "to http http://127.0.0.1:9/ {\n\ttransform {\n\t\theader Host `\"example.com\"`\n\t}\n}",
			[]string{`target "http": transform: header Host: header Host is set by the transport`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := c.writeConfig(t, caddyConfig{Site: receiver("/hooks/github", "github", "github", "{env.E2E_GITHUB_SECRET}", tt.target)})
			out, err := c.caddyCmd(t, "validate", "--config", path)
			if err == nil {
				t.Fatalf("caddy validate passed:\n%s", out)
			}
			out = strings.ReplaceAll(out, `\"`, `"`) // the message is in a JSON log line
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("caddy validate said:\n%s\nwant %q", out, w)
				}
			}
		})
	}
}

// testRulesTransformStatus: a target wrapped by a transform records what
// its upstream answered, or what its program exited with, in the history
// `caddy webhook show --json` gives, as the same target without a transform
// does. The transform reshapes a copy of the job, and the status the target
// set on that copy was once lost ("status": null for a 200 and a 429).
func testRulesTransformStatus(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := recordScript(t, dir)
	chat := newUpstream(t, func(_ *http.Request, _ string, n int) int {
		if n == 1 {
			return http.StatusTooManyRequests
		}
		return http.StatusOK
	})
	c := newCaddy(t)
	c.start(t, caddyConfig{Site: `
	webhook_receiver /hooks/github {
		source github
		scheme github
		secret {env.E2E_GITHUB_SECRET}
		to http ` + chat.URL("/slack") + ` {
			name chat
			backoff 50ms 100ms
			transform {
				body ` + "`" + `{"text": "push to " + body.ref}` + "`" + `
			}
		}
		to exec ` + script + ` ` + dir + ` {webhook.delivery_id} 3 {
			name program
			max_attempts 1
			transform {
				body ` + "`" + `{"ref": body.ref}` + "`" + `
			}
		}
	}`})
	const id = "transform-status-1"
	body := fmt.Appendf(nil, `{"ref":"refs/heads/main","note":%q}`, bodyMarker)
	if status, resp := post(t, c.URL("/hooks/github"), signGitHub(githubSecret, id, "push", body), body); status != http.StatusAccepted {
		t.Fatalf("POST: %d %s", status, resp)
	}
	chat.waitAnswered(t, id, http.StatusOK, 1)
	jobs := map[string]jobRow{} // by target, once each is done or dead
	testutil.Eventually(t, func() bool {
		for _, j := range c.jobsFor(t, "github", id) {
			if j.Status == "done" || j.Status == "dead" {
				jobs[j.Target] = j
			}
		}
		return len(jobs) == 2
	}, func() string { return fmt.Sprintf("jobs of %s: %v", id, c.jobsFor(t, "github", id)) })

	tests := []struct {
		target, status string
		want           []int // each attempt's status, in order
	}{
		{"chat", "done", []int{http.StatusTooManyRequests, http.StatusOK}},
		{"program", "dead", []int{3}},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			job := jobs[tt.target]
			if job.Status != tt.status {
				t.Fatalf("job %d of %s is %s, want %s", job.ID, tt.target, job.Status, tt.status)
			}
			out, err := c.caddyCmd(t, "webhook", "show", strconv.FormatInt(job.ID, 10), "--json", "--address", c.AdminAddr)
			if err != nil {
				t.Fatalf("caddy webhook show: %v\n%s", err, out)
			}
			var shown struct {
				History []struct {
					Attempt int  `json:"attempt"`
					Status  *int `json:"status"`
				} `json:"history"`
			}
			if err := json.Unmarshal([]byte(out), &shown); err != nil {
				t.Fatalf("show --json: %v\n%s", err, out)
			}
			var got []int
			for _, a := range shown.History {
				if a.Status == nil {
					t.Errorf("attempt %d has no status:\n%s", a.Attempt, out)
					continue
				}
				got = append(got, *a.Status)
			}
			slices.Sort(got) // the history's order is the API's; the statuses are what matter
			want := slices.Sorted(slices.Values(tt.want))
			if !slices.Equal(got, want) {
				t.Errorf("attempts' statuses %v, want %v:\n%s", got, want, out)
			}
		})
	}
}
