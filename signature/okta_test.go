package signature

import (
	"net/http"
	"testing"
)

// Okta sends the configured header value itself; the verification request
// and its answer are those of Okta's support article "Unable to verify
// event hook" (https://developer.okta.com/docs/concepts/event-hooks/).
func TestOkta(t *testing.T) {
	v := setup(t, Config{Scheme: "okta", Secrets: []string{"my-shared-secret"}})
	body := `{"eventType":"com.okta.event_hook","eventId":"b5a188b9-5ece-4636-b041-482ffda96311","data":{"events":[]}}`
	runVectors(t, v, []vectorCase{
		{name: "configured header accepted", header: hdr("Authorization", "my-shared-secret"), body: body, wantID: "b5a188b9-5ece-4636-b041-482ffda96311"},
		{name: "another value refused", header: hdr("Authorization", "my-shared-secreT"), body: body, wantErr: ErrNoMatch},
		{name: "no header refused", header: hdr(), body: body, wantErr: ErrMissingHeader},
	})
	roundTrip(t, v, "okta", "my-shared-secret", body, testNow)
	const challenge = "Me_rShK8JHsTnbyYrWXCEoMGbM_zsZ6k0hLPZ_Pg"
	get := func(h http.Header) Request { return Request{Method: http.MethodGet, Header: h} }
	runHandshakes(t, v, []handshakeCase{
		{
			name: "verification answered", req: get(hdr("Authorization", "my-shared-secret", headerOktaChallenge, challenge)),
			wantOK: true, wantStatus: 200, wantType: "application/json", wantBody: `{"verification":"` + challenge + `"}`,
		},
		{name: "forged verification refused", req: get(hdr("Authorization", "guess", headerOktaChallenge, challenge)), wantErr: ErrNoMatch},
		{name: "GET without challenge is no handshake", req: get(hdr("Authorization", "my-shared-secret"))},
	})
}
