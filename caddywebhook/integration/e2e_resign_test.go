package integration

// Signed again as the provider signs (the http target's resign), checked by
// the providers' own SDKs: a Node.js app (testdata/sdkcheck/verify.mjs)
// verifies each request with @octokit/webhooks-methods, stripe,
// standardwebhooks, @shopify/shopify-api, @slack/bolt and twilio, as an
// unchanged handler would, configured with the secret of the operator's
// choosing. It needs node and `npm ci` in testdata/sdkcheck (.ci/run does
// both); without them the test is skipped, except under CI=true.

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/signature"
	"github.com/caddywebhook/caddywebhook/signature/samples"
)

// The providers' secrets the receivers check; the apps' secrets are made
// by signature.NewSecret for each run.
const (
	sdkShopifySecret = "e2e-secret-shopify-Hf61Lq"
	sdkSlackSecret   = "e2e-secret-slack-Zp84Wc"
	sdkTwilioSecret  = "e2e-secret-twilio-Ub27Rn"
	sdkPolarSecret   = "e2e-secret-polar-Km03Ty"
)

func init() {
	forbidInLogs(kindSecret, sdkShopifySecret, sdkSlackSecret, sdkTwilioSecret, sdkPolarSecret)
}

// sdkApp is verify.mjs running: its port and the lines it printed.
type sdkApp struct {
	port  int
	mu    sync.Mutex
	lines []sdkLine
}

// sdkLine is what the app's handler saw of one request.
type sdkLine struct {
	Scheme     string `json:"scheme"`
	Attempt    int    `json:"attempt"`
	Delivery   string `json:"delivery"`
	OK         bool   `json:"ok"`
	Error      string `json:"error"`
	ID         string `json:"id"`
	Type       string `json:"type"`
	Hook       string `json:"hook"`
	Domain     string `json:"domain"`
	WebhookID  string `json:"webhookId"`
	APIVersion string `json:"apiVersion"`
	Listening  int    `json:"listening"`
}

// startSDKApp runs verify.mjs with the apps' secrets, or skips the test
// when node or the SDKs are missing (fails under CI=true).
func startSDKApp(t *testing.T, secrets map[string]string) *sdkApp {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "sdkcheck"))
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join(dir, "node_modules", "stripe"))
	if err != nil || modErr != nil {
		msg := fmt.Sprintf("the providers' SDKs need node and `npm ci` in %s (node: %v; SDKs: %v)", dir, err, modErr)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	env, _ := json.Marshal(secrets)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, "verify.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SDKCHECK_SECRETS="+string(env))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the SDK app: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	app := &sdkApp{}
	ready := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var l sdkLine
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			if l.Listening != 0 {
				ready <- l.Listening
				continue
			}
			app.mu.Lock()
			app.lines = append(app.lines, l)
			app.mu.Unlock()
		}
	}()
	app.port = testutil.Receive(t, ready)
	return app
}

func (a *sdkApp) url(scheme string) string {
	return fmt.Sprintf("http://127.0.0.1:%d/%s", a.port, scheme)
}

// seen returns the lines of delivery id, in order.
func (a *sdkApp) seen(delivery string) []sdkLine {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []sdkLine
	for _, l := range a.lines {
		if l.Delivery == delivery {
			out = append(out, l)
		}
	}
	return out
}

func (a *sdkApp) dump() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	b, _ := json.MarshalIndent(a.lines, "", "  ")
	return string(b)
}

// sdkSource is one receiver of the test: the scheme it verifies with the
// provider's secret, the samples it is sent (of sampleScheme), and what it
// needs besides.
type sdkSource struct {
	scheme, sampleScheme string
	providerSecret       string
	options              []string
}

