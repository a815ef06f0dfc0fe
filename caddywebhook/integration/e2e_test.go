package integration

// End-to-end tests: a real Caddy built from ./cmd/caddy with the plugin, run
// as a separate process on loopback ports, receiving signed requests over
// real HTTP and delivering them to a recording upstream and a real program.
// The harness is in e2e_*_test.go. Run them alone with
//
//	go test ./caddywebhook/integration/ -run TestE2E -v

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

func TestE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end tests build and run Caddy; skipped with -short")
	}
	t.Run("scenarios", func(t *testing.T) {
		t.Run("deliver", testDeliver)
		t.Run("bad_signature", testBadSignature)
		t.Run("duplicate", testDuplicate)
		t.Run("retry_then_done", testRetryThenDone)
		t.Run("permanent_error_dead", testPermanentDead)
		t.Run("notify_dead", testNotifyDead)
		t.Run("secret_echo", testSecretEcho)
		t.Run("replay", testReplay)
		t.Run("exec", testExec)
		t.Run("reload_during_deliveries", testReloadDuringDeliveries)
		t.Run("stop_slow_upstream", testStopSlowUpstream)
		t.Run("demo_caddyfile", testDemoCaddyfile)
		t.Run("json_config", testJSONConfig)
		t.Run("engine_paths_and_handshakes", testEnginePathsAndHandshakes)
		t.Run("rules_deploy_on_main", testRulesDeployOnMain)
		t.Run("rules_stripe_to_chat", testRulesStripeToChat)
		t.Run("rules_broken_transform", testRulesBrokenTransform)
		t.Run("rules_transform_status", testRulesTransformStatus)
		t.Run("rules_validate", testRulesValidate)
		t.Run("secrets_out_of_access_log", testSecretsOutOfAccessLog)
		t.Run("search_replay", testSearchReplay)
		t.Run("encryption_marker", testEncryptionMarker)
		t.Run("encryption_rotation", testEncryptionRotation)
		t.Run("encryption_postgres", testEncryptionPostgres)
	})
	// After every scenario, including their cleanups, has finished.
	t.Run("log_audit", auditLogs)
}

