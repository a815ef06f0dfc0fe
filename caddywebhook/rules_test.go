package caddywebhook

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/notify"
	"github.com/caddywebhook/caddywebhook/caddywebhook/rules"
	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/signature"
)

// sinkRequest is one request a sink received.
type sinkRequest struct {
	header http.Header
	body   []byte
}

// newSink is an upstream that records each request, headers and body, and
// answers status.
func newSink(t *testing.T, answer func(r *http.Request, body []byte) int) (string, chan sinkRequest) {
	t.Helper()
	got := make(chan sinkRequest, 64)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- sinkRequest{header: r.Header.Clone(), body: b}
		w.WriteHeader(answer(r, b))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/sink", got
}

// counterValue reads a counter.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func answer204(*http.Request, []byte) int { return http.StatusNoContent }

// jobTargets returns the sorted targets of the jobs of the event with
// deliveryID.
func jobTargets(t *testing.T, s queue.Store, deliveryID string) []string {
	t.Helper()
	var out []string
	for _, j := range jobs(t, s) {
		if j.DeliveryID == deliveryID {
			out = append(out, j.Target)
		}
	}
	slices.Sort(out)
	return out
}

func TestFilterDecidesTheJobs(t *testing.T) {
	h := newHarness(t)
	main := httpTarget("main", "http://127.0.0.1:9/")
	main["filter"] = `body.ref == "refs/heads/main"`
	tagged := httpTarget("tagged", "http://127.0.0.1:9/", "push")
	tagged["filter"] = `has(body.ref) && headers["x-github-event"] == "push" && source == "rules-gh" && delivery_id.startsWith("d-")`
	h.load(t, map[string]any{"workers": 0}, githubReceiver("rules-gh", main, tagged, httpTarget("everything", "http://127.0.0.1:9/")))

	tests := []struct {
		name    string
		id      string
		event   string
		body    string
		outcome string
		want    []string
	}{
		{name: "push to main", id: "d-main", event: "push", body: `{"ref":"refs/heads/main"}`, outcome: "accepted", want: []string{"everything", "main", "tagged"}},
		{name: "push to dev", id: "d-dev", event: "push", body: `{"ref":"refs/heads/dev"}`, outcome: "accepted", want: []string{"everything", "tagged"}},
		{name: "events and filter combine", id: "d-release", event: "release", body: `{"ref":"refs/heads/main"}`, outcome: "accepted", want: []string{"everything", "main"}},
		{name: "missing field is not taken", id: "d-noref", event: "push", body: `{"n":1}`, outcome: "accepted", want: []string{"everything"}},
		{name: "not JSON", id: "d-form", event: "push", body: `payload=1`, outcome: "accepted", want: []string{"everything"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.body)
			r := h.do(t, http.MethodPost, "/hooks/rules-gh", signed(t, testSecret, tt.id, tt.event, body), bytes.NewReader(body))
			if r.status != http.StatusAccepted || r.header.Get("Echo-Outcome") != tt.outcome {
				t.Fatalf("status %d outcome %q, want 202 %s", r.status, r.header.Get("Echo-Outcome"), tt.outcome)
			}
			if got := jobTargets(t, h.store(t), tt.id); !slices.Equal(got, tt.want) {
				t.Errorf("jobs for %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFilterNoTarget(t *testing.T) {
	h := newHarness(t)
	only := httpTarget("only", "http://127.0.0.1:9/")
	only["filter"] = `body.ref == "refs/heads/main"`
	h.load(t, map[string]any{"workers": 0}, githubReceiver("rules-nt", only))
	body := []byte(`{"ref":"refs/heads/dev","marker":"` + testBodyMarker + `"}`)
	r := h.do(t, http.MethodPost, "/hooks/rules-nt", signed(t, testSecret, "d-1", "push", body), bytes.NewReader(body))
	if r.status != http.StatusAccepted || r.header.Get("Echo-Outcome") != "no_target" {
		t.Fatalf("status %d outcome %q, want 202 no_target", r.status, r.header.Get("Echo-Outcome"))
	}
	if _, err := h.store(t).FindEvent(context.Background(), "rules-nt", "d-1"); err != nil {
		t.Fatalf("find the event: %v; want it stored", err)
	}
	if got := jobTargets(t, h.store(t), "d-1"); len(got) != 0 {
		t.Errorf("jobs for %v, want none", got)
	}
}

func TestFilterErrorsLoggedOnceAndCounted(t *testing.T) {
	h := newHarness(t)
	strict := httpTarget("strict", "http://127.0.0.1:9/")
	strict["filter"] = `int(body.marker) > 3`
	h.load(t, map[string]any{"workers": 0}, githubReceiver("rules-err", strict))
	before := counterValue(t, filterErrorCounter("rules-err", "strict"))
	for i, id := range []string{"e-1", "e-2", "e-3"} {
		if got := h.post(t, "rules-err", id, "push", testBody(i)); got != http.StatusAccepted {
			t.Fatalf("status %d", got)
		}
	}
	if got := counterValue(t, filterErrorCounter("rules-err", "strict")) - before; got != 3 {
		t.Errorf("filter errors counted %v, want 3", got)
	}
	lines := h.logs(t)
	n := 0
	for _, m := range lines {
		if m["msg"] == "filter failed; the target does not take the event" {
			n++
			if m["source"] != "rules-err" || m["target"] != "strict" || !strings.Contains(m["error"].(string), "type conversion error") {
				t.Errorf("log line %v: want source, target and the error", m)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d filter-failed lines, want 1 (once per minute for the same error)", n)
	}
	assertNoCanaries(t, h.rawLogs(t))
}

func TestTransformAtDelivery(t *testing.T) {
	h := newHarness(t)
	url, got := newSink(t, answer204)
	const signSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	slack := httpTarget("slack", url)
	slack["deliver"].(map[string]any)["sign_secret"] = signSecret
	slack["transform"] = map[string]any{
		"body":           `{"text": "push to " + body.ref + " by " + get(body, "pusher.name", "someone")}`,
		"headers":        map[string]string{"X-Ref": `body.ref`},
		"remove_headers": []string{"X-GitHub-Event"},
	}
	h.load(t, map[string]any{"workers": 1}, githubReceiver("rules-tr", slack))
	body := []byte(`{"ref":"refs/heads/main","pusher":{"name":"octocat"}}`)
	if st := h.post(t, "rules-tr", "t-1", "push", body); st != http.StatusAccepted {
		t.Fatalf("status %d", st)
	}
	r := testutil.Receive(t, got)
	if want := `{"text":"push to refs/heads/main by octocat"}`; string(r.body) != want {
		t.Errorf("body %s, want %s", r.body, want)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if r.header.Get("X-Ref") != "refs/heads/main" || r.header.Get("X-GitHub-Event") != "" {
		t.Errorf("headers %v: want X-Ref set and X-GitHub-Event removed", r.header)
	}
	if r.header.Get("X-Webhook-Delivery-Id") != "t-1" {
		t.Errorf("metadata headers lost: %v", r.header)
	}
	// sign signs the bytes sent, not the stored ones.
	v, err := signature.New(signature.Config{Scheme: signature.SchemeStandard, Secrets: []string{signSecret}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(signature.Request{Method: http.MethodPost, Header: r.header, Body: r.body}); err != nil {
		t.Errorf("the transformed request does not verify: %v", err)
	}
	// The stored event is the sender's bytes.
	js := jobs(t, h.store(t))
	d := waitStatus(t, h.store(t), js[0].ID, queue.StatusDone)
	if !bytes.Equal(d.Payload, body) {
		t.Errorf("stored payload %s, want the original", d.Payload)
	}
}

func TestTransformErrorIsPermanent(t *testing.T) {
	h := newHarness(t)
	url, got := newSink(t, answer204)
	tgt := httpTarget("sink", url)
	tgt["transform"] = map[string]any{"body": `{"text": body.data.object.id}`}
	h.load(t, map[string]any{"workers": 1}, githubReceiver("rules-dead", tgt))
	if st := h.post(t, "rules-dead", "x-1", "push", testBody(1)); st != http.StatusAccepted {
		t.Fatalf("status %d", st)
	}
	js := jobs(t, h.store(t))
	d := waitStatus(t, h.store(t), js[0].ID, queue.StatusDead)
	if !strings.Contains(d.LastError, "transform body: no such key: data") || d.Attempts != 1 {
		t.Errorf("last_error %q after %d attempts; want the transform's error at once", d.LastError, d.Attempts)
	}
	select {
	case r := <-got:
		t.Errorf("the sink got %s", r.body)
	default:
	}
}

func TestTransformExecStdin(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "stdin")
	tgt := map[string]any{
		"name": "deploy",
		// cp copies its stdin to the file: a real program, no shell.
		"deliver":   map[string]any{"kind": "exec", "command": "/bin/cp", "args": []string{"/dev/stdin", out}, "timeout": "10s"},
		"transform": map[string]any{"body": `body.ref.split("/")[2] + "\n"`},
	}
	h.load(t, map[string]any{"workers": 1}, githubReceiver("rules-exec", tgt))
	if st := h.post(t, "rules-exec", "x-1", "push", []byte(`{"ref":"refs/heads/main"}`)); st != http.StatusAccepted {
		t.Fatalf("status %d", st)
	}
	waitStatus(t, h.store(t), jobs(t, h.store(t))[0].ID, queue.StatusDone)
	b, err := os.ReadFile(out)
	if err != nil || string(b) != "main\n" {
		t.Errorf("stdin %q, %v; want the transformed body", b, err)
	}
}

func TestRulesConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		tgt  func(map[string]any)
		want []string
	}{
		{name: "filter syntax", tgt: func(m map[string]any) { m["filter"] = `body.ref == "x` },
			want: []string{`webhook_receiver "rules-cfg"`, `target "t"`, "filter: line 1, column 13: Syntax error"}},
		{name: "filter undeclared", tgt: func(m map[string]any) { m["filter"] = `bdy.ref == "x"` },
			want: []string{`target "t"`, "filter: line 1, column 1: undeclared reference to 'bdy'"}},
		{name: "filter not bool", tgt: func(m map[string]any) { m["filter"] = `body.ref + "x"` },
			want: []string{`target "t"`, "filter", "yields string; want bool"}},
		{name: "transform body", tgt: func(m map[string]any) { m["transform"] = map[string]any{"body": `{"text": }`} },
			want: []string{`target "t"`, "transform: body: line 1, column 10: Syntax error"}},
		{name: "transform host", tgt: func(m map[string]any) { m["transform"] = map[string]any{"headers": map[string]string{"Host": `"x"`}} },
			want: []string{`target "t"`, "transform: header Host: header Host is set by the transport"}},
		{name: "transform x-webhook", tgt: func(m map[string]any) {
			m["transform"] = map[string]any{"remove_headers": []string{"X-Webhook-Attempt"}}
		},
			want: []string{`target "t"`, "transform: remove_header X-Webhook-Attempt", "reserved"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			tgt := httpTarget("t", "http://127.0.0.1:9/")
			tt.tgt(tgt)
			err := h.loadErr(t, map[string]any{"workers": 0}, githubReceiver("rules-cfg", tgt))
			if err == nil {
				t.Fatal("config loaded; want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			// caddy validate provisions the same config, so it says the same.
			raw, _ := json.Marshal(map[string]any{"apps": map[string]any{
				"webhook": map[string]any{"storage": map[string]any{"path": filepath.Join(t.TempDir(), "v.db")}},
				"http": map[string]any{"servers": map[string]any{"s": map[string]any{
					"listen": []string{"127.0.0.1:0"}, "routes": []any{map[string]any{"handle": []any{githubReceiver("rules-cfg", tgt)}}},
				}}},
			}})
			var cfg caddy.Config
			if err := json.Unmarshal(raw, &cfg); err != nil {
				t.Fatal(err)
			}
			if err := caddy.Validate(&cfg); err == nil || !strings.Contains(err.Error(), tt.want[len(tt.want)-1]) {
				t.Errorf("caddy validate: %v; want %q", err, tt.want[len(tt.want)-1])
			}
		})
	}
}

func TestRulesCaddyfileErrors(t *testing.T) {
	const site = ":8080 {\n\twebhook_receiver {\n\t\tsource gh\n\t\tscheme github\n\t\tsecret s\n%s\n\t}\n}\n"
	receiver := func(body string) string { return strings.Replace(site, "%s", body, 1) }
	tests := []struct {
		name, input string
		want        []string
	}{
		{"filter syntax", receiver("\t\tto http http://127.0.0.1:9/ {\n\t\t\tname deploy\n\t\t\tfilter body.ref == \n\t\t}"),
			[]string{"Caddyfile:8", `webhook_receiver "gh": target "deploy": filter: line 1, column 12: Syntax error`}},
		{"filter default target name", receiver("\t\tto http http://127.0.0.1:9/\n\t\tto http http://127.0.0.1:9/ {\n\t\t\tfilter bdy.x\n\t\t}"),
			[]string{"Caddyfile:8", `target "http-2": filter: line 1, column 1: undeclared reference to 'bdy'`}},
		{"second filter line", receiver("\t\tto exec /bin/true {\n\t\t\tfilter true\n\t\t\tfilter `body.a ==`\n\t\t}"),
			[]string{"Caddyfile:8", `target "exec": filter: line 1, column 10`}},
		{"filter empty", receiver("\t\tto http http://127.0.0.1:9/ {\n\t\t\tfilter\n\t\t}"),
			[]string{"to http: filter needs a CEL expression"}},
		{"transform body", receiver("\t\tto http http://127.0.0.1:9/ {\n\t\t\ttransform {\n\t\t\t\tbody `{\"text\": body.}`\n\t\t\t}\n\t\t}"),
			[]string{"Caddyfile:8", `target "http": transform: body: line 1, column 15: Syntax error`}},
		{"transform header refused", receiver("\t\tto http http://127.0.0.1:9/ {\n\t\t\ttransform {\n\t\t\t\theader Content-Length `\"3\"`\n\t\t\t}\n\t\t}"),
			[]string{"Caddyfile:8", "transform: header Content-Length: header Content-Length is set by the transport"}},
		{"transform remove hop-by-hop", receiver("\t\tto http http://127.0.0.1:9/ {\n\t\t\ttransform {\n\t\t\t\tremove_header Upgrade\n\t\t\t}\n\t\t}"),
			[]string{"transform: remove_header Upgrade: header Upgrade is hop-by-hop"}},
		{"transform unknown option", receiver("\t\tto http http://127.0.0.1:9/ {\n\t\t\ttransform {\n\t\t\t\tbdy x\n\t\t\t}\n\t\t}"),
			[]string{"to http: transform", `unknown option "bdy"`}},
		{"transform empty", receiver("\t\tto http http://127.0.0.1:9/ {\n\t\t\ttransform {\n\t\t\t}\n\t\t}"),
			[]string{"to http: transform: the block is empty"}},
		{"notify transform", "{\n\twebhook {\n\t\tnotify http http://127.0.0.1:9/ {\n\t\t\ttransform {\n\t\t\t\tbody nope.text\n\t\t\t}\n\t\t}\n\t}\n}\n:8080 {\n\trespond ok\n}\n",
			[]string{"Caddyfile:5", "webhook: notify: transform: body: line 1, column 1: undeclared reference to 'nope'"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := adapt(t, tt.input)
			if err == nil {
				t.Fatalf("adapt succeeded; want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// The notify forms docs/RULES.md shows for a Slack and a Discord incoming
// webhook. Slack refuses a body without a string `text` (400
// invalid_payload, https://api.slack.com/messaging/webhooks#handling_errors);
// Discord one without `content` (or an embed).
const (
	slackNotifyForm = "notify http {env.SLACK_WEBHOOK_URL} {\n" +
		"\ttransform {\n" +
		"\t\tbody `{\"text\": body.type + \" on \" + body.source + \"/\" + body.target + \" (\" + string(int(body.count)) + \"×): \" + get(body, \"last_error\", \"\")}`\n" +
		"\t}\n" +
		"}"
	discordNotifyForm = "notify http {env.DISCORD_WEBHOOK_URL} {\n" +
		"\ttransform {\n" +
		"\t\tbody `{\"content\": body.type + \" on \" + body.source + \"/\" + body.target + \" (\" + string(int(body.count)) + \"×): \" + get(body, \"last_error\", \"\")}`\n" +
		"\t}\n" +
		"}"
)

// chatSink answers as Slack's incoming webhooks do: 400 invalid_payload
// unless the JSON body has a string field.
func chatSink(field string) func(*http.Request, []byte) int {
	return func(_ *http.Request, body []byte) int {
		var m map[string]any
		if json.Unmarshal(body, &m) != nil {
			return http.StatusBadRequest
		}
		if _, ok := m[field].(string); !ok {
			return http.StatusBadRequest
		}
		return http.StatusOK
	}
}

func TestNotifyChatForms(t *testing.T) {
	doc, err := os.ReadFile("../docs/RULES.md")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, form, env, field string
	}{
		{name: "slack", form: slackNotifyForm, env: "SLACK_WEBHOOK_URL", field: "text"},
		{name: "discord", form: discordNotifyForm, env: "DISCORD_WEBHOOK_URL", field: "content"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !bytes.Contains(doc, []byte(tt.form)) {
				t.Fatalf("docs/RULES.md does not show the %s form:\n%s", tt.name, tt.form)
			}
			// The form without its transform is what a chat refuses.
			if st := chatSink(tt.field)(nil, []byte(`{"type":"job.dead"}`)); st != http.StatusBadRequest {
				t.Fatalf("the sink answers a bare notice %d", st)
			}
			url, got := newSink(t, chatSink(tt.field))
			t.Setenv(tt.env, url)
			cfg, err := adapt(t, "{\n\twebhook {\n"+tt.form+"\n\t}\n}\n:8080 {\n\trespond ok\n}\n")
			if err != nil {
				t.Fatalf("adapt the %s form: %v", tt.name, err)
			}
			var parsed struct {
				Apps struct {
					Webhook struct {
						Notify map[string]any `json:"notify"`
					} `json:"webhook"`
				} `json:"apps"`
			}
			if err := json.Unmarshal(cfg, &parsed); err != nil {
				t.Fatal(err)
			}
			notifyCfg := parsed.Apps.Webhook.Notify
			notifyCfg["window"] = "10ms"

			h := newHarness(t)
			failing, _ := newSink(t, func(*http.Request, []byte) int { return http.StatusNotFound })
			h.load(t, map[string]any{"workers": 2, "notify": notifyCfg}, githubReceiver("rules-notify", httpTarget("api", failing)))
			if st := h.post(t, "rules-notify", "n-1", "push", testBody(1)); st != http.StatusAccepted {
				t.Fatalf("status %d", st)
			}
			r := testutil.Receive(t, got)
			var m map[string]any
			if err := json.Unmarshal(r.body, &m); err != nil || len(m) != 1 {
				t.Fatalf("the chat got %s (%v); want exactly {%q: …}", r.body, err, tt.field)
			}
			want := "job.dead on rules-notify/api (1×): upstream answered 404"
			if s, _ := m[tt.field].(string); !strings.HasPrefix(s, want) {
				t.Errorf("%s = %q, want it to start %q", tt.field, s, want)
			}
			// The chat answered 200: the notice's job is done.
			testutil.Eventually(t, func() bool {
				for _, j := range jobs(t, h.store(t)) {
					if j.Source == notify.Source && j.Status == queue.StatusDone {
						return true
					}
				}
				return false
			}, func() string { return "the notice's job is not done" })
		})
	}
}

func TestRulesTestEndpointAndCLI(t *testing.T) {
	h := newHarness(t)
	deploy := httpTarget("deploy", "http://127.0.0.1:9/")
	deploy["filter"] = `body.ref == "refs/heads/main"`
	deploy["transform"] = map[string]any{"body": `{"text": "push to " + body.ref}`, "headers": map[string]string{"X-Ref": `body.ref`}}
	typed := httpTarget("typed", "http://127.0.0.1:9/")
	typed["filter"] = `body.ref == 1` // an int against a string field: loads, and never matches
	h.load(t, map[string]any{"workers": 0}, githubReceiver("rules-api", deploy, httpTarget("plain", "http://127.0.0.1:9/"), typed))
	for id, ref := range map[string]string{"r-main": "refs/heads/main", "r-dev": "refs/heads/dev"} {
		if st := h.post(t, "rules-api", id, "push", []byte(`{"ref":"`+ref+`"}`)); st != http.StatusAccepted {
			t.Fatalf("status %d", st)
		}
	}
	var mainJob int64
	for _, j := range jobs(t, h.store(t)) {
		if j.DeliveryID == "r-main" && j.Target == "deploy" {
			mainJob = j.ID
		}
	}
	dev, err := h.store(t).FindEvent(t.Context(), "rules-api", "r-dev")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptestServer(t, adminMux(new(adminAPI)))
	body := filepath.Join(t.TempDir(), "push.json")
	if err := os.WriteFile(body, []byte(`{"after":"abc"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"a job the filter took", []string{"--job", itoa(mainJob)}, []string{
			"target deploy of source rules-api takes the event: its filter is true",
			`filter: body.ref == "refs/heads/main"`,
			"POST\nX-GitHub-Event: push\nX-GitHub-Delivery: r-main\nContent-Type: application/json\nX-Ref: refs/heads/main\n\n{\"text\":\"push to refs/heads/main\"}\n",
		}},
		{"an event the filter does not take", []string{"--source", "rules-api", "--target", "deploy", "--event", itoa(dev.ID)}, []string{
			"does not take the event: the filter is false", `{"text":"push to refs/heads/dev"}`,
		}},
		{"a body of my own", []string{"--source", "rules-api", "--target", "deploy", "--body", body, "--header", "X-GitHub-Event: push", "--event-type", "push"}, []string{
			"does not take the event: the filter failed", "filter error: no such key: ref",
			"transform error (the job would go dead): transform body: no such key: ref",
		}},
		{"a filter comparing a string with an int", []string{"--source", "rules-api", "--target", "typed", "--event", itoa(dev.ID)}, []string{
			"does not take the event: the filter is false",
			"filter note: line 1, column 10: compared a string with an int: values of different types are never equal, so this is always false",
		}},
		{"a target without rules", []string{"--source", "rules-api", "--target", "plain", "--event", itoa(dev.ID)}, []string{
			"target plain of source rules-api takes the event\n", "POST\nContent-Type: application/json\nX-GitHub-Event: push\nX-GitHub-Delivery: r-dev\n\n{\"ref\":\"refs/heads/dev\"}",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := runCLI(t, time.Now(), append([]string{"rules", "test", "--address", srv}, tt.args...)...)
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(res.stdout, w) {
					t.Errorf("output lacks %q:\n%s", w, res.stdout)
				}
			}
		})
	}
	errs := []struct {
		name string
		args []string
		want string
	}{
		{"no event", []string{"--source", "rules-api", "--target", "deploy"}, "give one of job, event and body"},
		{"no target", []string{"--source", "rules-api", "--event", itoa(dev.ID)}, "invalid --target: is required"},
		{"unknown target", []string{"--source", "rules-api", "--target", "nope", "--event", itoa(dev.ID)}, `invalid --target: "nope" is not a target of source "rules-api" in the running config`},
		{"unknown job", []string{"--job", "999999"}, "job 999999 not found"},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			res := runCLI(t, time.Now(), append([]string{"rules", "test", "--address", srv}, tt.args...)...)
			if res.code == 0 || !strings.Contains(res.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want an error containing %q", res.code, res.stderr, tt.want)
			}
		})
	}

	// The API names the parameter of a bad request for its clients.
	resp, err := http.Post("http://"+srv+"/webhook/rules/test", "application/json", strings.NewReader(`{"source":"rules-api","body":"{}"}`))
	if err != nil {
		t.Fatal(err)
	}
	var apiErr struct{ Error, Param string }
	json.NewDecoder(resp.Body).Decode(&apiErr)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || apiErr.Param != "target" {
		t.Errorf("no target: %d %+v, want 400 naming the target parameter", resp.StatusCode, apiErr)
	}

	// The job and event pages say which filter took the event.
	var job struct {
		Filter string `json:"filter"`
	}
	getJSON(t, srv, "/webhook/jobs/"+itoa(mainJob), &job)
	if job.Filter != `body.ref == "refs/heads/main"` {
		t.Errorf("job filter %q", job.Filter)
	}
	mainEv, _ := h.store(t).FindEvent(t.Context(), "rules-api", "r-main")
	var ev struct {
		Filters map[string]string `json:"filters"`
	}
	getJSON(t, srv, "/webhook/events/"+itoa(mainEv.ID), &ev)
	if len(ev.Filters) != 1 || ev.Filters["deploy"] != `body.ref == "refs/heads/main"` {
		t.Errorf("event filters %v, want deploy's only", ev.Filters)
	}
}

// httptestServer serves h on loopback and returns its host:port.
func httptestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func getJSON(t *testing.T, addr, path string, v any) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func TestRouteRulesTest(t *testing.T) {
	f, err := rules.CompileFilter([]string{`body.ref == "refs/heads/main"`}, rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := rules.CompileTransform(&rules.TransformConfig{Body: `raw`}, rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	job := func(event, body string) *queue.Job {
		return &queue.Job{Source: "gh", Target: "deploy", EventType: event, Payload: []byte(body),
			Headers: []queue.Header{{Name: "Content-Type", Value: "application/json"}}}
	}
	tests := []struct {
		name   string
		rr     routeRules
		job    *queue.Job
		takes  bool
		reason string
		method string
		body   string
		base64 string
	}{
		{name: "exec target", rr: routeRules{kind: "exec", filter: f}, job: job("push", `{"ref":"refs/heads/main"}`), takes: true, method: "EXEC", body: `{"ref":"refs/heads/main"}`},
		{name: "event type not in events", rr: routeRules{kind: "http", events: []string{"release"}, filter: f}, job: job("push", `{}`),
			reason: `event type "push" is not in the target's events`, method: "POST", body: `{}`},
		{name: "empty event type", rr: routeRules{kind: "http", events: []string{"release"}}, job: job("", `{}`),
			reason: `event type (empty) is not in the target's events`, method: "POST", body: `{}`},
		{name: "bytes body shown as base64", rr: routeRules{kind: "http", transform: tr}, job: job("push", "\xff\xfe"), takes: true, method: "POST", base64: "//4="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.rr.test(tt.job)
			if r.Takes != tt.takes || r.Reason != tt.reason || r.Request == nil ||
				r.Request.Method != tt.method || r.Request.Body != tt.body || r.Request.BodyBase64 != tt.base64 {
				t.Errorf("test = %+v (request %+v)", r, r.Request)
			}
		})
	}
}

// TestOnceAMinute: the filter-error log says each key once a minute, a new
// minute starts over, and a flood of distinct keys stops at
// onceAMinuteMaxKeys rather than growing the set.
func TestOnceAMinute(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	type call struct {
		key  string
		at   time.Duration // after t0
		want bool
	}
	tests := []struct {
		name  string
		calls []call
	}{
		{"first of a key", []call{{"a", 0, true}}},
		{"same key within the minute", []call{{"a", 0, true}, {"a", 59 * time.Second, false}}},
		{"other keys within the minute", []call{{"a", 0, true}, {"b", time.Second, true}, {"b", 2 * time.Second, false}}},
		{"a new minute starts over", []call{{"a", 0, true}, {"a", 30 * time.Second, false}, {"a", time.Minute, true}, {"a", time.Minute + time.Second, false}}},
		{"the minute runs from its first call", []call{{"a", 10 * time.Second, true}, {"a", 69 * time.Second, false}, {"a", 70 * time.Second, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o onceAMinute
			for i, c := range tt.calls {
				if got := o.first(c.key, t0.Add(c.at)); got != c.want {
					t.Errorf("call %d (%q at +%s): got %v, want %v", i+1, c.key, c.at, got, c.want)
				}
			}
		})
	}

	t.Run("a flood of keys is capped", func(t *testing.T) {
		var o onceAMinute
		for i := range onceAMinuteMaxKeys {
			if !o.first("key-"+strconv.Itoa(i), t0) {
				t.Fatalf("key %d of %d refused", i+1, onceAMinuteMaxKeys)
			}
		}
		if o.first("one too many", t0.Add(time.Second)) {
			t.Errorf("key %d taken: want the set capped at %d", onceAMinuteMaxKeys+1, onceAMinuteMaxKeys)
		}
		if len(o.seen) != onceAMinuteMaxKeys {
			t.Errorf("%d keys remembered, want %d", len(o.seen), onceAMinuteMaxKeys)
		}
		if !o.first("one too many", t0.Add(time.Minute)) {
			t.Error("the next minute still refuses: want the cap lifted")
		}
		if len(o.seen) != 1 {
			t.Errorf("%d keys remembered after the minute ended, want 1", len(o.seen))
		}
	})
}
