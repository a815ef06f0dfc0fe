package integration

// The sample events through the CLI and a real Caddy: `caddy webhook sign`
// and `caddy webhook send` without --body, for every sample of every
// scheme, and --set reaching a target's filter.

import (
	"cmp"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/signature/samples"
)

// samplesSecret is every sample receiver's secret but Discord's key.
const samplesSecret = "e2e-secret-samples-Wd52Gx"

func init() {
	forbidInLogs(kindSecret, samplesSecret)
}

// sampleReceivers is a receiver per scheme with samples, on
// /hooks/<scheme>, source sample-<scheme>, each with an http target to
// upstream, and for Stripe a second target whose filter takes only large
// amounts due; disc is Discord's public key.
func sampleReceivers(upstream, discordKey string) string {
	var b strings.Builder
	for _, scheme := range samples.Schemes() {
		to := []string{toHTTP(upstream + "/" + scheme)}
		switch scheme {
		case "slack":
			to = append([]string{"event_type json event.type", "delivery_id json event_id"}, to...)
		case "stripe":
			to = append(to, "to http "+upstream+"/large {\n\tname large\n\tfilter get(body, \"data.object.amount_due\", 0) > 100000\n}")
		}
		if scheme == "discord" {
			fmt.Fprintf(&b, "\twebhook_receiver /hooks/discord {\n\t\tsource sample-discord\n\t\tscheme discord\n\t\tpublic_key %s\n\t\t%s\n\t}\n",
				discordKey, to[0])
			continue
		}
		b.WriteString(receiver("/hooks/"+scheme, "sample-"+scheme, scheme, "{env.E2E_SAMPLES_SECRET}", to...))
	}
	return b.String()
}