// receiver renders a webhook_receiver block on path.
func receiver(path, source, scheme, secret string, targets ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\twebhook_receiver %s {\n\t\tsource %s\n\t\tscheme %s\n\t\tsecret %s\n", path, source, scheme, secret)
	for _, t := range targets {
		b.WriteString("\t\t" + strings.ReplaceAll(t, "\n", "\n\t\t") + "\n")
	}
	b.WriteString("\t}\n")
	return b.String()
}

// toHTTP renders a `to http` line with options.
func toHTTP(url string, options ...string) string {
	if len(options) == 0 {
		return "to http " + url
	}
	return "to http " + url + " {\n\t" + strings.Join(options, "\n\t") + "\n}"
}

// githubSite is a site with one GitHub receiver on /hooks/github delivering
// to url.
func githubSite(url string, options ...string) string {
	return receiver("/hooks/github", "github", "github", "{env.E2E_GITHUB_SECRET}", toHTTP(url, options...))
}

// post sends body with header to url and returns the status and body.
func post(t *testing.T, url string, header http.Header, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	req.Header = header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	return resp.StatusCode, b
}

// sendGitHub signs and sends one GitHub event and expects 202.
func sendGitHub(t *testing.T, c *caddyInstance, id, event string) []byte {
	t.Helper()
	body := payload(id, event)
	status, resp := post(t, c.URL("/hooks/github"), signGitHub(githubSecret, id, event, body), body)
	if status != http.StatusAccepted {
		t.Fatalf("POST %s: got %d %q, want 202\n%s", id, status, resp, c.logTail())
	}
	return body
}

// testDeliver: a signed request of each demo scheme gets 202, reaches the
// upstream once with its body and the metadata headers but without its
// signature, and its job ends done.
func testDeliver(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, always(http.StatusOK))
	c := newCaddy(t)
	c.start(t, caddyConfig{Site: githubSite(up.URL("/github"), "events push") +
		receiver("/hooks/stripe", "stripe", "stripe", "{env.E2E_STRIPE_SECRET}", toHTTP(up.URL("/stripe"))) +
		receiver("/hooks/standard", "polar", "standard", "{env.E2E_STANDARD_SECRET}", toHTTP(up.URL("/standard"))) +
		receiver("/hooks/gitlab", "gitlab", "gitlab", "{env.E2E_GITLAB_SECRET}", toHTTP(up.URL("/gitlab")))})

	now := time.Now()
	tests := []struct {
		name       string
		path       string
		source     string
		body       []byte
		header     http.Header
		deliveryID string
		eventType  string
		sigHeader  string // must not be forwarded
		eventHdr   string // the scheme's event header, forwarded if any
	}{
		{
			name: "github push", path: "/hooks/github", source: "github",
			body:   payload("gh-deliver-1", "push"),
			header: signGitHub(githubSecret, "gh-deliver-1", "push", payload("gh-deliver-1", "push")),
			// GitHub's delivery id and event type come from headers.
			deliveryID: "gh-deliver-1", eventType: "push",
			sigHeader: "X-Hub-Signature-256", eventHdr: "X-GitHub-Event",
		},
		{
			name: "stripe payment_intent.succeeded", path: "/hooks/stripe", source: "stripe",
			body:   payload("evt_deliver_1", "payment_intent.succeeded"),
			header: signStripe(stripeSecret, now, payload("evt_deliver_1", "payment_intent.succeeded")),
			// Stripe's come from the verified JSON body.
			deliveryID: "evt_deliver_1", eventType: "payment_intent.succeeded",
			sigHeader: "Stripe-Signature",
		},
		{
			name: "standard order.paid", path: "/hooks/standard", source: "polar",
			body:       payload("body-id-ignored", "order.paid"),
			header:     signStandard(standardSecret, "msg_deliver_1", now, payload("body-id-ignored", "order.paid")),
			deliveryID: "msg_deliver_1", eventType: "order.paid",
			sigHeader: "Webhook-Signature",
		},
		{
			// GitLab's token is the secret itself, so it is the one
			// header that must never be stored, forwarded or logged.
			name: "gitlab Push Hook", path: "/hooks/gitlab", source: "gitlab",
			body:       payload("gl-deliver-1", "push"),
			header:     signGitLab(gitlabSecret, "gl-uuid-1", "Push Hook"),
			deliveryID: "gl-uuid-1", eventType: "Push Hook",
			sigHeader: "X-Gitlab-Token", eventHdr: "X-Gitlab-Event",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, resp := post(t, c.URL(tc.path), tc.header, tc.body)
			if status != http.StatusAccepted {
				t.Fatalf("got %d %q, want 202\n%s", status, resp, c.logTail())
			}
			var key struct{ ID string }
			json.Unmarshal(tc.body, &key)
			got := up.waitAnswered(t, key.ID, http.StatusOK, 1)
			c.waitJobs(t, tc.source, tc.deliveryID, "done")

			ds := up.forKey(key.ID)
			if len(ds) != 1 {
				t.Fatalf("upstream got %d requests, want 1: %s", len(ds), summarize(got))
			}
			d := ds[0]
			if !bytes.Equal(d.Body, tc.body) {
				t.Errorf("upstream body = %q, want %q", d.Body, tc.body)
			}
			wantHeaders := map[string]string{
				"Content-Type":          "application/json",
				"X-Webhook-Delivery-Id": tc.deliveryID,
				"X-Webhook-Source":      tc.source,
				"X-Webhook-Event-Type":  tc.eventType,
				"X-Webhook-Attempt":     "1",
			}
			if tc.eventHdr != "" {
				wantHeaders[tc.eventHdr] = tc.header.Get(tc.eventHdr)
			}
			for name, want := range wantHeaders {
				if got := d.Header.Get(name); got != want {
					t.Errorf("upstream header %s = %q, want %q", name, got, want)
				}
			}
			if v := d.Header.Get(tc.sigHeader); v != "" {
				t.Errorf("upstream got the sender's signature header %s", tc.sigHeader)
			}
			if p := c.storedPayload(t, tc.source, tc.deliveryID); !bytes.Equal(p, tc.body) {
				t.Errorf("stored payload = %q, want the raw body %q", p, tc.body)
			}
			js := c.jobsFor(t, tc.source, tc.deliveryID)
			if len(js) != 1 || js[0].Attempts != 1 || js[0].EventType != tc.eventType {
				t.Errorf("jobs = %s, want one done job, 1 attempt, event type %s", rowsString(js), tc.eventType)
			}
		})
	}

	t.Run("event matching no target is stored without a job", func(t *testing.T) {
		body := payload("gh-deliver-ping", "ping")
		status, _ := post(t, c.URL("/hooks/github"), signGitHub(githubSecret, "gh-deliver-ping", "ping", body), body)
		if status != http.StatusAccepted {
			t.Fatalf("got %d, want 202", status)
		}
		if p := c.storedPayload(t, "github", "gh-deliver-ping"); !bytes.Equal(p, body) {
			t.Errorf("stored payload = %q, want the event stored", p)
		}
		if js := c.jobsFor(t, "github", "gh-deliver-ping"); len(js) != 0 {
			t.Errorf("jobs = %s, want none: the github target takes only push", rowsString(js))
		}
		es := c.waitAccessLog(t, "/hooks/github", 2)
		if e := es[len(es)-1]; e.Outcome != "no_target" || e.DeliveryID != "gh-deliver-ping" || e.Source != "github" {
			t.Errorf("access log: %+v, want outcome no_target for gh-deliver-ping", e)
		}
	})
}

