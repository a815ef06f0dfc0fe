package signature

import (
	"net/http"
	"testing"
	"time"
)

// TestSignAsSenderNamesDeliveries: every scheme whose delivery id is read
// from a header, a preset registered tomorrow included, is signed with an
// id in that header, as its sender sends one; without it the receiver
// would fall back to the body's hash.
func TestSignAsSenderNamesDeliveries(t *testing.T) {
	t.Parallel()
	for _, name := range Schemes() {
		s := registry[name]
		if len(s.id) == 0 || s.id[0].kind != fromHeader {
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			opts := SignOptions{URL: "https://example.com/hook", Timestamp: time.Now(), EventType: "push"}
			var h http.Header
			var err error
			// The first key the scheme signs with: a shared secret, a
			// Standard Webhooks secret, a private key.
			for _, key := range []string{"It's a Secret to Everybody", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", testPrivateKey(name)} {
				if _, h, err = SignAsSender(name, key, []byte(`{"type":"push"}`), opts); err == nil {
					break
				}
			}
			if err != nil {
				t.Fatalf("sign: %v", err)
			}
			if h.Get(s.id[0].name) == "" {
				t.Errorf("no %s in %v: the sender's delivery id is missing", s.id[0].name, h)
			}
			if h.Get("Content-Type") == "" {
				t.Errorf("no Content-Type in %v", h)
			}
		})
	}
}

// TestRegisterRefusesAnUnnamedSender: a scheme that reads its delivery id
// from a header cannot register without saying how its sender makes one.
func TestRegisterRefusesAnUnnamedSender(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("register accepted a header-id scheme without a Sender.ID")
		}
	}()
	register(presetScheme(Preset{Name: "x-test-unnamed", Defaults: Config{SignatureHeader: "X-Sig", DeliveryIDHeader: "X-Id"}}))
}
