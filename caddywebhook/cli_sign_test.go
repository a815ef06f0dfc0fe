package caddywebhook

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/signature"
)

// uuidRE matches a version 4 UUID.
var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestCLISignAsSenders: without --id, sign gives the delivery id each
// sender gives, and sends the headers each sender sends; what it prints
// verifies, and the verifier reads the same delivery id.
func TestCLISignAsSenders(t *testing.T) {
	const secret = "It's a Secret to Everybody"
	t.Setenv("TEST_WEBHOOK_SECRET", secret)
	t.Setenv("TEST_WEBHOOK_WHSEC", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	withID := file("with-id.json", `{"id":"evt_given","type":"invoice.paid"}`)
	withoutID := file("without-id.json", `{"type":"invoice.paid"}`)
	tests := []struct {
		name, scheme, env, secret, body string
		// idHeader holds the delivery id; empty: the body's id (Stripe).
		// idQualifier follows it in the receiver's id (Shopify's topic).
		idHeader, idQualifier string
		wantID                *regexp.Regexp
		// wantHeaders must be present (with a value, or any when empty).
		wantHeaders map[string]string
	}{
		// https://docs.github.com/en/webhooks/webhook-events-and-payloads#delivery-headers
		{name: "github/a UUID in X-GitHub-Delivery", scheme: "github", env: "TEST_WEBHOOK_SECRET", secret: secret, body: withID,
			idHeader: "X-Github-Delivery", wantID: uuidRE, wantHeaders: map[string]string{"Content-Type": "application/json"}},
		{name: "gitlab/a UUID in X-Gitlab-Event-UUID", scheme: "gitlab", env: "TEST_WEBHOOK_SECRET", secret: secret, body: withID,
			idHeader: "X-Gitlab-Event-Uuid", wantID: uuidRE},
		// https://www.standardwebhooks.com/ : webhook-id, msg_ ids as Svix sends them.
		{name: "standard/msg_ in webhook-id", scheme: "standard", env: "TEST_WEBHOOK_WHSEC", secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", body: withID,
			idHeader: "Webhook-Id", wantID: regexp.MustCompile(`^msg_[A-Z2-7]+$`)},
		{name: "svix/msg_ in svix-id", scheme: "svix", env: "TEST_WEBHOOK_WHSEC", secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", body: withID,
			idHeader: "Svix-Id", wantID: regexp.MustCompile(`^msg_[A-Z2-7]+$`)},
		// https://docs.stripe.com/api/events/object : an event's id is evt_….
		{name: "stripe/a body without id gets an evt_ id", scheme: "stripe", env: "TEST_WEBHOOK_SECRET", secret: secret, body: withoutID,
			wantID: regexp.MustCompile(`^evt_[A-Z2-7]+$`)},
		{name: "stripe/a body with an id keeps it", scheme: "stripe", env: "TEST_WEBHOOK_SECRET", secret: secret, body: withID,
			wantID: regexp.MustCompile(`^evt_given$`)},
		// https://shopify.dev/docs/api/shopify-app-remix/v4/authenticate/webhook
		{name: "shopify/the headers Shopify always sends", scheme: "shopify", env: "TEST_WEBHOOK_SECRET", secret: secret, body: withID,
			idHeader: "X-Shopify-Event-Id", idQualifier: ":orders/create",
			wantID: regexp.MustCompile(strings.TrimSuffix(uuidRE.String(), "$") + ":orders/create$"), wantHeaders: map[string]string{
				"X-Shopify-Shop-Domain": "example.myshopify.com", "X-Shopify-Api-Version": "", "X-Shopify-Webhook-Id": "",
				"X-Shopify-Topic": "orders/create", "X-Shopify-Triggered-At": "", "X-Shopify-Hmac-Sha256": "",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := runCLI(t, time.Now(), "sign", "--scheme", tt.scheme, "--secret-env", tt.env, "--body", tt.body)
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			head, signedBody, changed := strings.Cut(res.stdout, "\n\n")
			h := http.Header{}
			for line := range strings.Lines(head) {
				name, value, _ := strings.Cut(strings.TrimSpace(line), ": ")
				h.Add(name, value)
			}
			body, err := os.ReadFile(tt.body)
			if err != nil {
				t.Fatal(err)
			}
			if changed {
				body = []byte(strings.TrimSuffix(signedBody, "\n"))
			}
			v, err := signature.New(signature.Config{Scheme: tt.scheme, Secrets: []string{tt.secret}})
			if err != nil {
				t.Fatal(err)
			}
			got, err := v.Verify(signature.Request{Method: http.MethodPost, Header: h, Body: body})
			if err != nil {
				t.Fatalf("printed request does not verify: %v\n%s", err, res.stdout)
			}
			if !tt.wantID.MatchString(got.DeliveryID) {
				t.Errorf("delivery id %q, want %s", got.DeliveryID, tt.wantID)
			}
			if tt.idHeader != "" && h.Get(tt.idHeader)+tt.idQualifier != got.DeliveryID {
				t.Errorf("%s = %q, the verifier read %q", tt.idHeader, h.Get(tt.idHeader), got.DeliveryID)
			}
			for name, want := range tt.wantHeaders {
				if v := h.Get(name); v == "" || (want != "" && v != want) {
					t.Errorf("%s = %q, want %q (any when empty)", name, v, want)
				}
			}
		})
	}
}

// TestCLISignCurl: the printed curl command, run by a shell, posts the
// signed request and prints the answer's status; a form body goes as a
// form.
func TestCLISignCurl(t *testing.T) {
	for _, tool := range []string{"sh", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	t.Setenv("TEST_WEBHOOK_SECRET", "It's a Secret to Everybody")
	dir := t.TempDir()
	form := filepath.Join(dir, "sms.txt")
	if err := os.WriteFile(form, []byte("Body=hi&From=%2B15550001"), 0o600); err != nil {
		t.Fatal(err)
	}
	slashCommand := filepath.Join(dir, "command.txt")
	if err := os.WriteFile(slashCommand, []byte("token=gIkuvaNzQIHg97ATvDxqgjtO&team_id=T0001&command=%2Fweather&text=94070"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, scheme, body string
		status             int
		wantType           string
	}{
		{"github/accepted", "github", "", http.StatusAccepted, "application/json"},
		{"github/refused", "github", "", http.StatusUnauthorized, "application/json"},
		// https://www.twilio.com/docs/usage/webhooks/webhooks-security
		{"twilio/a form body", "twilio", form, http.StatusAccepted, "application/x-www-form-urlencoded"},
		// https://api.slack.com/slash-commands
		{"slack/a slash command", "slack", slashCommand, http.StatusAccepted, "application/x-www-form-urlencoded"},
		{"slack/an Events API body", "slack", "", http.StatusAccepted, "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := make(chan string, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got <- r.Header.Get("Content-Type")
				w.WriteHeader(tt.status)
			}))
			t.Cleanup(srv.Close)
			args := []string{"sign", "--scheme", tt.scheme, "--secret-env", "TEST_WEBHOOK_SECRET", "--url", srv.URL + "/hooks"}
			if tt.body != "" {
				args = append(args, "--body", tt.body)
			}
			res := runCLI(t, time.Now(), args...)
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			cmd := exec.CommandContext(t.Context(), "sh")
			cmd.Stdin = strings.NewReader(res.stdout)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("sh: %v\n%s", err, out)
			}
			if want := "HTTP " + strconv.Itoa(tt.status) + "\n"; string(out) != want {
				t.Errorf("sh printed %q, want %q", out, want)
			}
			if ctype := <-got; ctype != tt.wantType {
				t.Errorf("Content-Type %q, want %q", ctype, tt.wantType)
			}
		})
	}
}