// testBadSignature: requests that fail verification get 401 with an empty
// body and leave nothing in the database; a valid one afterwards is the
// only thing stored and delivered.
func testBadSignature(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, always(http.StatusOK))
	c := newCaddy(t)
	c.start(t, caddyConfig{Site: githubSite(up.URL("/github")) +
		receiver("/hooks/stripe", "stripe", "stripe", "{env.E2E_STRIPE_SECRET}", toHTTP(up.URL("/stripe"))) +
		receiver("/hooks/standard", "polar", "standard", "{env.E2E_STANDARD_SECRET}", toHTTP(up.URL("/standard")))})

	body := payload("bad-1", "push")
	tampered := bytes.Replace(body, []byte("bad-1"), []byte("bad-2"), 1)
	now := time.Now()
	without := func(h http.Header, name string) http.Header {
		h = h.Clone()
		h.Del(name)
		return h
	}
	tests := []struct {
		name    string
		path    string
		header  http.Header
		body    []byte
		outcome string // in the access log
	}{
		{"github/wrong secret", "/hooks/github", signGitHub("not-the-secret", "bad-1", "push", body), body, "bad_signature"},
		{"github/body changed after signing", "/hooks/github", signGitHub(githubSecret, "bad-1", "push", body), tampered, "bad_signature"},
		{"github/no signature header", "/hooks/github", without(signGitHub(githubSecret, "bad-1", "push", body), "X-Hub-Signature-256"), body, "bad_signature"},
		{"github/stripe's header instead", "/hooks/github", signStripe(githubSecret, now, body), body, "bad_signature"},
		{"stripe/wrong secret", "/hooks/stripe", signStripe("whsec_wrong", now, body), body, "bad_signature"},
		{"stripe/timestamp 10 minutes old", "/hooks/stripe", signStripe(stripeSecret, now.Add(-10*time.Minute), body), body, "stale_timestamp"},
		{"stripe/timestamp 10 minutes ahead", "/hooks/stripe", signStripe(stripeSecret, now.Add(10*time.Minute), body), body, "stale_timestamp"},
		{"standard/wrong secret", "/hooks/standard", signStandard("whsec_"+"d3Jvbmcta2V5", "msg_bad_1", now, body), body, "bad_signature"},
		{"standard/timestamp 10 minutes old", "/hooks/standard", signStandard(standardSecret, "msg_bad_1", now.Add(-10*time.Minute), body), body, "stale_timestamp"},
		{"standard/body changed after signing", "/hooks/standard", signStandard(standardSecret, "msg_bad_1", now, body), tampered, "bad_signature"},
	}
	seen := map[string]int{} // requests sent per path
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, resp := post(t, c.URL(tc.path), tc.header, tc.body)
			seen[tc.path]++
			if status != http.StatusUnauthorized || len(resp) != 0 {
				t.Errorf("got %d %q, want 401 with an empty body", status, resp)
			}
			es := c.waitAccessLog(t, tc.path, seen[tc.path])
			if e := es[seen[tc.path]-1]; e.Outcome != tc.outcome || e.Status != http.StatusUnauthorized {
				t.Errorf("access log: %+v, want outcome %s and status 401", e, tc.outcome)
			}
		})
	}
	if n := c.eventCount(t, ""); n != 0 {
		t.Fatalf("database holds %d events after only bad requests, want 0: %s", n, rowsString(c.jobs(t, "")))
	}

	// The same instance accepts and delivers a valid request, so the 401s
	// above were about the signatures, and the counts below can move.
	sendGitHub(t, c, "good-1", "push")
	up.waitAnswered(t, "good-1", http.StatusOK, 1)
	if n := c.eventCount(t, ""); n != 1 {
		t.Errorf("database holds %d events, want only the valid one", n)
	}
	if ds := up.deliveries(); len(ds) != 1 {
		t.Errorf("upstream got %s, want only good-1", summarize(ds))
	}
}

// testDuplicate: the same delivery sent several times, one after another
// and at once, is stored once, answered 202 every time and delivered once.
func testDuplicate(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, always(http.StatusOK))
	c := newCaddy(t)
	c.start(t, caddyConfig{Site: githubSite(up.URL("/github"))})

	tests := []struct {
		name       string
		id         string
		concurrent bool
	}{
		{name: "sequential", id: "dup-seq"},
		{name: "concurrent", id: "dup-par", concurrent: true},
	}
	sent := 0
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := payload(tc.id, "push")
			h := signGitHub(githubSecret, tc.id, "push", body)
			const copies = 5
			statuses := make([]int, copies)
			if tc.concurrent {
				var wg sync.WaitGroup
				for i := range copies {
					wg.Go(func() {
						req, _ := http.NewRequest(http.MethodPost, c.URL("/hooks/github"), bytes.NewReader(body))
						req.Header = h.Clone()
						resp, err := http.DefaultClient.Do(req)
						if err != nil {
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						statuses[i] = resp.StatusCode
					})
				}
				wg.Wait()
			} else {
				for i := range copies {
					statuses[i], _ = post(t, c.URL("/hooks/github"), h, body)
				}
			}
			for i, s := range statuses {
				if s != http.StatusAccepted {
					t.Errorf("copy %d: got %d, want 202 (a duplicate is accepted too)", i, s)
				}
			}
			sent += copies
			var outcomes []string
			for _, e := range c.waitAccessLog(t, "/hooks/github", sent) {
				if e.DeliveryID == tc.id {
					outcomes = append(outcomes, e.Outcome)
				}
			}
			slices.Sort(outcomes)
			if want := []string{"accepted", "duplicate", "duplicate", "duplicate", "duplicate"}; !slices.Equal(outcomes, want) {
				t.Errorf("access log outcomes = %v, want %v", outcomes, want)
			}
			up.waitAnswered(t, tc.id, http.StatusOK, 1)
			js := c.waitJobs(t, "github", tc.id, "done")
			if len(js) != 1 {
				t.Errorf("jobs = %s, want exactly one", rowsString(js))
			}
			if ds := up.forKey(tc.id); len(ds) != 1 {
				t.Errorf("upstream got %d deliveries of %s, want 1", len(ds), tc.id)
			}
		})
	}
	if n := c.eventCount(t, "github"); n != len(tests) {
		t.Errorf("database holds %d events, want %d", n, len(tests))
	}
}