// TestResignSDK: every sample event of GitHub, Stripe, Shopify, Slack,
// Twilio and Polar (and Polar's as plain Standard Webhooks) goes through a
// real Caddy to an http target with resign, and the provider's SDK, given
// the operator's secret, accepts the first attempt and the retry; the
// retry comes more than five minutes after the event was received, past
// every SDK's tolerance for a stale timestamp: the signature's time is the
// attempt's. The retry is made late without waiting: the app answers the
// first attempt 503, the backoff puts the retry an hour away, and while
// Caddy is stopped the test moves the event's and the job's received
// times ten minutes back and the retry to now in the SQLite file (the
// store's clock); Caddy, started again, retries at once. The handler sees
// the provider's headers and ids as the provider sent them.
func TestResignSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs Caddy; skipped with -short")
	}
	sources := []sdkSource{
		{scheme: "github", sampleScheme: "github", providerSecret: githubSecret},
		{scheme: "stripe", sampleScheme: "stripe", providerSecret: stripeSecret},
		{scheme: "standard", sampleScheme: "polar", providerSecret: standardSecret},
		{scheme: "polar", sampleScheme: "polar", providerSecret: sdkPolarSecret},
		{scheme: "shopify", sampleScheme: "shopify", providerSecret: sdkShopifySecret},
		{scheme: "slack", sampleScheme: "slack", providerSecret: sdkSlackSecret,
			options: []string{"event_type json event.type", "delivery_id json event_id"}},
		{scheme: "twilio", sampleScheme: "twilio", providerSecret: sdkTwilioSecret},
	}
	appSecrets := map[string]string{}
	for _, s := range sources {
		secret, err := signature.NewSecret(s.scheme)
		if err != nil {
			t.Fatal(err)
		}
		appSecrets[s.scheme] = secret
		forbidInLogs(kindSecret, secret)
	}
	app := startSDKApp(t, appSecrets)

	c := newCaddy(t)
	var site strings.Builder
	for _, s := range sources {
		env := "E2E_SDK_" + strings.ToUpper(s.scheme)
		c.Env = append(c.Env, env+"_PROVIDER="+s.providerSecret, env+"_APP="+appSecrets[s.scheme])
		site.WriteString(receiver("/hooks/"+s.scheme, "sdk-"+s.scheme, s.scheme, "{env."+env+"_PROVIDER}",
			append(s.options, toHTTP(app.url(s.scheme)+"/webhooks", "resign "+s.scheme+" {env."+env+"_APP}"))...))
	}
	cfg := caddyConfig{Webhook: "backoff 1h 2h\npoll_interval 100ms", Site: site.String()}
	c.start(t, cfg)

	type sent struct {
		source sdkSource
		ev     *samples.Event
	}
	var all []sent
	for _, s := range sources {
		for _, info := range samples.List() {
			if info.Scheme != s.sampleScheme {
				continue
			}
			ev, err := samples.Render(info.Scheme, info.Event, samples.Options{})
			if err != nil {
				t.Fatal(err)
			}
			hookURL := c.URL("/hooks/" + s.scheme)
			body, h, err := signature.SignAsSender(s.scheme, s.providerSecret, ev.Body, signature.SignOptions{
				ID: ev.DeliveryID, EventType: ev.EventType, Timestamp: ev.Time, URL: hookURL, Header: ev.Header})
			if err != nil {
				t.Fatalf("sign %s %s: %v", s.scheme, info.Event, err)
			}
			if status, resp := post(t, hookURL, h, body); status != 202 {
				t.Fatalf("%s %s: %d %s\n%s", s.scheme, info.Event, status, resp, c.logTail())
			}
			all = append(all, sent{source: s, ev: ev})
		}
	}

	// Every first attempt verified and answered 503.
	waitSDKJobs(t, c, len(all), "pending", 1, app)
	c.stop(t)
	rewindDB(t, c, 10*time.Minute)
	c.start(t, cfg)
	waitSDKJobs(t, c, len(all), "done", 2, app)

	for _, s := range all {
		name := s.source.scheme + "/" + s.ev.Name
		t.Run(name, func(t *testing.T) {
			job := sdkJob(t, c, "sdk-"+s.source.scheme, s.ev)
			lines := app.seen(job.DeliveryID)
			if len(lines) != 2 {
				t.Fatalf("the app saw %d requests of %s, want 2:\n%s", len(lines), job.DeliveryID, app.dump())
			}
			for _, l := range lines {
				if !l.OK {
					t.Errorf("attempt %d: the %s SDK refused it: %s", l.Attempt, s.source.scheme, l.Error)
				}
				if l.Type != s.ev.EventType {
					t.Errorf("attempt %d: the handler read event type %q, the provider sent %q", l.Attempt, l.Type, s.ev.EventType)
				}
				if want := s.ev.DeliveryID; want != "" && l.ID != want {
					t.Errorf("attempt %d: the handler read id %q, the provider sent %q", l.Attempt, l.ID, want)
				}
				switch s.source.scheme {
				case "github":
					if l.Hook != s.ev.Header.Get("X-GitHub-Hook-ID") {
						t.Errorf("attempt %d: X-GitHub-Hook-ID %q, the provider sent %q", l.Attempt, l.Hook, s.ev.Header.Get("X-GitHub-Hook-ID"))
					}
				case "shopify":
					if l.Domain != s.ev.Header.Get("X-Shopify-Shop-Domain") || l.WebhookID != s.ev.Header.Get("X-Shopify-Webhook-Id") ||
						l.APIVersion != s.ev.Header.Get("X-Shopify-API-Version") {
						t.Errorf("attempt %d: shop %q, webhook id %q, API version %q; the provider sent %q, %q, %q", l.Attempt, l.Domain, l.WebhookID,
							l.APIVersion, s.ev.Header.Get("X-Shopify-Shop-Domain"), s.ev.Header.Get("X-Shopify-Webhook-Id"), s.ev.Header.Get("X-Shopify-API-Version"))
					}
				}
			}
			if late := job.retryStarted.Sub(job.received); late <= 5*time.Minute {
				t.Errorf("the retry came %s after the event was received, want more than 5m", late)
			}
		})
	}
}

