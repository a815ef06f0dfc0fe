package signature

import (
	"testing"
	"time"
)

// The Standard Webhooks senders by name: svix, clerk, resend, polar, brex
// and gitlabsigned. The Svix vector is the one Svix publishes
// (https://docs.svix.com/receiving/verifying-payloads/how-manual, reproduced
// on https://developer.ongoody.com/webhooks/webhook-security), re-checked with
//
//	printf '%s' 'msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.{"test": 2432232314}' |
//	  openssl dgst -sha256 -mac HMAC -macopt hexkey:$(printf %s MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw | base64 -d | xxd -p -c 256) -binary | base64
//
// Polar's and Brex's are computed with openssl from their documented
// algorithm (cited in polar.go and brex.go):
//
//	printf '%s' "msg_2Lml9bYJ7fTqR3rD.1700000000.$body" | openssl dgst -sha256 -hmac polar_whs_abc123 -binary | base64
//	printf '%s' "msg_brex_1.1700000000.$body" | openssl dgst -sha256 -mac HMAC -macopt hexkey:$(printf %s "$secret" | base64 -d | xxd -p -c 256) -binary | base64
const (
	polarVecSecret = "polar_whs_abc123"
	polarVecID     = "msg_2Lml9bYJ7fTqR3rD"
	polarVecBody   = `{"type":"order.created","data":{"id":"1"}}`
	polarVecSig    = "v1,rbUIgNdqPeZ9N2KzuY5oDfY2jFPMIl7/aNiiCALmzsc="

	brexVecSecret = "YnJleC13ZWJob29rLWtleS0wMTIzNDU2Nzg5YWJjZGVm"
	brexVecID     = "msg_brex_1"
	brexVecBody   = `{"event_type":"TRANSFER_PROCESSED","payment_id":"pt_1"}`
	brexVecSig    = "v1,unHV2ekvNL8HoAbTKCl0deteFKQ/XTKtIPXweDAhlF0="
)

func TestStandardSenders(t *testing.T) {
	spec := clockAt(t, standardSpecTS)
	at := clockAt(t, vectorTS)
	svixHeaders := hdr("svix-id", standardSpecID, "svix-timestamp", standardSpecTS, "svix-signature", standardSpecSig)
	webhookHeaders := hdr("webhook-id", standardSpecID, "webhook-timestamp", standardSpecTS, "webhook-signature", standardSpecSig)
	svixReq := post("", svixHeaders, standardSpecBody)
	specCfg := func(name string) Config {
		return Config{Scheme: name, Secrets: []string{standardSpecSecret}, Now: spec}
	}
	polarReq := post("", hdr("webhook-id", polarVecID, "webhook-timestamp", vectorTS, "webhook-signature", polarVecSig), polarVecBody)
	brexReq := post("", hdr("Webhook-Id", brexVecID, "Webhook-Timestamp", vectorTS, "Webhook-Signature", "v1,"+polarVecSig[3:]+" "+brexVecSig), brexVecBody)
	gitlabReq := post("", hdr("webhook-id", standardSpecID, "webhook-timestamp", standardSpecTS, "webhook-signature", standardSpecSig, "X-Gitlab-Event", "Push Hook"), standardSpecBody)
	stale := func(clock func() time.Time) func() time.Time {
		return func() time.Time { return clock().Add(time.Hour) }
	}
	var cases []verifyCase
	for _, name := range []string{"svix", "clerk", "resend"} {
		cases = append(cases,
			verifyCase{name: name + "/published vector, svix-* headers", cfg: specCfg(name), req: svixReq, want: Result{DeliveryID: standardSpecID}},
			verifyCase{name: name + "/published vector, webhook-* headers", cfg: specCfg(name), req: post("", webhookHeaders, standardSpecBody), want: Result{DeliveryID: standardSpecID}},
			verifyCase{name: name + "/one body byte changed", cfg: specCfg(name), req: flipped(svixReq, 3), err: ErrNoMatch},
			verifyCase{name: name + "/stale timestamp", cfg: Config{Scheme: name, Secrets: []string{standardSpecSecret}, Now: stale(spec)}, req: svixReq, err: ErrTimestamp},
			verifyCase{name: name + "/missing svix-id", cfg: specCfg(name), req: post("", hdr("svix-timestamp", standardSpecTS, "svix-signature", standardSpecSig), standardSpecBody), err: ErrMissingHeader},
		)
	}
	cases = append(cases,
		verifyCase{name: "svix/v1a with a public key", cfg: Config{Scheme: "svix", PublicKeys: []string{"whpk_" + edPubB64}, Now: at},
			req:  post("", hdr("svix-id", v1aID, "svix-timestamp", vectorTS, "svix-signature", v1aSig), v1aBody),
			want: Result{DeliveryID: v1aID, EventType: "invoice.paid"}},
		verifyCase{name: "polar/computed vector, raw secret by default", cfg: Config{Scheme: "polar", Secrets: []string{polarVecSecret}, Now: at}, req: polarReq,
			want: Result{DeliveryID: polarVecID, EventType: "order.created"}},
		verifyCase{name: "polar/whsec_ secret, base64 key first", cfg: specCfg("polar"), req: post("", webhookHeaders, standardSpecBody), want: Result{DeliveryID: standardSpecID}},
		verifyCase{name: "polar/secret mode base64, another secret's signature", cfg: Config{Scheme: "polar", Secrets: []string{standardSpecSecret}, SecretMode: SecretBase64, Now: at}, req: polarReq, err: ErrNoMatch},
		verifyCase{name: "polar/one body byte changed", cfg: Config{Scheme: "polar", Secrets: []string{polarVecSecret}, Now: at}, req: flipped(polarReq, 9), err: ErrNoMatch},
		verifyCase{name: "polar/stale timestamp", cfg: Config{Scheme: "polar", Secrets: []string{polarVecSecret}, Now: stale(at)}, req: polarReq, err: ErrTimestamp},
		verifyCase{name: "brex/computed vector, second of two signatures", cfg: Config{Scheme: "brex", Secrets: []string{brexVecSecret}, Now: at}, req: brexReq,
			want: Result{DeliveryID: brexVecID, EventType: "TRANSFER_PROCESSED"}},
		verifyCase{name: "brex/one body byte changed", cfg: Config{Scheme: "brex", Secrets: []string{brexVecSecret}, Now: at}, req: flipped(brexReq, 5), err: ErrNoMatch},
		verifyCase{name: "brex/stale timestamp", cfg: Config{Scheme: "brex", Secrets: []string{brexVecSecret}, Now: stale(at)}, req: brexReq, err: ErrTimestamp},
		verifyCase{name: "gitlabsigned/standard vector, event from X-Gitlab-Event", cfg: specCfg("gitlabsigned"), req: gitlabReq,
			want: Result{DeliveryID: standardSpecID, EventType: "Push Hook"}},
		verifyCase{name: "gitlabsigned/one body byte changed", cfg: specCfg("gitlabsigned"), req: flipped(gitlabReq, 0), err: ErrNoMatch},
		verifyCase{name: "gitlabsigned/stale timestamp", cfg: Config{Scheme: "gitlabsigned", Secrets: []string{standardSpecSecret}, Now: stale(spec)}, req: gitlabReq, err: ErrTimestamp},
		verifyCase{name: "gitlabsigned/a token header is no signature", cfg: specCfg("gitlabsigned"), req: post("", hdr("X-Gitlab-Token", standardSpecSecret), standardSpecBody), err: ErrMissingHeader},
	)
	runVerifyCases(t, cases)
}

