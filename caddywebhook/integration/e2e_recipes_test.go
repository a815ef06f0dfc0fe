package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// TestRecipes runs the first three configs of docs/RECIPES.md as written
// (the secrets, programs and upstreams of the suite put in) through a real
// Caddy, against stand-ins for the deploy program, the licence mailer, the
// chat services and the billing app, and checks what each section promises.
func TestRecipes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Caddy; skipped with -short")
	}
	t.Run("deploy_on_push_to_main", testRecipeDeploy)
	t.Run("licence_and_chat_per_sale", testRecipeLicenceAndChat)
	t.Run("subscription_events_in_order", testRecipeOrderedSubscriptions)
}

// recipeSite returns the inside of the site block of the first caddyfile
// block after heading in docs/RECIPES.md, with the replacements (old, new,
// …) made: the harness puts it in a site of its own on loopback.
func recipeSite(t *testing.T, heading string, replacements ...string) string {
	t.Helper()
	block := docBlock(t, "RECIPES.md", heading)
	const site = "hooks.example.com {\n"
	if !strings.HasPrefix(block, site) {
		t.Fatalf("the recipe %q does not start with %q", heading, site)
	}
	block = strings.TrimSuffix(strings.TrimSpace(strings.TrimPrefix(block, site)), "}")
	return replaced(t, heading, block, replacements...)
}

// deployScript writes the deploy program's stand-in into dir: it logs the
// start and end of each run with the delivery id it was given, takes a
// moment as a deploy does, and exits with the status in dir/exit (0 when
// the file is missing), so a test can break the deploy and fix it.
func deployScript(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "deploy")
	script := `#!/bin/sh
dir=$1
id=$2
cat >"$dir/$id.body"
echo "start $id" >>"$dir/runs"
sleep 0.2
code=$(cat "$dir/exit" 2>/dev/null || echo 0)
echo "end $id" >>"$dir/runs"
echo "deploy: exiting $code" >&2
exit "$code"
`
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// runs reads the deploy stand-in's log: "start ID" and "end ID" lines.
func runs(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "runs"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.FieldsFunc(string(b), func(r rune) bool { return r == '\n' })
}

