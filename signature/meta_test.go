package signature

import (
	"net/http"
	"testing"
)

// Vector computed with openssl over the documented content, the raw body
// (https://developers.facebook.com/docs/graph-api/webhooks/getting-started/):
//
//	printf '%s' "$BODY" | openssl dgst -sha256 -hmac meta_app_secret_123
const (
	metaSecret = "meta_app_secret_123"
	metaBody   = `{"object":"whatsapp_business_account","entry":[{"id":"123","changes":[]}]}`
	metaSig    = "sha256=7e226908f77aa6d8e0b859637220ce46d73fb095a82981708d0d8700e1ca4f9f"
)

func TestMeta(t *testing.T) {
	v := setup(t, Config{Scheme: "meta", Secrets: []string{metaSecret}, VerifyToken: "meatyhamhock"})
	runVectors(t, v, []vectorCase{
		{name: "vector accepted", header: hdr("X-Hub-Signature-256", metaSig), body: metaBody, wantType: "whatsapp_business_account"},
		{name: "changed body refused", header: hdr("X-Hub-Signature-256", metaSig), body: flip(metaBody), wantErr: ErrNoMatch},
	})
	roundTrip(t, v, "meta", metaSecret, metaBody, testNow)
	get := func(query string) Request {
		return Request{Method: http.MethodGet, URL: "https://example.com/hook?" + query}
	}
	runHandshakes(t, v, []handshakeCase{
		{
			name: "verification echoed", req: get("hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=meatyhamhock"),
			wantOK: true, wantStatus: 200, wantType: "text/plain; charset=utf-8", wantBody: "1158201444",
			wantHeader: http.Header{"X-Content-Type-Options": {"nosniff"}},
		},
		{name: "wrong verify token refused", req: get("hub.mode=subscribe&hub.challenge=1&hub.verify_token=meatyhamhocK"), wantErr: ErrNoMatch},
		{name: "no verify token refused", req: get("hub.mode=subscribe&hub.challenge=1"), wantErr: ErrNoMatch},
		{name: "GET without hub.mode is no handshake", req: get("x=1")},
		{name: "POST is no handshake", req: Request{Method: http.MethodPost, URL: "https://example.com/hook?hub.mode=subscribe"}},
	})
	unconfigured := setup(t, Config{Scheme: "meta", Secrets: []string{metaSecret}})
	runHandshakes(t, unconfigured, []handshakeCase{
		{name: "refused without a configured token", req: get("hub.mode=subscribe&hub.challenge=1&hub.verify_token="), wantErr: ErrNoMatch},
	})
	if _, err := New(Config{Scheme: "github", Secrets: []string{"s"}, VerifyToken: "t"}); err == nil {
		t.Error("New accepted a VerifyToken for github")
	}
}