// TestStandardSendersSign: Sign writes each sender's header family and
// signs with its secret form, and New accepts SecretMode only for them.
func TestStandardSendersSign(t *testing.T) {
	for _, tc := range []struct {
		scheme, secret, header string
	}{
		{"svix", standardSpecSecret, "Svix-Signature"},
		{"clerk", standardSpecSecret, "Svix-Signature"},
		{"resend", standardSpecSecret, "Svix-Signature"},
		{"polar", polarVecSecret, "Webhook-Signature"},
		{"brex", brexVecSecret, "Webhook-Signature"},
		{"gitlabsigned", standardSpecSecret, "Webhook-Signature"},
	} {
		t.Run(tc.scheme, func(t *testing.T) {
			req := signedRequest(t, tc.scheme, tc.secret, polarVecBody, SignOptions{ID: polarVecID, Timestamp: testNow})
			if req.Header.Get(tc.header) == "" {
				t.Fatalf("Sign wrote %v, want %s", req.Header, tc.header)
			}
			v := setup(t, Config{Scheme: tc.scheme, Secrets: []string{tc.secret}, Now: fixedClock})
			if got, err := v.Verify(req); err != nil || got.DeliveryID != polarVecID {
				t.Fatalf("Verify = %+v, %v", got, err)
			}
			if _, err := New(Config{Scheme: tc.scheme, Secrets: []string{tc.secret}, SecretMode: SecretBoth}); err != nil {
				t.Errorf("New with SecretMode: %v", err)
			}
		})
	}
	if _, err := New(Config{Scheme: SchemeGitHub, Secrets: []string{"s"}, SecretMode: SecretRaw}); err == nil {
		t.Error("New accepted SecretMode for github")
	}
	// Polar signs as its SDKs do, with the secret's bytes: the vector.
	h, err := Sign("polar", polarVecSecret, []byte(polarVecBody), SignOptions{ID: polarVecID, Timestamp: time1700000000()})
	if err != nil || h.Get("Webhook-Signature") != polarVecSig {
		t.Errorf("Sign(polar) = %q, %v; want %q", h.Get("Webhook-Signature"), err, polarVecSig)
	}
}

func time1700000000() time.Time { return time.Unix(1700000000, 0) }
