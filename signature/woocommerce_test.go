package signature

import (
	"net/http"
	"testing"
)

// Vector computed with openssl over the body, base64
// (woocommerce/woocommerce plugins/woocommerce/includes/class-wc-webhook.php,
// generate_signature and deliver_ping):
//
//	printf '%s' "$BODY" | openssl dgst -sha256 -hmac wc_secret_key -binary | base64
const (
	wooSecret = "wc_secret_key"
	wooBody   = `{"id":123,"status":"processing"}`
	wooSig    = "Wc61KYZNIpM6XiXQcPA8IDcP2I09d8aEenZYfr/Iu5Y="
)

func TestWooCommerce(t *testing.T) {
	v := setup(t, Config{Scheme: "woocommerce", Secrets: []string{wooSecret}})
	runVectors(t, v, []vectorCase{
		{name: "vector accepted", header: hdr(headerWooSignature, wooSig, "X-WC-Webhook-Topic", "order.updated"), body: wooBody, wantType: "order.updated"},
		{name: "changed body refused", header: hdr(headerWooSignature, wooSig), body: flip(wooBody), wantErr: ErrNoMatch},
	})
	roundTrip(t, v, "woocommerce", wooSecret, wooBody, testNow)
	post := func(h http.Header, body string) Request {
		return Request{Method: http.MethodPost, Header: h, Body: []byte(body)}
	}
	runHandshakes(t, v, []handshakeCase{
		{name: "unsigned ping answered 200", req: post(hdr("Content-Type", "application/x-www-form-urlencoded"), "webhook_id=7"), wantOK: true, wantStatus: 200},
		{name: "unsigned other body is no handshake", req: post(hdr(), `{"id":1}`)},
		{name: "signed ping is no handshake", req: post(hdr(headerWooSignature, wooSig), "webhook_id=7")},
	})
	if err := CheckHeaders(v, Request{Method: http.MethodPost, Header: hdr()}); err != nil {
		t.Errorf("CheckHeaders refused what may be a ping: %v", err)
	}
}