// testRecipeDeploy: "Deploy on a push to main".
func testRecipeDeploy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := deployScript(t, dir)
	c := newCaddy(t)
	c.start(t, caddyConfig{Site: recipeSite(t, "## Deploy on a push to main",
		"{env.GITHUB_WEBHOOK_SECRET}", "{env.E2E_GITHUB_SECRET}",
		"/usr/local/bin/deploy {webhook.delivery_id}", script+" "+dir+" {webhook.delivery_id}",
		// The recipe's backoff is the default (2 s, 4 s, …); the test
		// waits milliseconds for its five attempts instead.
		"max_attempts 5", "max_attempts 5\n\t\t\tbackoff 20ms 40ms")})
	push := func(id, ref string) {
		t.Helper()
		body := fmt.Appendf(nil, `{"ref":%q,"after":"%s-sha","note":%q}`, ref, id, bodyMarker)
		if status, resp := post(t, c.URL("/webhook/github"), signGitHub(githubSecret, id, "push", body), body); status != http.StatusAccepted {
			t.Fatalf("POST %s: %d %s", id, status, resp)
		}
	}

	// A push to main deploys once; two more in a row never overlap.
	for _, id := range []string{"main-1", "main-2", "main-3"} {
		push(id, "refs/heads/main")
	}
	for _, id := range []string{"main-1", "main-2", "main-3"} {
		js := c.waitJobs(t, "github", id, "done")
		if len(js) != 1 || js[0].Attempts != 1 {
			t.Errorf("%s: jobs %s, want one deploy done at the first attempt", id, rowsString(js))
		}
	}
	log := runs(t, dir)
	for i := 0; i+1 < len(log); i += 2 {
		start, end := strings.TrimPrefix(log[i], "start "), strings.TrimPrefix(log[i+1], "end ")
		if !strings.HasPrefix(log[i], "start ") || !strings.HasPrefix(log[i+1], "end ") || start != end {
			t.Fatalf("deploys overlapped (concurrency 1): %q", log)
		}
	}
	if len(log) != 6 {
		t.Errorf("runs %q, want three deploys", log)
	}

	// A push to another branch is stored, runs nothing, and can be run
	// anyway.
	push("dev-1", "refs/heads/dev")
	if js := c.jobsFor(t, "github", "dev-1"); len(js) != 0 {
		t.Errorf("the push to dev has jobs %s, want none", rowsString(js))
	}
	out, err := c.caddyCmd(t, "webhook", "events", "--has-target", "false", "--json", "--address", c.AdminAddr)
	if err != nil {
		t.Fatalf("caddy webhook events: %v\n%s", err, out)
	}
	var events struct {
		Events []struct {
			ID         int64  `json:"id"`
			DeliveryID string `json:"delivery_id"`
		} `json:"events"`
	}
	if err := json.Unmarshal([]byte(out), &events); err != nil || len(events.Events) != 1 || events.Events[0].DeliveryID != "dev-1" {
		t.Fatalf("events --has-target false: %v\n%s", err, out)
	}
	ev := strconv.FormatInt(events.Events[0].ID, 10)
	if out, err := c.caddyCmd(t, "webhook", "resend", "--event", ev, "--target", "deploy", "--address", c.AdminAddr); err != nil {
		t.Fatalf("caddy webhook resend --event %s --target deploy: %v\n%s", ev, err, out)
	}
	c.waitJobs(t, "github", "dev-1", "done")

	// Exit 65 is dead at once; a replay after the fix deploys.
	writeExit(t, dir, 65)
	push("main-bad", "refs/heads/main")
	dead := c.waitJobs(t, "github", "main-bad", "dead")
	if dead[0].Attempts != 1 || !strings.Contains(dead[0].LastError, "deploy: exiting 65") {
		t.Errorf("exit 65: %s, want dead at the first attempt with the program's output", dead[0])
	}
	writeExit(t, dir, 0)
	if out, err := c.caddyCmd(t, "webhook", "replay", strconv.FormatInt(dead[0].ID, 10), "--address", c.AdminAddr); err != nil {
		t.Fatalf("caddy webhook replay: %v\n%s", err, out)
	}
	c.waitJobs(t, "github", "main-bad", "done")

	// Any other failure is retried, five attempts in all.
	writeExit(t, dir, 1)
	push("main-flaky", "refs/heads/main")
	flaky := c.waitJobs(t, "github", "main-flaky", "dead")
	if flaky[0].Attempts != 5 {
		t.Errorf("exit 1: %s, want dead after 5 attempts", flaky[0])
	}
}

