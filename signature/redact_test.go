package signature

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/caddywebhook/caddywebhook/internal/jsonscan"
)

// TestRedactSecrets: the secret-bearing fields a scheme declares are
// replaced by the marker wherever they occur, the other bytes left as they
// were. The shapes are Graph's change notifications
// (https://learn.microsoft.com/en-us/graph/change-notifications-delivery-webhooks)
// and Slack's Events API wrapper (https://api.slack.com/types/event).
//
// The slash command is the POST data of https://api.slack.com/slash-commands,
// form-encoded; the interactivity payload is a block_actions payload
// (https://docs.slack.dev/reference/interaction-payloads/block_actions-payload),
// which Slack posts as the JSON value of the form field payload.
func TestRedactSecrets(t *testing.T) {
	const m = `"` + RedactedMarker + `"`
	slackEvent := `{"token":"XXYYZZverification","team_id":"T061EG9R6","api_app_id":"A0PNCHHK2","event":{"type":"app_mention","token":"inner-is-no-secret"},"type":"event_callback","event_id":"Ev0PV52K21"}`
	tests := []struct {
		name, scheme, body, want string
	}{
		{name: "graph docs notification", scheme: "msgraph", body: graphDocNotification,
			want: strings.Replace(graphDocNotification, `"`+graphState+`"`, m, 1)},
		{name: "graph, every notification", scheme: "msgraph",
			body: `{"value":[{"clientState":"s1","changeType":"created"}, {"changeType":"updated","clientState":"s1"}]}`,
			want: `{"value":[{"clientState":` + m + `,"changeType":"created"}, {"changeType":"updated","clientState":` + m + `}]}`},
		{name: "graph, a duplicated member twice", scheme: "msgraph",
			body: `{"value":[{"clientState":"first","clientState":"s1"}]}`,
			want: `{"value":[{"clientState":` + m + `,"clientState":` + m + `}]}`},
		{name: "graph, escaped member name", scheme: "msgraph",
			body: `{"value":[{"client\u0053tate":"s1"}]}`,
			want: `{"value":[{"client\u0053tate":` + m + `}]}`},
		{name: "graph, clientState outside value kept", scheme: "msgraph",
			body: `{"clientState":"not-in-a-notification","value":[{"clientState":"s1"}]}`,
			want: `{"clientState":"not-in-a-notification","value":[{"clientState":` + m + `}]}`},
		{name: "slack wrapper token, the inner one kept", scheme: SchemeSlack, body: slackEvent,
			want: strings.Replace(slackEvent, `"XXYYZZverification"`, m, 1)},
		{name: "slack wrapper after leading space", scheme: SchemeSlack, body: " \n" + slackEvent,
			want: " \n" + strings.Replace(slackEvent, `"XXYYZZverification"`, m, 1)},
		{name: "slack slash command, the docs' body", scheme: SchemeSlack, body: slackSlashCommand,
			want: strings.Replace(slackSlashCommand, "token=gIkuvaNzQIHg97ATvDxqgjtO", "token=%5Bredacted%5D", 1)},
		{name: "slack slash command, token last", scheme: SchemeSlack, body: "command=%2Fweather&text=94070&token=gIkuvaNzQIHg97ATvDxqgjtO",
			want: "command=%2Fweather&text=94070&token=%5Bredacted%5D"},
		{name: "slack slash command, an encoded field name", scheme: SchemeSlack, body: "tok%65n=gIkuvaNzQIHg97ATvDxqgjtO&text=a",
			want: "tok%65n=%5Bredacted%5D&text=a"},
		{name: "slack slash command, the token twice", scheme: SchemeSlack, body: "token=a1&text=x&token=b2",
			want: "token=%5Bredacted%5D&text=x&token=%5Bredacted%5D"},
		{name: "slack interactivity payload", scheme: SchemeSlack,
			body: "payload=" + url.QueryEscape(slackBlockActions),
			want: "payload=" + url.QueryEscape(strings.Replace(slackBlockActions, `"Iy5cNdQ9kLL2J0gNvgDOoM8y"`, m, 1))},
		{name: "slack form that begins as a JSON object", scheme: SchemeSlack, body: `{"token":"a",&token=gIkuvaNzQIHg97ATvDxqgjtO`,
			want: `{"token":"a",&token=%5Bredacted%5D`},
		{name: "slack interactivity payload escaped otherwise", scheme: SchemeSlack,
			body: `payload={"type":"block_actions","token":"Iy5cNdQ9kLL2J0gNvgDOoM8y","user":{"id":"U1"}}&x=a%20b`,
			want: "payload=" + url.QueryEscape(`{"type":"block_actions","token":"[redacted]","user":{"id":"U1"}}`) + "&x=a%20b"},
		{name: "slack form that begins with a brace", scheme: SchemeSlack, body: "{=x&token=gIkuvaNzQIHg97ATvDxqgjtO", want: "{=x&token=%5Bredacted%5D"},
		{name: "slack JSON with the word in a value untouched", scheme: SchemeSlack, body: `{"text":"a&token=b"}`, want: `{"text":"a&token=b"}`},
		{name: "slack form without a token untouched", scheme: SchemeSlack, body: "command=%2Fweather&text=94070", want: "command=%2Fweather&text=94070"},
		{name: "slack payload that is not JSON untouched", scheme: SchemeSlack, body: "payload=token%3Dx", want: "payload=token%3Dx"},
		{name: "slack payload that does not decode untouched", scheme: SchemeSlack, body: "payload=%zz&text=a", want: "payload=%zz&text=a"},
		{name: "slack text mentioning token untouched", scheme: SchemeSlack, body: "text=token%3Dabc", want: "text=token%3Dabc"},
		{name: "scheme without secret fields", scheme: SchemeGitHub, body: `{"token":"t"}`, want: `{"token":"t"}`},
		{name: "not JSON", scheme: "msgraph", body: `clientState=x`, want: `clientState=x`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.body)
			got := RedactSecrets(tt.scheme, body)
			if tt.scheme == SchemeSlack && (bytes.Contains(got, []byte("gIkuvaNzQIHg97ATvDxqgjtO")) || bytes.Contains(got, []byte("Iy5cNdQ9kLL2J0gNvgDOoM8y"))) {
				t.Errorf("a verification token is left: %s", got)
			}
			if string(got) != tt.want {
				t.Errorf("RedactSecrets =\n%s\nwant\n%s", got, tt.want)
			}
			if string(body) != tt.body {
				t.Error("RedactSecrets changed its argument")
			}
			if tt.want == tt.body && &got[0] != &body[0] {
				t.Error("RedactSecrets copied a body it did not change")
			}
			if bytes.Contains(got, []byte(`"s1"`)) && tt.scheme == "msgraph" {
				t.Errorf("a clientState is left: %s", got)
			}
		})
	}
}

