package signature

import (
	"errors"
	"net/http"
	"testing"
)

// Notion's signature (https://developers.notion.com/reference/v2-webhooks:
// HMAC-SHA256 of the body keyed with the verification token, hex after
// sha256=), computed with
//
//	printf '%s' "$body" | openssl dgst -sha256 -hmac "$token" -hex
const (
	notionToken = "secret_tMrlL1qK5vuQAh1b6cZGhFChZTSYJlce98V0pYn7yBl"
	notionBody  = `{"id":"367cba44-b6f3-4c92-81e7-6a2e9659efd4","timestamp":"2024-12-05T23:55:34.285Z","type":"page.created","entity":{"id":"153104cd-477e-809d-8dc4-ff2d96ae3090","type":"page"}}`
	notionSig   = "sha256=3a3095ee8da6bf19b7f0155e8e93867f9ec2594278366ddd8d2195beb5e9a59e"
)

func TestNotion(t *testing.T) {
	cfg := Config{Scheme: "notion", Secrets: []string{notionToken}}
	req := post("", hdr("X-Notion-Signature", notionSig), notionBody)
	runVerifyCases(t, []verifyCase{
		{name: "openssl vector", cfg: cfg, req: req, want: Result{DeliveryID: "367cba44-b6f3-4c92-81e7-6a2e9659efd4", EventType: "page.created"}},
		{name: "one body byte changed", cfg: cfg, req: flipped(req, 30), err: ErrNoMatch},
		{name: "no sha256= prefix", cfg: cfg, req: post("", hdr("X-Notion-Signature", notionSig[7:]), notionBody), err: ErrMalformedHeader},
		{name: "unsigned", cfg: cfg, req: post("", hdr(), notionBody), err: ErrMissingHeader},
	})
}

func TestNotionHandshake(t *testing.T) {
	v := setup(t, Config{Scheme: "notion", Secrets: []string{"not yet known", "secret_known"}})
	hs, ok := v.(Handshaker)
	if !ok {
		t.Fatal("notion verifier is not a Handshaker")
	}
	verification := `{"verification_token":"` + notionToken + `"}`
	for _, tc := range []struct {
		name   string
		req    Request
		ok     bool
		issued string // the token handed to the caller to keep
		err    error
		verify error // what Verify then says of a non-handshake
	}{
		{name: "verification request answered 200, token issued", req: post("", hdr(), verification), ok: true, issued: notionToken},
		{name: "with spaces", req: post("", hdr(), "{ \"verification_token\" : \""+notionToken+"\" }\n"), ok: true, issued: notionToken},
		{name: "a configured token is not issued again", req: post("", hdr(), `{"verification_token":"secret_known"}`), ok: true},
		{name: "token that is not plain refused", req: post("", hdr(), `{"verification_token":"a b"}`), err: ErrMalformedHeader},
		{name: "an event is no handshake", req: post("", hdr("X-Notion-Signature", notionSig), notionBody), verify: ErrNoMatch},
		{name: "signed verification body goes to Verify", req: post("", hdr("X-Notion-Signature", notionSig), verification), verify: ErrNoMatch},
		{name: "token with other fields goes to Verify", req: post("", hdr(), `{"verification_token":"x","type":"page.created"}`), verify: ErrMissingHeader},
		{name: "empty token goes to Verify", req: post("", hdr(), `{"verification_token":""}`), verify: ErrMissingHeader},
		{name: "token not a string goes to Verify", req: post("", hdr(), `{"verification_token":1}`), verify: ErrMissingHeader},
		{name: "GET is no handshake", req: Request{Method: http.MethodGet, Header: hdr(), Body: []byte(verification)}, verify: ErrMissingHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, ok, err := hs.Handshake(tc.req)
			if ok != tc.ok || !errors.Is(err, tc.err) {
				t.Fatalf("Handshake = %v, %v; want %v, %v", ok, err, tc.ok, tc.err)
			}
			if ok {
				if resp.Status != http.StatusOK || len(resp.Body) != 0 || resp.Header != nil || resp.IssuedSecret != tc.issued {
					t.Errorf("Handshake answered %+v, want a bare 200 (the token is a secret) issuing %q", resp, tc.issued)
				}
				return
			}
			if tc.err != nil {
				return
			}
			if _, err := v.Verify(tc.req); !errors.Is(err, tc.verify) {
				t.Errorf("Verify: %v, want %v", err, tc.verify)
			}
		})
	}
}