// testRetryThenDone: an upstream that fails with 500 and then answers 200
// gets a second attempt after the backoff, and the job ends done.
func testRetryThenDone(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, sequence(http.StatusInternalServerError, http.StatusServiceUnavailable, http.StatusOK))
	c := newCaddy(t)
	const base = 200 * time.Millisecond
	c.start(t, caddyConfig{
		Webhook: "backoff 200ms 400ms\nmax_attempts 5",
		Site:    githubSite(up.URL("/github")),
	})
	sendGitHub(t, c, "retry-1", "push")
	up.waitAnswered(t, "retry-1", http.StatusOK, 1)
	js := c.waitJobs(t, "github", "retry-1", "done")

	ds := up.forKey("retry-1")
	if len(ds) != 3 {
		t.Fatalf("upstream got %s, want 3 attempts", summarize(ds))
	}
	for i, d := range ds {
		if d.Attempt != strconv.Itoa(i+1) {
			t.Errorf("request %d: X-Webhook-Attempt = %q, want %d", i+1, d.Attempt, i+1)
		}
		if i > 0 {
			// Each wait is between d/2 and d of the backoff curve.
			if gap := d.Start.Sub(ds[i-1].End); gap < base/2 {
				t.Errorf("attempt %d came %s after the previous answer, want at least %s", i+1, gap, base/2)
			}
		}
	}
	if js[0].Attempts != 3 {
		t.Errorf("job = %s, want 3 attempts", js[0])
	}
}

// testPermanentDead: a 400 parks the job as dead after one attempt, with the
// status in its last error, and the metrics count it.
func testPermanentDead(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, always(http.StatusBadRequest))
	c := newCaddy(t)
	c.start(t, caddyConfig{Webhook: "backoff 100ms 200ms", Site: githubSite(up.URL("/github"))})
	sendGitHub(t, c, "dead-1", "push")
	js := c.waitJobs(t, "github", "dead-1", "dead")
	if js[0].Attempts != 1 || !strings.Contains(js[0].LastError, "400") {
		t.Errorf("job = %s, want 1 attempt and the 400 in its last error", js[0])
	}
	if ds := up.forKey("dead-1"); len(ds) != 1 {
		t.Errorf("upstream got %s, want one attempt: a 400 is permanent", summarize(ds))
	}
	// The number an alert on dead jobs watches.
	status, body := c.adminDo(t, http.MethodGet, "/metrics", nil)
	if status != http.StatusOK {
		t.Fatalf("GET /metrics: %d", status)
	}
	if line := metricLine(body, "caddy_webhook_jobs{", `status="dead"`, `source="github"`); !strings.HasSuffix(line, " 1") {
		t.Errorf("metrics: dead github jobs line = %q, want a count of 1", line)
	}
}

// metricLine returns the first line of a Prometheus text exposition that
// starts with prefix and contains every part.
func metricLine(body []byte, prefix string, parts ...string) string {
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return line
		}
	}
	return ""
}

// jobID returns the id of the only job of a delivery.
func jobID(t *testing.T, c *caddyInstance, source, deliveryID string) int64 {
	t.Helper()
	js := c.jobsFor(t, source, deliveryID)
	if len(js) != 1 {
		t.Fatalf("jobs of %s = %s, want one", deliveryID, rowsString(js))
	}
	return js[0].ID
}