func writeExit(t *testing.T, dir string, code int) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "exit"), []byte(strconv.Itoa(code)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// chatStandIn answers as a chat service's incoming webhook does: 400
// unless the body is JSON with a string field (Slack's text, Discord's
// content), and 429 with Retry-After to the requests tooMany says.
type chatStandIn struct {
	field   string
	tooMany func(n int) bool // the nth request is told to slow down
	srv     *httptest.Server

	mu  sync.Mutex
	got []chatRequest
}

type chatRequest struct {
	at     time.Time
	body   string
	status int
}

func newChatStandIn(t *testing.T, field string, tooMany func(n int) bool) *chatStandIn {
	t.Helper()
	s := &chatStandIn{field: field, tooMany: tooMany}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		sc := bufio.NewScanner(r.Body)
		for sc.Scan() {
			b.WriteString(sc.Text())
		}
		var m map[string]any
		err := json.Unmarshal([]byte(b.String()), &m)
		_, isText := m[field].(string)
		status := http.StatusOK
		s.mu.Lock()
		switch {
		case err != nil || !isText:
			status = http.StatusBadRequest
		case s.tooMany(len(s.got) + 1):
			w.Header().Set("Retry-After", "1")
			status = http.StatusTooManyRequests
		}
		s.got = append(s.got, chatRequest{at: time.Now(), body: b.String(), status: status})
		s.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *chatStandIn) requests() []chatRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// polarOrderPaid is a Polar order.paid event for the Pro plan, 49 USD
// (https://polar.sh/docs/api-reference/webhooks/order.paid).
func polarOrderPaid(orderID string) []byte {
	return fmt.Appendf(nil, `{"type":"order.paid","timestamp":"2026-12-01T10:00:00Z","data":{"id":%q,"status":"paid","paid":true,"total_amount":4900,"currency":"usd","customer":{"id":"cust-1","email":"alice@example.com","name":"Alice"},"product":{"id":"prod-1","name":"Pro plan"},"note":%q}}`,
		orderID, bodyMarker)
}

// testRecipeLicenceAndChat: "A licence mail and a chat message per sale".
func testRecipeLicenceAndChat(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := recordScript(t, dir)
	slack := newChatStandIn(t, "text", func(n int) bool { return n == 1 })
	discord := newChatStandIn(t, "content", func(int) bool { return false })
	c := newCaddy(t)
	c.Env = append(c.Env, "SMTP_URL=smtp://mail.test:25")
	c.start(t, caddyConfig{Site: recipeSite(t, "## A licence mail and a chat message per sale",
		"{env.POLAR_WEBHOOK_SECRET}", "{env.E2E_STANDARD_SECRET}",
		"to exec /usr/local/bin/send-licence {", "to exec "+script+" "+dir+" {webhook.delivery_id} 0 {",
		"{env.SLACK_WEBHOOK_URL}", slack.srv.URL+"/services/T0/B0/X",
		"{env.DISCORD_WEBHOOK_URL}", discord.srv.URL+"/api/webhooks/1/x")})
	orders := []string{"order-1", "order-2", "order-3"}
	for _, id := range orders {
		body := polarOrderPaid(id)
		if status, resp := post(t, c.URL("/webhook/polar"), signStandard(standardSecret, "msg_"+id, time.Now(), body), body); status != http.StatusAccepted {
			t.Fatalf("POST %s: %d %s", id, status, resp)
		}
	}
	other := []byte(`{"type":"subscription.created","data":{"id":"sub-1"}}`)
	if status, resp := post(t, c.URL("/webhook/polar"), signStandard(standardSecret, "msg_sub_1", time.Now(), other), other); status != http.StatusAccepted {
		t.Fatalf("POST subscription.created: %d %s", status, resp)
	}

	for _, id := range orders {
		js := c.waitJobs(t, "polar", "msg_"+id, "done")
		var targets []string
		for _, j := range js {
			targets = append(targets, j.Target)
		}
		slices.Sort(targets)
		if !slices.Equal(targets, []string{"discord", "licence", "slack"}) {
			t.Errorf("%s: jobs %s, want licence, slack and discord", id, rowsString(js))
		}
		b, err := os.ReadFile(filepath.Join(dir, "msg_"+id+".body"))
		if err != nil || !strings.Contains(string(b), `"email":"alice@example.com"`) {
			t.Errorf("the licence program got %q (%v), want the order", b, err)
		}
		env, _ := os.ReadFile(filepath.Join(dir, "msg_"+id+".env"))
		if !strings.Contains(string(env), "SMTP_URL=smtp://mail.test:25") {
			t.Errorf("the licence program's environment lacks SMTP_URL:\n%s", env)
		}
	}
	if js := c.jobsFor(t, "polar", "msg_sub_1"); len(js) != 0 {
		t.Errorf("subscription.created has jobs %s, want none", rowsString(js))
	}

	want := map[*chatStandIn]string{
		slack:   `{"text":"New sale: Pro plan to alice@example.com, 49 USD"}`,
		discord: `{"content":"New sale: Pro plan, 49 USD"}`,
	}
	for chat, body := range want {
		rs := chat.requests()
		var delivered []chatRequest
		for _, r := range rs {
			if r.body != body {
				t.Errorf("%s got %s, want exactly %s", chat.field, r.body, body)
			}
			if r.status == http.StatusOK {
				delivered = append(delivered, r)
			}
		}
		if len(delivered) != len(orders) {
			t.Errorf("%s: %d messages delivered, want %d", chat.field, len(delivered), len(orders))
		}
		// rate 1/s: one message a second at most. The limit spaces the
		// starts; each arrival here also carries the scheduling between
		// a start and its request (a tenth of a second under -race on a
		// loaded machine), so a gap may be that much short of a second
		// as long as the whole run still took a second per message.
		for i := 1; i < len(rs); i++ {
			if gap := rs[i].at.Sub(rs[i-1].at); gap < 750*time.Millisecond {
				t.Errorf("%s: requests %d and %d %s apart, want a second (rate 1/s)", chat.field, i, i+1, gap)
			}
		}
		if n := len(rs); n > 1 {
			if span, want := rs[n-1].at.Sub(rs[0].at), time.Duration(n-1)*time.Second-150*time.Millisecond; span < want {
				t.Errorf("%s: %d requests in %s, want at least %s (rate 1/s)", chat.field, n, span, want)
			}
		}
	}
	// Slack's 429 with Retry-After: 1 put the retry a second later, and
	// the history shows both answers.
	rs := slack.requests()
	if len(rs) < 2 || rs[0].status != http.StatusTooManyRequests {
		t.Fatalf("slack got %v, want a 429 first", rs)
	}
	var slackJob jobRow
	for _, id := range orders {
		for _, j := range c.jobsFor(t, "polar", "msg_"+id) {
			if j.Target == "slack" && j.Attempts == 2 {
				slackJob = j
			}
		}
	}
	out, err := c.caddyCmd(t, "webhook", "show", strconv.FormatInt(slackJob.ID, 10), "--json", "--address", c.AdminAddr)
	if err != nil {
		t.Fatalf("caddy webhook show: %v\n%s", err, out)
	}
	var shown struct {
		History []struct {
			Status int `json:"status"`
		} `json:"history"`
	}
	if err := json.Unmarshal([]byte(out), &shown); err != nil {
		t.Fatal(err)
	}
	var statuses []int
	for _, h := range shown.History {
		statuses = append(statuses, h.Status)
	}
	slices.Sort(statuses)
	if !slices.Equal(statuses, []int{200, 429}) {
		t.Errorf("the slack job's history has statuses %v, want 429 and 200:\n%s", statuses, out)
	}
}

// billingStandIn is the billing app: it records the order of the events it
// is handed per customer, refuses (400) those its refuse says, and tells
// whether two of one customer's events were ever in progress at once.
type billingStandIn struct {
	srv    *httptest.Server
	refuse func(eventID string) bool

	mu       sync.Mutex
	busy     map[string]bool     // customer → a request in progress
	overlaps []string            // customers that had two at once
	order    map[string][]string // customer → event ids delivered (2xx), in order
	auth     []string            // Authorization headers seen
}

func newBillingStandIn(t *testing.T) *billingStandIn {
	t.Helper()
	b := &billingStandIn{refuse: func(string) bool { return false }, busy: map[string]bool{}, order: map[string][]string{}}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			ID   string `json:"id"`
			Data struct {
				Object struct {
					Customer string `json:"customer"`
				} `json:"object"`
			} `json:"data"`
		}
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		cus := ev.Data.Object.Customer
		b.mu.Lock()
		b.auth = append(b.auth, r.Header.Get("Authorization"))
		if b.busy[cus] {
			b.overlaps = append(b.overlaps, cus)
		}
		b.busy[cus] = true
		refuse := b.refuse(ev.ID)
		b.mu.Unlock()
		time.Sleep(50 * time.Millisecond) // the handler's work: a window for a second event to overlap
		b.mu.Lock()
		b.busy[cus] = false
		if !refuse {
			b.order[cus] = append(b.order[cus], ev.ID)
		}
		b.mu.Unlock()
		if refuse {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *billingStandIn) setRefuse(f func(string) bool) {
	b.mu.Lock()
	b.refuse = f
	b.mu.Unlock()
}

func (b *billingStandIn) delivered(cus string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.order[cus])
}

