package signature

import (
	"bytes"
	"strings"
	"testing"
)

// TestRedactSecrets: the secret-bearing fields a scheme declares are
// replaced by the marker wherever they occur, the other bytes left as they
// were. The shapes are Graph's change notifications
// (https://learn.microsoft.com/en-us/graph/change-notifications-delivery-webhooks)
// and Slack's Events API wrapper (https://api.slack.com/types/event).
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
		{name: "slack form body untouched", scheme: SchemeSlack, body: "payload=%7B%22token%22%3A%22x%22%7D", want: "payload=%7B%22token%22%3A%22x%22%7D"},
		{name: "scheme without secret fields", scheme: SchemeGitHub, body: `{"token":"t"}`, want: `{"token":"t"}`},
		{name: "not JSON", scheme: "msgraph", body: `clientState=x`, want: `clientState=x`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.body)
			got := RedactSecrets(tt.scheme, body)
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