// testReplay: dead jobs replayed through the admin API, through `caddy
// webhook replay --id` and `--all-dead` get a fresh attempt budget and are
// delivered.
func testReplay(t *testing.T) {
	t.Parallel()
	// Every event fails with 400 on its first request and succeeds after.
	up := newUpstream(t, sequence(http.StatusBadRequest, http.StatusOK))
	c := newCaddy(t)
	c.start(t, caddyConfig{Webhook: "max_attempts 3", Site: githubSite(up.URL("/github"))})

	tests := []struct {
		name   string
		ids    []string
		replay func(t *testing.T, ids []int64)
	}{
		{
			name: "admin API POST /webhook/jobs/{id}/replay",
			ids:  []string{"replay-api"},
			replay: func(t *testing.T, ids []int64) {
				status, body := c.adminDo(t, http.MethodPost, fmt.Sprintf("/webhook/jobs/%d/replay", ids[0]), nil)
				if status != http.StatusOK {
					t.Fatalf("replay: got %d %s, want 200", status, body)
				}
			},
		},
		{
			name: "caddy webhook replay --id",
			ids:  []string{"replay-cli"},
			replay: func(t *testing.T, ids []int64) {
				out, err := c.caddyCmd(t, "webhook", "replay", "--id", strconv.FormatInt(ids[0], 10), "--address", c.AdminAddr)
				if err != nil {
					t.Fatalf("caddy webhook replay: %v\n%s", err, out)
				}
			},
		},
		{
			name: "caddy webhook replay --all-dead --source github",
			ids:  []string{"replay-all-1", "replay-all-2"},
			replay: func(t *testing.T, _ []int64) {
				out, err := c.caddyCmd(t, "webhook", "replay", "--all-dead", "--source", "github", "--address", c.AdminAddr)
				if err != nil {
					t.Fatalf("caddy webhook replay --all-dead: %v\n%s", err, out)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ids []int64
			for _, id := range tc.ids {
				sendGitHub(t, c, id, "push")
				c.waitJobs(t, "github", id, "dead")
				ids = append(ids, jobID(t, c, "github", id))
			}
			tc.replay(t, ids)
			for _, id := range tc.ids {
				up.waitAnswered(t, id, http.StatusOK, 1)
				js := c.waitJobs(t, "github", id, "done")
				ds := up.forKey(id)
				// A resend is visible as one: numbered on from the dead
				// attempt, and marked by X-Webhook-Replay.
				if len(ds) != 2 || ds[0].Attempt != "1" || ds[0].Header.Get("X-Webhook-Replay") != "" ||
					ds[1].Attempt != "2" || ds[1].Header.Get("X-Webhook-Replay") != "1" {
					t.Errorf("upstream got %s, want attempt 1 (no replay header), then the replayed attempt 2 with X-Webhook-Replay: 1", summarize(ds))
				}
				if js[0].Attempts != 2 {
					t.Errorf("job = %s, want 2 attempts: numbered across the replay", js[0])
				}
			}
		})
	}

	t.Run("admin API stats", func(t *testing.T) {
		status, body := c.adminDo(t, http.MethodGet, "/webhook/stats", nil)
		if status != http.StatusOK {
			t.Fatalf("stats: got %d %s", status, body)
		}
		var st struct {
			Counts []struct {
				Source, Target, Status string
				Jobs                   int64
			}
		}
		if err := json.Unmarshal(body, &st); err != nil {
			t.Fatalf("stats: %v: %s", err, body)
		}
		var done int64
		for _, ct := range st.Counts {
			if ct.Source == "github" && ct.Status == "done" {
				done += ct.Jobs
			}
		}
		if done != 4 {
			t.Errorf("stats count %d done github jobs, want 4: %s", done, body)
		}
	})
}

// recordScript copies testdata/record.sh into dir as an executable, so
// the test does not depend on the mode the file has in a checkout.
func recordScript(t *testing.T, dir string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "record.sh"))
	if err != nil {
		t.Fatalf("read record.sh: %v", err)
	}
	path := filepath.Join(dir, "record.sh")
	if err := os.WriteFile(path, src, 0o755); err != nil {
		t.Fatalf("write record.sh: %v", err)
	}
	return path
}

// testExec: the exec target runs a real program directly with the payload on
// stdin, the metadata in its environment and placeholders that stay one
// argument each; an exit status listed as permanent parks the job.
func testExec(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := recordScript(t, dir)
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	c := newCaddy(t)
	c.start(t, caddyConfig{
		Webhook: "backoff 100ms 200ms",
		Site: receiver("/hooks/github", "github", "github", "{env.E2E_GITHUB_SECRET}",
			fmt.Sprintf("to exec %s %s {webhook.delivery_id} 0 {webhook.event_type} {webhook.source}-{webhook.attempt} {\n\tname record\n\tevents push \"issue comment; touch pwned\"\n\tenv E2E_EXTRA extra-value\n\ttimeout 10s\n}", script, out),
			fmt.Sprintf("to exec %s %s {webhook.delivery_id}-fail 65 {\n\tname failing\n\tevents fail\n\tpermanent_exit_codes 65\n}", script, out)),
	})

	tests := []struct {
		name     string
		id       string
		event    string
		wantArgs []string
	}{
		{name: "push", id: "exec-push", event: "push", wantArgs: []string{"push", "github-1"}},
		{
			// A sender controls the event header; whatever it holds stays
			// one argument and reaches no shell.
			name: "event type with spaces and a semicolon", id: "exec-injection", event: "issue comment; touch pwned",
			wantArgs: []string{"issue comment; touch pwned", "github-1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := sendGitHub(t, c, tc.id, tc.event)
			js := c.waitJobs(t, "github", tc.id, "done")
			if len(js) != 1 || js[0].Target != "record" {
				t.Fatalf("jobs = %s, want one done job for target record", rowsString(js))
			}
			read := func(ext string) string {
				b, err := os.ReadFile(filepath.Join(out, tc.id+"."+ext))
				if err != nil {
					t.Fatalf("the program left no %s: %v", ext, err)
				}
				return string(b)
			}
			if got := read("body"); got != string(body) {
				t.Errorf("stdin = %q, want the payload %q", got, body)
			}
			if got := strings.Split(strings.TrimSuffix(read("args"), "\n"), "\n"); !slices.Equal(got, tc.wantArgs) {
				t.Errorf("args = %q, want %q", got, tc.wantArgs)
			}
			env := strings.Split(read("env"), "\n")
			for _, want := range []string{
				"WEBHOOK_DELIVERY_ID=" + tc.id,
				"WEBHOOK_SOURCE=github",
				"WEBHOOK_EVENT_TYPE=" + tc.event,
				"WEBHOOK_ATTEMPT=1",
				"WEBHOOK_TARGET=record",
				"WEBHOOK_CONTENT_TYPE=application/json",
				fmt.Sprintf("WEBHOOK_JOB_ID=%d", js[0].ID),
				"E2E_EXTRA=extra-value",
			} {
				if !slices.Contains(env, want) {
					t.Errorf("environment lacks %s", want)
				}
			}
			for _, v := range env {
				if strings.HasPrefix(v, "E2E_GITHUB_SECRET=") {
					t.Errorf("the program inherited Caddy's secret variable")
				}
			}
		})
	}
	for _, d := range []string{dir, out, c.dir} {
		if _, err := os.Stat(filepath.Join(d, "pwned")); err == nil {
			t.Errorf("an event type ran a command")
		}
	}

	t.Run("permanent exit code", func(t *testing.T) {
		sendGitHub(t, c, "exec-fail", "fail")
		js := c.waitJobs(t, "github", "exec-fail", "dead")
		if js[0].Target != "failing" || js[0].Attempts != 1 || !strings.Contains(js[0].LastError, "exiting 65") {
			t.Errorf("job = %s, want target failing dead after 1 attempt with the program's output as last error", js[0])
		}
	})
}