// stripeEvent is a Stripe event of type typ on an object of customer cus
// (https://docs.stripe.com/api/events/object).
func stripeEvent(id, typ, cus string) []byte {
	return fmt.Appendf(nil, `{"id":%q,"object":"event","type":%q,"created":1764000000,"data":{"object":{"id":"obj_%s","customer":%q,"note":%q}}}`,
		id, typ, id, cus, bodyMarker)
}

// testRecipeOrderedSubscriptions: "Subscription events in order per
// customer".
func testRecipeOrderedSubscriptions(t *testing.T) {
	t.Parallel()
	billing := newBillingStandIn(t)
	c := newCaddy(t)
	c.Env = append(c.Env, "APP_INTERNAL_TOKEN=internal-token-1")
	c.start(t, caddyConfig{Site: recipeSite(t, "## Subscription events in order per customer",
		"{env.STRIPE_WEBHOOK_SECRET}", "{env.E2E_STRIPE_SECRET}",
		"http://127.0.0.1:3000/billing/stripe", billing.srv.URL+"/billing/stripe")})
	send := func(id, typ, cus string) {
		t.Helper()
		body := stripeEvent(id, typ, cus)
		if status, resp := post(t, c.URL("/webhook/stripe"), signStripe(stripeSecret, time.Now(), body), body); status != http.StatusAccepted {
			t.Fatalf("POST %s: %d %s", id, status, resp)
		}
	}

	// One customer's events reach the app one at a time, in the order
	// they arrived; other customers' go alongside.
	sequences := map[string][]string{
		"cus_A": {"evt_a1", "evt_a2", "evt_a3", "evt_a4"},
		"cus_B": {"evt_b1", "evt_b2", "evt_b3"},
	}
	types := []string{"customer.subscription.created", "invoice.paid", "customer.subscription.updated", "customer.subscription.deleted"}
	for i := range 4 {
		for _, cus := range []string{"cus_A", "cus_B"} {
			if i < len(sequences[cus]) {
				send(sequences[cus][i], types[i], cus)
			}
		}
	}
	for cus, ids := range sequences {
		testutil.Eventually(t, func() bool { return len(billing.delivered(cus)) == len(ids) },
			func() string { return fmt.Sprintf("%s delivered %v", cus, billing.delivered(cus)) })
		if got := billing.delivered(cus); !slices.Equal(got, ids) {
			t.Errorf("%s delivered in the order %v, want %v", cus, got, ids)
		}
	}

	// A dead event holds its customer's later ones until it is replayed
	// and delivered; other customers go on.
	billing.setRefuse(func(id string) bool { return id == "evt_c1" })
	send("evt_c1", "customer.subscription.created", "cus_C")
	dead := c.waitJobs(t, "stripe", "evt_c1", "dead")
	send("evt_c2", "customer.subscription.updated", "cus_C")
	send("evt_d1", "customer.subscription.created", "cus_D")
	c.waitJobs(t, "stripe", "evt_d1", "done")
	if js := c.jobsFor(t, "stripe", "evt_c2"); len(js) != 1 || js[0].Status != "blocked" {
		t.Errorf("cus_C's next event: %s, want blocked behind the dead one", rowsString(js))
	}
	stats, err := c.caddyCmd(t, "webhook", "stats", "--address", c.AdminAddr)
	if err != nil || !regexp.MustCompile(`(?m)^stripe\s+billing\s+\d+\s+1\s`).MatchString(stats) {
		t.Errorf("caddy webhook stats shows no blocked event (%v):\n%s", err, stats)
	}
	billing.setRefuse(func(string) bool { return false })
	if out, err := c.caddyCmd(t, "webhook", "replay", strconv.FormatInt(dead[0].ID, 10), "--address", c.AdminAddr); err != nil {
		t.Fatalf("caddy webhook replay: %v\n%s", err, out)
	}
	c.waitJobs(t, "stripe", "evt_c2", "done")
	if got := billing.delivered("cus_C"); !slices.Equal(got, []string{"evt_c1", "evt_c2"}) {
		t.Errorf("cus_C delivered %v after the replay, want evt_c1 then evt_c2", got)
	}

	billing.mu.Lock()
	defer billing.mu.Unlock()
	if len(billing.overlaps) > 0 {
		t.Errorf("two events of one customer were in progress at once: %v", billing.overlaps)
	}
	for _, a := range billing.auth {
		if a != "Bearer internal-token-1" {
			t.Errorf("the app got Authorization %q, want the recipe's bearer token", a)
			break
		}
	}
}
