package signature

import (
	"net/http"
	"strings"
	"testing"
)

// Microsoft Graph sends the subscription's clientState in each
// notification, and validates the endpoint with ?validationToken=
// (https://learn.microsoft.com/en-us/graph/change-notifications-delivery-webhooks).
const (
	graphState = "graph-client-state-123"
	graphItem  = `{"subscriptionId":"s1","clientState":"` + graphState + `","changeType":"created","resource":"Users/1/Messages/2"}`
	graphBody  = `{"value":[` + graphItem + `]}`
)

func TestMSGraph(t *testing.T) {
	cfg := Config{Scheme: "msgraph", Secrets: []string{"old-state", graphState}}
	req := post("", hdr(), graphBody)
	lifecycle := `{"subscriptionId":"s1","clientState":"` + graphState + `","lifecycleEvent":"reauthorizationRequired"}`
	runVerifyCases(t, []verifyCase{
		{name: "notification accepted", cfg: cfg, req: req, want: Result{SecretIndex: 1, DeliveryID: bodyID([]byte(graphBody)), EventType: "created"}},
		{name: "two notifications accepted", cfg: cfg, req: post("", hdr(), `{"value":[`+graphItem+`,`+strings.Replace(graphItem, "created", "updated", 1)+`]}`),
			want: Result{SecretIndex: 1, DeliveryID: bodyID([]byte(`{"value":[` + graphItem + `,` + strings.Replace(graphItem, "created", "updated", 1) + `]}`)), EventType: "created"}},
		{name: "lifecycle notification typed by its event", cfg: cfg, req: post("", hdr(), `{"value":[`+lifecycle+`]}`),
			want: Result{SecretIndex: 1, DeliveryID: bodyID([]byte(`{"value":[` + lifecycle + `]}`)), EventType: "reauthorizationRequired"}},
		{name: "one clientState byte changed", cfg: cfg, req: post("", hdr(), strings.Replace(graphBody, graphState, "graph-client-state-124", 1)), err: ErrNoMatch},
		{name: "second notification with another clientState", cfg: cfg, req: post("", hdr(), `{"value":[`+graphItem+`,`+strings.Replace(graphItem, graphState, "forged", 1)+`]}`), err: ErrNoMatch},
		{name: "second notification without clientState", cfg: cfg, req: post("", hdr(), `{"value":[`+graphItem+`,{"changeType":"deleted"}]}`), err: ErrMissingHeader},
		{name: "clientState not a string", cfg: cfg, req: post("", hdr(), `{"value":[{"clientState":1}]}`), err: ErrMissingHeader},
		{name: "empty value", cfg: cfg, req: post("", hdr(), `{"value":[]}`), err: ErrMissingHeader},
		{name: "no value", cfg: cfg, req: post("", hdr(), `{"clientState":"`+graphState+`"}`), err: ErrMissingHeader},
		{name: "value of non-objects", cfg: cfg, req: post("", hdr(), `{"value":["`+graphState+`"]}`), err: ErrMalformedHeader},
		{name: "body not JSON", cfg: cfg, req: post("", hdr(), graphState), err: ErrMalformedHeader},
	})

	v := setup(t, cfg)
	const token = "Validation: Testing client application reachability for subscription Request-Id: abc"
	enc := "Validation%3A%20Testing%20client%20application%20reachability%20for%20subscription%20Request-Id%3A%20abc"
	runHandshakes(t, v, []handshakeCase{
		{name: "validationToken echoed decoded", req: post("https://h/hooks/graph?validationToken="+enc, hdr(), ""),
			wantOK: true, wantStatus: 200, wantType: "text/plain; charset=utf-8", wantBody: token, wantHeader: http.Header{"X-Content-Type-Options": {"nosniff"}}},
		{name: "control character refused", req: post("https://h/hooks/graph?validationToken=a%0Ab", hdr(), ""), wantErr: ErrMalformedHeader},
		{name: "empty token refused", req: post("https://h/hooks/graph?validationToken=", hdr(), ""), wantErr: ErrMalformedHeader},
		{name: "notification is no handshake", req: post("https://h/hooks/graph", hdr(), graphBody)},
		{name: "GET is no handshake", req: Request{Method: http.MethodGet, URL: "https://h/hooks/graph?validationToken=x", Header: hdr()}},
	})

	body, h, err := SignBody("msgraph", graphState, []byte(`{"changeType":"deleted"}`), SignOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := v.Verify(reqOf(h, body)); err != nil || got.EventType != "deleted" {
		t.Errorf("Verify of SignBody's request %s = %+v, %v", body, got, err)
	}
}