// slowScript answers 200 after hold, or gives up when the client does.
func slowScript(hold time.Duration) script {
	return func(r *http.Request, _ string, _ int) int {
		select {
		case <-time.After(hold):
		case <-r.Context().Done():
		}
		return http.StatusOK
	}
}

// testReloadDuringDeliveries: `caddy reload` while deliveries are in flight
// and events keep arriving: every event is accepted, delivered exactly once
// (the old pool's running jobs finish within the grace period and no second
// pool takes a leased job), and no delivery of one event overlaps another.
func testReloadDuringDeliveries(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, slowScript(100*time.Millisecond))
	c := newCaddy(t)
	cfg := func(workers int) caddyConfig {
		return caddyConfig{
			Webhook: fmt.Sprintf("workers %d\nlease 30s\nshutdown_grace 10s", workers),
			Site:    githubSite(up.URL("/github")),
		}
	}
	c.start(t, cfg(4))

	const events = 60
	// A new connection per event, as most senders do: on reload Caddy
	// closes the old server's idle keep-alive connections, and a POST
	// written to one at that moment fails in the client's transport (Go
	// does not resend a POST), before the receiver ever sees it.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		refused  []string
		sentKeys []string
	)
	send := func(from, to int) {
		defer wg.Done()
		for i := from; i < to; i++ {
			id := fmt.Sprintf("reload-%03d", i)
			body := payload(id, "push")
			hdr := signGitHub(githubSecret, id, "push", body)
			// A connection Caddy drops during a reload, before any handler
			// sees it, ends with no answer at all (Caddy does this without
			// the plugin too). Senders resend what got no answer, and the
			// dedupe makes that safe; only an answer other than 202 is a
			// refusal.
			var resp *http.Response
			var err error
			for try := 0; try < 3; try++ {
				req, _ := http.NewRequest(http.MethodPost, c.URL("/hooks/github"), bytes.NewReader(body))
				req.Header = hdr.Clone()
				if resp, err = client.Do(req); err == nil {
					break
				}
			}
			mu.Lock()
			sentKeys = append(sentKeys, id)
			if err != nil {
				refused = append(refused, fmt.Sprintf("%s: no answer after 3 tries: %v", id, err))
			} else {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					refused = append(refused, fmt.Sprintf("%s: %d", id, resp.StatusCode))
				}
			}
			mu.Unlock()
		}
	}
	wg.Add(1)
	go send(0, events/2)
	// Reload once deliveries are running, while the second half arrives.
	up.waitFor(t, "the first deliveries to start", func(ds []delivery) bool { return len(ds) >= 4 })
	wg.Add(1)
	go send(events/2, events)
	c.reload(t, cfg(2))
	up.waitFor(t, "deliveries after the first reload", func(ds []delivery) bool { return len(ds) >= 12 })
	c.reload(t, cfg(6))
	wg.Wait()
	if len(refused) > 0 {
		t.Fatalf("%d events not accepted across reloads: %v", len(refused), refused)
	}

	up.waitFor(t, "every event answered", func(ds []delivery) bool {
		answered := map[string]bool{}
		for _, d := range ds {
			if d.Status == http.StatusOK {
				answered[d.Key] = true
			}
		}
		return len(answered) == events
	})
	testutil.Eventually(t, func() bool {
		for _, j := range c.jobs(t, "github") {
			if j.Status != "done" {
				return false
			}
		}
		return true
	}, func() string { return "every job done: " + rowsString(c.jobs(t, "github")) })

	byKey := map[string][]delivery{}
	for _, d := range up.deliveries() {
		byKey[d.Key] = append(byKey[d.Key], d)
	}
	for _, key := range sentKeys {
		if n := len(byKey[key]); n != 1 {
			t.Errorf("%s delivered %d times, want once: %s", key, n, summarize(byKey[key]))
		}
	}
	for key, ds := range byKey {
		for i := 1; i < len(ds); i++ {
			if ds[i].Start.Before(ds[i-1].End) {
				t.Errorf("%s: two deliveries overlap while a lease holds", key)
			}
		}
	}
	if js := c.jobs(t, "github"); len(js) != events {
		t.Errorf("database holds %d jobs, want %d", len(js), events)
	}
}

