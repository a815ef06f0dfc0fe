package signature

import (
	"net/http"
	"testing"
)

// Vector computed with openssl over the body, keyed with the sample
// X-Hook-Secret of https://developers.asana.com/reference/createwebhook:
//
//	printf '%s' "$BODY" | openssl dgst -sha256 -hmac "$KEY"
const (
	asanaSecret = "b537207f20cbfa02357cf448134da559e8bd39d61597dcd5631b8012eae53e81"
	asanaBody   = `{"events":[{"action":"changed","resource":{"gid":"1","resource_type":"task"}}]}`
	asanaSig    = "9d011c08342193ed633bc26618fc8517e1c2176a886ff68a76428e7f27f45b81"
)

func TestAsana(t *testing.T) {
	v := setup(t, Config{Scheme: "asana", Secrets: []string{"old-secret", asanaSecret}})
	runVectors(t, v, []vectorCase{
		{name: "vector accepted", header: hdr(headerAsanaSignature, asanaSig), body: asanaBody},
		{name: "changed body refused", header: hdr(headerAsanaSignature, asanaSig), body: flip(asanaBody), wantErr: ErrNoMatch},
	})
	roundTrip(t, v, "asana", asanaSecret, asanaBody, testNow)
	post := func(h http.Header) Request { return Request{Method: http.MethodPost, Header: h} }
	const issued = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	runHandshakes(t, v, []handshakeCase{
		{
			name: "known secret echoed", req: post(hdr(headerAsanaSecret, asanaSecret)),
			wantOK: true, wantStatus: 200, wantHeader: http.Header{headerAsanaSecret: {asanaSecret}},
		},
		{
			name: "new secret echoed and issued", req: post(hdr(headerAsanaSecret, issued)),
			wantOK: true, wantStatus: 200, wantHeader: http.Header{headerAsanaSecret: {issued}}, wantIssued: issued,
		},
		{name: "secret that is not a token refused", req: post(hdr(headerAsanaSecret, "a b")), wantErr: ErrMalformedHeader},
		{name: "signed event is no handshake", req: post(hdr(headerAsanaSecret, issued, headerAsanaSignature, asanaSig))},
	})
}
