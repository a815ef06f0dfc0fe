package caddywebhook

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/caddywebhook/cli"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/signature"
)

func TestCLIOps(t *testing.T) {
	t.Parallel()
	f, d := setupCLI(t)
	bare, err := f.store.Enqueue(t.Context(), queue.Event{Source: "github", DeliveryID: "ping-1", EventType: "ping", Payload: []byte(`{"zen":"x"}`)})
	if err != nil {
		t.Fatal(err)
	}
	f.withConfig(t)
	body := filepath.Join(t.TempDir(), "push.json")
	if err := os.WriteFile(body, []byte(`{"ref":"main"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want []string // substrings of the squeezed output
	}{
		{"events", []string{"events"}, []string{
			"ID | SOURCE | DELIVERY | EVENT | AGE | JOBS",
			"7 | github | ping-1 | ping | 1m30s | none (no target wanted it)",
			"1 | github | d-1 | push | 1m30s | " + strconv.FormatInt(d.githubHTTPDead, 10) + " http dead",
		}},
		{"events without a target", []string{"events", "--has-target", "false"}, []string{"ping-1"}},
		{"events since", []string{"events", "--since", "1m"}, []string{"no events"}},
		{"show by delivery id", []string{"show", "--source", "github", "--delivery", "d-1"}, []string{
			"event 1", "delivery id: | d-1", "ID | TARGET | STATUS | ATTEMPTS", strconv.FormatInt(d.githubHTTPDead, 10) + " | http | dead | 1",
			`{"ref":"refs/heads/main"}`,
		}},
		{"show an event without jobs", []string{"show", "--event", strconv.FormatInt(bare.EventID, 10)}, []string{"none: no target wanted it", "resend --event 7 --target"}},
		{"list by event type", []string{"list", "--event", "invoice.paid"}, []string{"stripe | http | running", "stripe | http | dead"}},
		{"list by delivery id", []string{"list", "--source", "github", "--delivery", "d-2"}, []string{"github | exec | done"}},
		{"resend a done job", []string{"resend", strconv.FormatInt(d.githubExecDone, 10)}, []string{"resent job " + strconv.FormatInt(d.githubExecDone, 10) + ": pending, due now"}},
		{"send an event to a target", []string{"resend", "--event", strconv.FormatInt(bare.EventID, 10), "--target", "http"}, []string{"sent event 7 to target http as job"}},
		{"inject", []string{"send", "github", "--event", "push", "--body", body, "--header", "X-GitHub-Event: push", "--delivery", "demo-1"},
			[]string{"injected event 8 (push, delivery id demo-1) into source github: 2 jobs (http, exec)"}},
		{"inject a duplicate", []string{"send", "github", "--delivery", "demo-1"}, []string{"already has the delivery id demo-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := squeeze(f.cliOK(t, tt.args...))
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
	ev, err := f.store.FindEvent(t.Context(), "github", "demo-1")
	if err != nil || string(ev.Payload) != `{"ref":"main"}` || ev.Headers[len(ev.Headers)-1].Name != adminapi.InjectedHeader {
		t.Errorf("injected event %+v, %v", ev, err)
	}
	if j := f.getJob(t, d.githubExecDone); j.Status != queue.StatusPending {
		t.Errorf("resent job is %s, want pending", j.Status)
	}

	errs := []struct {
		name string
		args []string
		want string
	}{
		{"show with a job id and a delivery id", []string{"show", "3", "--source", "github", "--delivery", "d-1"}, "not both"},
		{"show without anything", []string{"show"}, "show needs a job id"},
		{"show a delivery id without source", []string{"show", "--delivery", "d-1"}, "--delivery needs --source"},
		{"show an unknown delivery id", []string{"show", "--source", "github", "--delivery", "nope"}, `no event of source github has the delivery id "nope"`},
		{"list a delivery id without source", []string{"list", "--delivery", "d-1"}, "invalid --delivery: needs source too"},
		{"resend a pending job", []string{"resend", strconv.FormatInt(d.githubHTTPPending, 10)}, "only done or dead jobs can be resent (HTTP 409)"},
		{"resend without a job", []string{"resend"}, "say what to resend"},
		{"send to a target of another source", []string{"resend", "--event", "1", "--target", "sms"}, "is not a target of source"},
		{"inject into an unknown source", []string{"send", "stripe"}, `source "stripe" is not in the running config`},
		{"inject a bad header", []string{"send", "github", "--header", "nocolon"}, "write it as Name: value"},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			res := f.cli(t, tt.args...)
			if res.code != 1 || !strings.Contains(res.stderr+res.stdout, tt.want) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", res.code, res.stderr, tt.want)
			}
		})
	}
}

func TestCLISign(t *testing.T) {
	t.Setenv("TEST_WEBHOOK_SECRET", "It's a Secret to Everybody")
	body := filepath.Join(t.TempDir(), "push.json")
	payload := []byte(`{"ref":"it's main"}`)
	if err := os.WriteFile(body, payload, 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	t.Run("a signature inside the body", func(t *testing.T) {
		// mailgun signs a token in the body: sign prints the headers, a
		// blank line and the signed body, which verifies.
		mg := filepath.Join(t.TempDir(), "mailgun.json")
		if err := os.WriteFile(mg, []byte(`{"event-data":{"event":"delivered"}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		res := runCLI(t, now, "sign", "--scheme", "mailgun", "--secret-env", "TEST_WEBHOOK_SECRET", "--body", mg)
		if res.code != 0 {
			t.Fatalf("exit %d: %s", res.code, res.stderr)
		}
		head, signed, ok := strings.Cut(res.stdout, "\n\n")
		if !ok {
			t.Fatalf("no blank line between headers and body:\n%s", res.stdout)
		}
		h := http.Header{}
		for line := range strings.Lines(head) {
			name, value, _ := strings.Cut(strings.TrimSpace(line), ": ")
			h.Add(name, value)
		}
		v, err := signature.New(signature.Config{Scheme: "mailgun", Secrets: []string{"It's a Secret to Everybody"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(signature.Request{Method: http.MethodPost, Header: h, Body: []byte(strings.TrimSuffix(signed, "\n"))}); err != nil {
			t.Errorf("the printed body does not verify: %v\n%s", err, res.stdout)
		}
	})
	t.Run("headers verify", func(t *testing.T) {
		t.Setenv("TEST_WEBHOOK_WHSEC", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
		for _, tt := range []struct{ scheme, env, secret string }{
			{"github", "TEST_WEBHOOK_SECRET", "It's a Secret to Everybody"},
			{"stripe", "TEST_WEBHOOK_SECRET", "It's a Secret to Everybody"},
			{"shopify", "TEST_WEBHOOK_SECRET", "It's a Secret to Everybody"},
			{"slack", "TEST_WEBHOOK_SECRET", "It's a Secret to Everybody"},
			{"standard", "TEST_WEBHOOK_WHSEC", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
		} {
			res := runCLI(t, now, "sign", "--scheme", tt.scheme, "--secret-env", tt.env, "--body", body, "--event", "push", "--id", "msg_demo_1")
			if res.code != 0 {
				t.Fatalf("%s: exit %d: %s", tt.scheme, res.code, res.stderr)
			}
			h := http.Header{}
			for line := range strings.Lines(res.stdout) {
				name, value, _ := strings.Cut(strings.TrimSpace(line), ": ")
				h.Add(name, value)
			}
			v, err := signature.New(signature.Config{Scheme: tt.scheme, Secrets: []string{tt.secret}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := v.Verify(signature.Request{Method: http.MethodPost, Header: h, Body: payload}); err != nil {
				t.Errorf("%s: printed headers do not verify: %v\n%s", tt.scheme, err, res.stdout)
			}
		}
	})
	t.Run("curl", func(t *testing.T) {
		res := runCLI(t, now, "sign", "--scheme", "github", "--secret-env", "TEST_WEBHOOK_SECRET", "--body", body, "--url", "https://example.com/hooks/github")
		for _, w := range []string{"--request POST --url 'https://example.com/hooks/github'", "--header 'X-Hub-Signature-256: sha256=", "--data-binary '@" + body + "'"} {
			if res.code != 0 || !strings.Contains(res.stdout, w) {
				t.Errorf("exit %d, output lacks %q:\n%s%s", res.code, w, res.stdout, res.stderr)
			}
		}
		if strings.Contains(res.stdout, "Secret to Everybody") {
			t.Error("the secret is in the output")
		}
	})
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown scheme", []string{"--scheme", "nope", "--secret-env", "TEST_WEBHOOK_SECRET"}, `--scheme "nope" is unknown`},
		{"no secret variable", []string{"--scheme", "github"}, "--secret-env is required"},
		{"empty secret variable", []string{"--scheme", "github", "--secret-env", "TEST_WEBHOOK_UNSET"}, "TEST_WEBHOOK_UNSET is empty or unset"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := runCLI(t, now, append([]string{"sign"}, tt.args...)...)
			if res.code != 1 || !strings.Contains(res.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", res.code, res.stderr, tt.want)
			}
		})
	}
}

func TestCLITail(t *testing.T) {
	f, _ := setupCLI(t)
	initMetrics()
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	root := &cobra.Command{Use: "caddy", SilenceUsage: true, SilenceErrors: true}
	wh := &cobra.Command{Use: "webhook"}
	cli.Build(wh, time.Now)
	root.AddCommand(wh)
	root.SetOut(outW)
	root.SetErr(errW)
	root.SetArgs([]string{"webhook", "tail", "--source", "shop", "--address", f.addr})
	done := make(chan error, 1)
	go func() { done <- root.Execute(); outW.Close(); errW.Close() }()

	// The CLI says it follows once the server has subscribed it.
	if s, err := bufio.NewReader(errR).ReadString('\n'); err != nil || !strings.Contains(s, "following the webhook queue") {
		t.Fatalf("stderr %q, %v", s, err)
	}
	go io.Copy(io.Discard, errR)
	tails.publishReceived(&requestInfo{source: "shop", outcome: outcomeAccepted, status: 202, deliveryID: "d1", eventType: "order.paid"})
	tails.publishReceived(&requestInfo{source: "forge", outcome: outcomeAccepted, status: 202, deliveryID: "d2"})
	obs := &observer{logger: zap.NewNop()}
	obs.JobFinished(&queue.Job{ID: 7, Source: "shop", Target: "mail", DeliveryID: "d1", Attempt: 1},
		queue.Completion{Status: queue.StatusDead, Error: "upstream answered 400", Duration: 12 * time.Millisecond}, true, nil)

	r := bufio.NewReader(outR)
	for _, want := range []string{"received  shop  accepted 202  delivery d1  order.paid", "dead      shop → mail  job 7 attempt 1  12 ms  delivery d1  upstream answered 400"} {
		s, err := r.ReadString('\n')
		if err != nil || !strings.Contains(s, want) {
			t.Errorf("line %q, %v; want %q", s, err, want)
		}
	}
	go io.Copy(io.Discard, outR)
	f.srv.CloseClientConnections()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "closed the stream") {
		t.Errorf("tail ended with %v, want the stream closed", err)
	}
}