// testStopSlowUpstream: SIGTERM or `caddy stop` while a delivery is in
// flight. Within the grace period the delivery finishes and is recorded
// done; past it the delivery is cancelled and handed back without a
// charged attempt, and the next Caddy delivers it.
func testStopSlowUpstream(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		grace string
		// stop stops c; it must return once the stop is under way.
		stop func(t *testing.T, c *caddyInstance)
		// finish lets the upstream answer, or not.
		finish bool
	}{
		{
			name: "caddy stop, finishes within grace", grace: "10s", finish: true,
			stop: func(t *testing.T, c *caddyInstance) {
				// `caddy stop` returns once Caddy has stopped, which
				// needs the upstream to answer first: run it aside.
				cmd := exec.Command(caddyBinary(t), "stop", "--address", c.AdminAddr)
				cmd.Env = c.env()
				if err := cmd.Start(); err != nil {
					t.Fatalf("caddy stop: %v", err)
				}
				t.Cleanup(func() { cmd.Wait() })
			},
		},
		{
			name: "SIGTERM, handed back after grace", grace: "300ms", finish: false,
			stop: func(t *testing.T, c *caddyInstance) { c.signal(t, syscall.SIGTERM) },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			release := make(chan struct{})
			up := newUpstream(t, func(r *http.Request, _ string, n int) int {
				if n > 1 {
					return http.StatusOK
				}
				select {
				case <-release:
				case <-r.Context().Done():
				}
				return http.StatusOK
			})
			c := newCaddy(t)
			cfg := caddyConfig{
				Webhook: "shutdown_grace " + tc.grace,
				Site:    githubSite(up.URL("/github"), "timeout 1m"),
			}
			c.start(t, cfg)
			sendGitHub(t, c, "stop-1", "push")
			up.waitFor(t, "the delivery to start", func(ds []delivery) bool { return len(ds) == 1 })

			tc.stop(t, c)
			// The webhook app's Stop leaves the admin API without a queue
			// (503) before it waits for running deliveries; the admin
			// endpoint itself closes only after every app has stopped.
			// Either way the upstream answers only once the stop is under
			// way.
			testutil.Eventually(t, func() bool {
				resp, err := http.Get(c.AdminURL("/webhook/stats"))
				if err != nil {
					return true
				}
				resp.Body.Close()
				return resp.StatusCode == http.StatusServiceUnavailable
			}, func() string { return "the webhook app to stop\n" + c.logTail() })
			if tc.finish {
				close(release)
			}
			if err := c.wait(t, stopTimeout); err != nil {
				t.Fatalf("caddy exited with %v\n%s", err, c.logTail())
			}

			js := c.jobsFor(t, "github", "stop-1")
			if tc.finish {
				if len(js) != 1 || js[0].Status != "done" || js[0].Attempts != 1 {
					t.Fatalf("after stop: jobs = %s, want done after 1 attempt", rowsString(js))
				}
				if ds := up.forKey("stop-1"); len(ds) != 1 || ds[0].Status != http.StatusOK {
					t.Errorf("upstream got %s, want one answered delivery", summarize(ds))
				}
				return
			}
			if len(js) != 1 || js[0].Status != "pending" || js[0].Attempts != 0 {
				t.Fatalf("after stop: jobs = %s, want pending with no attempt charged", rowsString(js))
			}
			if b, _ := os.ReadFile(c.logPath); !bytes.Contains(b, []byte(`"outcome":"handed_back"`)) {
				t.Errorf("the log does not say the delivery was handed back\n%s", c.logTail())
			}
			c.start(t, cfg)
			up.waitAnswered(t, "stop-1", http.StatusOK, 1)
			js = c.waitJobs(t, "github", "stop-1", "done")
			if js[0].Attempts != 1 {
				t.Errorf("after restart: job = %s, want 1 attempt", js[0])
			}
			if ds := up.forKey("stop-1"); len(ds) != 2 || ds[1].Attempt != "1" {
				t.Errorf("upstream got %s, want the cancelled delivery and one more numbered 1", summarize(ds))
			}
		})
	}
}