const (
	slackSlashCommand = "token=gIkuvaNzQIHg97ATvDxqgjtO&team_id=T0001&team_domain=example&channel_id=C2147483705&channel_name=test&user_id=U2147483697&user_name=Steve&command=%2Fweather&text=94070&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2F1234%2F5678&trigger_id=13345224609.738474920.8088930838d88f008e0"
	slackBlockActions = `{"type":"block_actions","team":{"id":"T9TK3CUKW","domain":"example"},"user":{"id":"UA8RXUSPL","username":"jtorrance","team_id":"T9TK3CUKW"},"api_app_id":"AABA1ABCD","token":"Iy5cNdQ9kLL2J0gNvgDOoM8y","container":{"type":"message_attachment","message_ts":"1548261231.000200","attachment_id":1,"channel_id":"CBR2V3XEX","is_ephemeral":false,"is_app_unfurl":false},"trigger_id":"12321423423.333649436676.d8c1bb837935619ccad0f624c448ffb3","channel":{"id":"CBR2V3XEX","name":"review-updates"},"response_url":"https://hooks.slack.com/actions/AABA1ABCD/1232321423432/D09sSasdasdAS9091209","actions":[{"action_id":"WaXA","block_id":"=qXel","text":{"type":"plain_text","text":"View","emoji":true},"value":"click_me_123","type":"button","action_ts":"1548426417.840180"}]}`
)

// FuzzRedactSlack: whatever the body, no Slack verification token that a
// reader could decode survives: a form's token fields, the token of the
// JSON in its payload fields and a JSON body's top-level token all read
// RedactedMarker afterwards, and redacting again changes nothing.
//
//	go test -run '^$' -fuzz '^FuzzRedactSlack$' -fuzztime 60s ./signature/
func FuzzRedactSlack(f *testing.F) {
	f.Add([]byte(slackSlashCommand))
	f.Add([]byte("payload=" + url.QueryEscape(slackBlockActions)))
	f.Add([]byte(`{"token":"t","type":"event_callback"}`))
	f.Add([]byte("tok%65n=a&token=b&payload=%7B%22token%22%3A1%7D"))
	f.Add([]byte(`{"token":"a",&token=b`))
	f.Fuzz(func(t *testing.T, body []byte) {
		out := RedactSecrets(SchemeSlack, body)
		if again := RedactSecrets(SchemeSlack, out); !bytes.Equal(again, out) {
			t.Fatalf("not idempotent:\n%q\n%q", out, again)
		}
		if i := jsonscan.SkipSpace(out, 0); i < len(out) && out[i] == '{' {
			// A map, not a struct: encoding/json matches a struct's field
			// names without regard to case, the redaction (as Slack's
			// members) by their exact name.
			var doc map[string]any
			if json.Unmarshal(out, &doc) == nil {
				if tok, ok := doc["token"].(string); ok && tok != RedactedMarker {
					t.Fatalf("JSON token %q left in %q", tok, out)
				}
				return
			}
		}
		for _, pair := range strings.Split(string(out), "&") {
			rawName, rawValue, ok := strings.Cut(pair, "=")
			name, err1 := url.QueryUnescape(rawName)
			value, err2 := url.QueryUnescape(rawValue)
			if !ok || err1 != nil || err2 != nil {
				continue
			}
			switch name {
			case "token":
				if value != RedactedMarker {
					t.Fatalf("form token %q left in %q", value, out)
				}
			case "payload":
				var doc map[string]any
				if json.Unmarshal([]byte(value), &doc) == nil {
					if tok, ok := doc["token"].(string); ok && tok != RedactedMarker {
						t.Fatalf("payload token %q left in %q", tok, out)
					}
				}
			}
		}
	})
}
