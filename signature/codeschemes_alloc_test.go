package signature

import "testing"

// TestCodeSchemeAllocations holds the schemes that need code of their own to
// their measured budgets: twilio pools its parameter buffers and allocates
// the body-hash id and the URL with its port toggled; netlify and plaid
// decode their JWS parts, and ECDSA allocates as crypto/ecdsa does.
func TestCodeSchemeAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items at random")
	}
	at := clockAt(t, vectorTS)
	for _, tc := range []struct {
		name string
		cfg  Config
		req  Request
		max  float64
	}{
		{"twilio form", Config{Scheme: "twilio", Secrets: []string{twilioToken}}, post(twilioURL, hdr("X-Twilio-Signature", twilioSig), twilioForm), 2},
		{"twilio JSON", Config{Scheme: "twilio", Secrets: []string{twilioToken}}, post(twilioJSONURL, hdr("X-Twilio-Signature", twilioJSONSig), twilioJSON), 2},
		{"netlify", Config{Scheme: "netlify", Secrets: []string{netlifySecret}}, post("", hdr("X-Webhook-Signature", netlifyToken), netlifyBody), 8},
		{"plaid", Config{Scheme: "plaid", PublicKeys: []string{plaidJWK}, Now: at}, post("", hdr("Plaid-Verification", plaidJWT), plaidBody), 32},
		{"polar", Config{Scheme: "polar", Secrets: []string{polarVecSecret}, Now: at}, post("", hdr("webhook-id", polarVecID, "webhook-timestamp", vectorTS, "webhook-signature", polarVecSig), polarVecBody), 1},
	} {
		v := setup(t, tc.cfg)
		got := testing.AllocsPerRun(100, func() {
			if _, err := v.Verify(tc.req); err != nil {
				t.Fatal(err)
			}
		})
		t.Logf("%s: %.0f allocations", tc.name, got)
		if got > tc.max {
			t.Errorf("%s: %.0f allocations, budget %.0f", tc.name, got, tc.max)
		}
	}
}