// testDemoCaddyfile: Caddyfile.example, moved to free ports and a temporary
// database, accepts the README's three signed events and delivers each to
// its sink site and to examples/demo-handler.sh.
func testDemoCaddyfile(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", "..")) // the module root
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(root, "Caddyfile.example"))
	if err != nil {
		t.Fatalf("read the demo: %v", err)
	}
	const (
		githubDemoSecret   = "demo-github-secret"
		stripeDemoSecret   = "demo-stripe-secret"
		standardDemoSecret = "whsec_ZGVtby1zdGFuZGFyZC1zZWNyZXQ="
	)
	forbidInLogs(kindSecret, githubDemoSecret, stripeDemoSecret, standardDemoSecret)

	c := newCaddy(t)
	c.WorkDir = root // the demo's exec target is ./examples/demo-handler.sh
	recvPort, sinkPort := freePort(t), freePort(t)
	c.HTTPAddr = fmt.Sprintf("127.0.0.1:%d", recvPort)
	text := string(src)
	for _, s := range []string{"secret " + githubDemoSecret, "secret " + stripeDemoSecret, "secret " + standardDemoSecret} {
		if !strings.Contains(text, s) {
			t.Fatalf("Caddyfile.example no longer has %q: update this test and README.md", s)
		}
	}
	for _, r := range []struct{ old, new string }{
		{"admin localhost:2019", "admin " + c.AdminAddr},
		{"storage sqlite ./webhook-demo.db", "storage sqlite " + c.DBPath},
		{"localhost:8080", fmt.Sprintf("localhost:%d", recvPort)},
		{"localhost:9080", fmt.Sprintf("localhost:%d", sinkPort)},
	} {
		if !strings.Contains(text, r.old) {
			t.Fatalf("Caddyfile.example no longer has %q: update this test and README.md", r.old)
		}
		text = strings.ReplaceAll(text, r.old, r.new)
	}
	c.run(t, c.writeCaddyfile(t, text))

	// The README's bodies and ids.
	ghBody := []byte(`{"ref":"refs/heads/main","note":"hello from curl ` + bodyMarker + `"}`)
	stBody := []byte(`{"id":"evt_demo_1","type":"payment_intent.succeeded","data":{"object":{"note":"` + bodyMarker + `"}}}`)
	swBody := []byte(`{"type":"order.paid","data":{"id":"ord_1","note":"` + bodyMarker + `"}}`)
	now := time.Now()
	tests := []struct {
		path, source, deliveryID, event, sink string
		header                                http.Header
		body                                  []byte
	}{
		{"/webhook/github", "github", "demo-1", "push", "/github", signGitHub(githubDemoSecret, "demo-1", "push", ghBody), ghBody},
		{"/webhook/stripe", "stripe", "evt_demo_1", "payment_intent.succeeded", "/stripe", signStripe(stripeDemoSecret, now, stBody), stBody},
		{"/webhook/standard", "standard", "msg_demo_1", "order.paid", "/standard", signStandard(standardDemoSecret, "msg_demo_1", now, swBody), swBody},
	}
	for _, tc := range tests {
		status, resp := post(t, fmt.Sprintf("http://localhost:%d%s", recvPort, tc.path), tc.header, tc.body)
		if status != http.StatusAccepted {
			t.Fatalf("%s: got %d %q, want 202\n%s", tc.path, status, resp, c.logTail())
		}
	}
	events := filepath.Join(c.TmpDir(), "caddywebhook-demo-events.log")
	for _, tc := range tests {
		js := c.waitJobs(t, tc.source, tc.deliveryID, "done")
		if len(js) != 2 {
			t.Errorf("%s: jobs = %s, want the http and the exec target's", tc.source, rowsString(js))
		}
		if e := c.waitAccessLog(t, tc.sink, 1)[0]; e.Status != http.StatusOK {
			t.Errorf("sink %s answered %d, want 200", tc.sink, e.Status)
		}
		b, err := os.ReadFile(events)
		if err != nil {
			t.Fatalf("demo-handler.sh wrote nothing: %v", err)
		}
		want := fmt.Sprintf("source=%s event=%s delivery=%s attempt=1", tc.source, tc.event, tc.deliveryID)
		if !bytes.Contains(b, []byte(want)) || !bytes.Contains(b, tc.body) {
			t.Errorf("demo-handler.sh output lacks %q and the payload:\n%s", want, b)
		}
	}
}

// testJSONConfig: a JSON config with the field names docs/CONFIGURATION.md documents
// runs (Caddy refuses unknown fields), and the fields do what they say.
func testJSONConfig(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, always(http.StatusInternalServerError))
	c := newCaddy(t)
	// A static header is where an upstream's token goes; it must stay out
	// of logs like a secret.
	forbidInLogs(kindSecret, "e2e-token-value")
	cfg := fmt.Sprintf(`{
	"admin": {"listen": %q},
	"apps": {
		"webhook": {
			"storage": {"backend": "sqlite", "path": %q, "synchronous": "normal"},
			"workers": 2,
			"lease": "30s",
			"poll_interval": "500ms",
			"max_attempts": 2,
			"backoff": {"base": "100ms", "max": "200ms"},
			"max_retry_after": "1s",
			"retention": "1h",
			"shutdown_grace": "5s"
		},
		"http": {"servers": {"e2e": {
			"listen": [%q],
			"routes": [{
				"match": [{"path": ["/hooks/github"]}],
				"handle": [{
					"handler": "webhook_receiver",
					"source": "github",
					"scheme": "github",
					"secrets": ["{env.E2E_GITHUB_SECRET}"],
					"tolerance": "5m",
					"max_body": 4096,
					"delivery_id": {"header": "X-GitHub-Delivery"},
					"event_type": {"header": "X-GitHub-Event"},
					"targets": [{
						"name": "app",
						"events": ["push", "release"],
						"deliver": {"kind": "http", "url": %q, "timeout": "5s", "headers": {"X-Token": ["e2e-token-value"]}}
					}]
				}]
			}]
		}}}
	}
}`, c.AdminAddr, c.DBPath, c.HTTPAddr, up.URL("/app"))
	c.run(t, c.writeJSON(t, cfg))

	sendGitHub(t, c, "json-1", "push")
	js := c.waitJobs(t, "github", "json-1", "dead")
	if js[0].Target != "app" || js[0].Attempts != 2 {
		t.Errorf("job = %s, want target app dead after max_attempts 2", js[0])
	}
	ds := up.forKey("json-1")
	if len(ds) != 2 {
		t.Fatalf("upstream got %s, want 2 attempts", summarize(ds))
	}
	if got := ds[0].Header.Get("X-Token"); got != "e2e-token-value" {
		t.Errorf("upstream header X-Token = %q, want the configured header", got)
	}

	big := bytes.Repeat([]byte("x"), 5000)
	status, _ := post(t, c.URL("/hooks/github"), signGitHub(githubSecret, "json-big", "push", big), big)
	if status != http.StatusRequestEntityTooLarge {
		t.Errorf("a 5000-byte body with max_body 4096: got %d, want 413", status)
	}
}
