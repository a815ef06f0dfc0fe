package signature

import (
	"errors"
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

// graphDocNotification is the change notification of Graph's delivery
// docs (https://learn.microsoft.com/en-us/graph/change-notifications-delivery-webhooks),
// as Graph posts it: a JSON body, no header but Content-Type, the
// clientState in each notification.
const graphDocNotification = `{
  "value": [
    {
      "id": "lsgTZMr9KwAAA",
      "subscriptionId": "7f105c7d-2dc5-4530-97cd-4e7ae6534c07",
      "subscriptionExpirationDateTime": "2016-03-19T22:11:09.952Z",
      "clientState": "` + graphState + `",
      "changeType": "created",
      "resource": "users/48d31887-5fad-4d73-a9f5-3c356e68a038@84bd8158-6d4d-4958-8b9f-9d6445542f95/messages/AAMkADg=",
      "tenantId": "84bd8158-6d4d-4958-8b9f-9d6445542f95",
      "resourceData": {
        "@odata.type": "#Microsoft.Graph.Message",
        "@odata.id": "Users/48d31887-5fad-4d73-a9f5-3c356e68a038@84bd8158-6d4d-4958-8b9f-9d6445542f95/Messages/AAMkADg=",
        "@odata.etag": "W/\"CQAAABYAAADkrWGo7bouTKlsgTZMr9KwAAAUWRHf\"",
        "id": "AAMkADg="
      }
    }
  ]
}`

// TestMSGraphGenuineNotification: the clientState is in the body, so no
// header check may refuse a genuine notification before its body is read,
// and Verify accepts it; a forged one still fails, in Verify.
func TestMSGraphGenuineNotification(t *testing.T) {
	v := setup(t, Config{Scheme: "msgraph", Secrets: []string{graphState}})
	genuine := post("https://h/hooks/graph", hdr("Content-Type", "application/json; charset=utf-8"), graphDocNotification)
	forged := post("https://h/hooks/graph", genuine.Header, strings.Replace(graphDocNotification, graphState, "guess", 1))
	for _, tc := range []struct {
		name      string
		req       Request
		verifyErr error
	}{
		{name: "genuine notification", req: genuine},
		{name: "forged clientState", req: forged, verifyErr: ErrNoMatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := CheckHeaders(v, tc.req); err != nil {
				t.Fatalf("CheckHeaders = %v, want nil: the clientState is in the body", err)
			}
			res, err := v.Verify(tc.req)
			if !errors.Is(err, tc.verifyErr) || (err == nil) != (tc.verifyErr == nil) {
				t.Fatalf("Verify = %v, want %v", err, tc.verifyErr)
			}
			if err == nil && res.EventType != "created" {
				t.Errorf("EventType = %q, want created", res.EventType)
			}
		})
	}
}