// TestSamplesCLI: for every sample of every scheme, `caddy webhook sign
// --event` without --body signs a request that the scheme's receiver in a
// real Caddy accepts (202), stored with the sample's event type, and
// `caddy webhook send --event` injects it into the source with the same
// type; --set changes the body the filters see, by either path.
func TestSamplesCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs Caddy; skipped with -short")
	}
	up := newRecordingUpstream(t)
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	c := newCaddy(t)
	c.Env = append(c.Env, "E2E_SAMPLES_SECRET="+samplesSecret, "E2E_SAMPLES_DISCORD_KEY="+hex.EncodeToString(priv.Seed()))
	c.start(t, caddyConfig{Site: sampleReceivers(up.URL(), hex.EncodeToString(pub))})

	for _, info := range samples.List() {
		t.Run(info.Scheme+"/"+info.Event, func(t *testing.T) {
			env := "E2E_SAMPLES_SECRET"
			if info.Scheme == "discord" {
				env = "E2E_SAMPLES_DISCORD_KEY"
			}
			hookURL := c.URL("/hooks/" + info.Scheme)
			out, err := c.caddyCmd(t, "webhook", "sign", "--scheme", info.Scheme, "--secret-env", env, "--event", info.Event,
				"--url", hookURL, "--json")
			if err != nil {
				t.Fatalf("caddy webhook sign: %v\n%s", err, out)
			}
			var signed map[string]string
			if err := json.Unmarshal([]byte(out), &signed); err != nil {
				t.Fatalf("sign --json printed %q: %v", out, err)
			}
			body := signed["body"]
			h := http.Header{}
			for name, v := range signed {
				if name != "body" {
					h.Set(name, v)
				}
			}
			if status, resp := post(t, hookURL, h, []byte(body)); status != http.StatusAccepted && status != http.StatusNoContent {
				t.Fatalf("the receiver answered %d %s\n%s", status, resp, c.logTail())
			}
			source := "sample-" + info.Scheme
			want := sampleEventType(t, info)
			if typ := lastEventType(t, c, source); typ != want {
				t.Errorf("stored event type %q, want %q", typ, want)
			}

			out, err = c.caddyCmd(t, "webhook", "send", source, "--event", info.Event, "--address", c.AdminAddr)
			if err != nil || !strings.Contains(out, "injected event") || !strings.Contains(out, "("+cmp.Or(want, "-")+",") {
				t.Errorf("caddy webhook send: %v\n%s", err, out)
			}
		})
	}

	// --set reaches the filter: the sample's amount due is small; set
	// large, the large target takes it, by sign and by send.
	t.Run("set/filter", func(t *testing.T) {
		hookURL := c.URL("/hooks/stripe")
		before := up.count("/large")
		for _, set := range []string{"", "data.object.amount_due=990000"} {
			args := []string{"webhook", "sign", "--scheme", "stripe", "--secret-env", "E2E_SAMPLES_SECRET", "--event", "invoice.payment_failed",
				"--url", hookURL, "--json"}
			if set != "" {
				args = append(args, "--set", set, "--set", "data.object.customer_email=alice@example.com")
			}
			out, err := c.caddyCmd(t, args...)
			if err != nil {
				t.Fatalf("sign: %v\n%s", err, out)
			}
			var signed map[string]string
			if err := json.Unmarshal([]byte(out), &signed); err != nil {
				t.Fatal(err)
			}
			h := http.Header{}
			for name, v := range signed {
				if name != "body" {
					h.Set(name, v)
				}
			}
			if status, _ := post(t, hookURL, h, []byte(signed["body"])); status != http.StatusAccepted {
				t.Fatalf("status %d", status)
			}
		}
		out, err := c.caddyCmd(t, "webhook", "send", "sample-stripe", "--event", "invoice.payment_failed",
			"--set", "data.object.amount_due=250000", "--address", c.AdminAddr)
		if err != nil || !strings.Contains(out, "2 jobs (http, large)") {
			t.Errorf("send --set: %v\n%s", err, out)
		}
		out, err = c.caddyCmd(t, "webhook", "send", "sample-stripe", "--event", "invoice.payment_failed", "--address", c.AdminAddr)
		if err != nil || !strings.Contains(out, "1 job (http)") {
			t.Errorf("send without --set: %v\n%s", err, out)
		}
		testutil.Eventually(t, func() bool { return up.count("/large")-before == 2 }, func() string {
			return fmt.Sprintf("the large target got %d requests, want 2 (one signed, one sent, both with --set)", up.count("/large")-before)
		})
		up.mu.Lock()
		defer up.mu.Unlock()
		var emails int
		for _, r := range up.reqs {
			if r.path == "/large" && strings.Contains(string(r.body), `"customer_email":"alice@example.com"`) {
				emails++
			}
		}
		if emails != 1 {
			t.Errorf("%d deliveries to large carry the email --set gave, want 1", emails)
		}
	})

	t.Run("list", func(t *testing.T) {
		out, err := c.caddyCmd(t, "webhook", "sign", "--list", "--scheme", "stripe")
		if err != nil || !strings.Contains(out, "checkout.session.completed") || strings.Contains(out, "github") {
			t.Errorf("sign --list --scheme stripe: %v\n%s", err, out)
		}
		out, err = c.caddyCmd(t, "webhook", "send", "--list")
		if err != nil || !strings.Contains(out, "orders/paid") || !strings.Contains(out, "incoming-sms") {
			t.Errorf("send --list: %v\n%s", err, out)
		}
		out, err = c.caddyCmd(t, "webhook", "send", "sample-github", "--event", "issues", "--address", c.AdminAddr)
		if err == nil || !strings.Contains(out, `no github sample of event "issues": there are ping, pull_request, push, release, workflow_run`) {
			t.Errorf("send of an event without a sample: %v\n%s", err, out)
		}
	})
}

// sampleEventType is the event type the receiver stores for a sample:
// the sample's, which the provider carries (Twilio none).
func sampleEventType(t *testing.T, info samples.Info) string {
	t.Helper()
	ev, err := samples.Render(info.Scheme, info.Event, samples.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ev.EventType
}

// lastEventType returns the event type of source's latest event (the
// payload may be stored redacted: Slack's verification token).
func lastEventType(t *testing.T, c *caddyInstance, source string) string {
	t.Helper()
	var typ string
	c.queryDB(t, func(db *sql.DB) error {
		return db.QueryRow(`SELECT event_type FROM events WHERE source = ? ORDER BY id DESC LIMIT 1`, source).Scan(&typ)
	})
	return typ
}

// recordingUpstream answers 200 and keeps each request's path and body.
type recordingUpstream struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []recordedRequest
}

type recordedRequest struct {
	path string
	body []byte
}

func newRecordingUpstream(t *testing.T) *recordingUpstream {
	t.Helper()
	u := &recordingUpstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.reqs = append(u.reqs, recordedRequest{path: r.URL.Path, body: b})
		u.mu.Unlock()
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *recordingUpstream) URL() string { return u.srv.URL }

// count returns how many requests came to path.
func (u *recordingUpstream) count(path string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, r := range u.reqs {
		if r.path == path {
			n++
		}
	}
	return n
}