// sdkJobRow is the one job of a sample's event.
type sdkJobRow struct {
	DeliveryID   string
	received     time.Time
	retryStarted time.Time
}

// sdkJob finds the job of ev in source: by the delivery id the receiver
// reads where the provider sends one (Shopify's qualified by the topic),
// else by its payload (stored as sent: Twilio's form).
func sdkJob(t *testing.T, c *caddyInstance, source string, ev *samples.Event) sdkJobRow {
	t.Helper()
	id := ev.DeliveryID
	if ev.Scheme == "shopify" {
		id += ":" + ev.EventType
	}
	var j sdkJobRow
	c.queryDB(t, func(db *sql.DB) error {
		var received, started int64
		err := db.QueryRow(`SELECT e.delivery_id, e.created_at, a.started_at FROM events e JOIN jobs j ON j.event_id = e.id
			JOIN attempts a ON a.job_id = j.id AND a.attempt = 2
			WHERE e.source = ? AND ((? != '' AND e.delivery_id = ?) OR (? = '' AND e.payload = ?))`,
			source, id, id, id, ev.Body).Scan(&j.DeliveryID, &received, &started)
		j.received, j.retryStarted = time.UnixMilli(received), time.UnixMilli(started)
		return err
	})
	return j
}

// waitSDKJobs waits until n jobs of the sdk-* sources are in status after
// attempts attempts.
func waitSDKJobs(t *testing.T, c *caddyInstance, n int, status string, attempts int, app *sdkApp) {
	t.Helper()
	var have int
	testutil.Eventually(t, func() bool {
		c.queryDB(t, func(db *sql.DB) error {
			return db.QueryRow(`SELECT count(*) FROM jobs WHERE source LIKE 'sdk-%' AND status = ? AND attempts = ?`, status, attempts).Scan(&have)
		})
		return have == n
	}, func() string {
		return fmt.Sprintf("%d of %d jobs %s after %d attempts\nthe app saw: %s\n%s", have, n, status, attempts, app.dump(), c.logTail())
	})
}

// rewindDB moves every event's and job's received time back by d and
// makes every pending job due now, in the SQLite file of a stopped Caddy:
// the store's clock, as though the events had waited that long.
func rewindDB(t *testing.T, c *caddyInstance, d time.Duration) {
	t.Helper()
	if c.running() {
		t.Fatal("rewindDB needs Caddy stopped")
	}
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: c.DBPath}).EscapedPath())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ms := d.Milliseconds()
	for _, q := range []string{
		fmt.Sprintf(`UPDATE events SET created_at = created_at - %d`, ms),
		fmt.Sprintf(`UPDATE jobs SET created_at = created_at - %d`, ms),
		fmt.Sprintf(`UPDATE jobs SET run_at = %d WHERE status = 'pending'`, time.Now().UnixMilli()),
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
