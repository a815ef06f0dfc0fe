package httptarget

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/caddywebhook/targets/targettest"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/signature"
)

// TestTargetResigns: with resign, the upstream gets the request the
// provider would have sent it, signed with the operator's secret at the
// time of each attempt: a verifier of the scheme with that secret and a
// clock at the attempt takes the first attempt and one hours later, with
// the provider's headers as the receiver stored them.
func TestTargetResigns(t *testing.T) {
	type tc struct {
		name, scheme string
		headers      []queue.Header // stored with the event
		payload      string
		deliveryID   string
		eventType    string
		// want are headers the upstream must see, as they were stored.
		want map[string]string
	}
	cases := []tc{
		{name: "github", scheme: signature.SchemeGitHub, deliveryID: "72d3162e-cc78-11e3-81ab-4c9367dc0958", eventType: "push",
			headers: []queue.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "X-GitHub-Event", Value: "push"},
				{Name: "X-GitHub-Delivery", Value: "72d3162e-cc78-11e3-81ab-4c9367dc0958"}, {Name: "X-GitHub-Hook-ID", Value: "4242"}},
			payload: `{"ref":"refs/heads/main"}`,
			want:    map[string]string{"X-GitHub-Event": "push", "X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958", "X-GitHub-Hook-ID": "4242"}},
		{name: "stripe", scheme: signature.SchemeStripe, deliveryID: "evt_1Q", eventType: "invoice.paid",
			headers: []queue.Header{{Name: "Content-Type", Value: "application/json"}},
			payload: `{"id":"evt_1Q","object":"event","type":"invoice.paid"}`},
		{name: "standard", scheme: signature.SchemeStandard, deliveryID: "msg_2LhU", eventType: "invoice.paid",
			headers: []queue.Header{{Name: "Content-Type", Value: "application/json"}},
			payload: `{"type":"invoice.paid"}`, want: map[string]string{"Webhook-Id": "msg_2LhU"}},
		{name: "shopify", scheme: signature.SchemeShopify, deliveryID: "e-1:orders/paid", eventType: "orders/paid",
			headers: []queue.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "X-Shopify-Topic", Value: "orders/paid"},
				{Name: "X-Shopify-Event-Id", Value: "e-1"}, {Name: "X-Shopify-Webhook-Id", Value: "w-1"},
				{Name: "X-Shopify-Shop-Domain", Value: "acme.myshopify.com"}},
			payload: `{"id":820982911946154500}`,
			want:    map[string]string{"X-Shopify-Event-Id": "e-1", "X-Shopify-Webhook-Id": "w-1", "X-Shopify-Shop-Domain": "acme.myshopify.com"}},
		{name: "twilio signs the target's URL", scheme: "twilio", deliveryID: "sha256:00",
			headers: []queue.Header{{Name: "Content-Type", Value: "application/x-www-form-urlencoded"}},
			payload: "Body=hi&From=%2B16505550123&MessageSid=SM1"},
	}
	forEachClient(t, func(t *testing.T, c client) {
		for _, tt := range cases {
			t.Run(tt.name, func(t *testing.T) {
				secret, err := signature.NewSecret(tt.scheme)
				if err != nil {
					t.Fatal(err)
				}
				t.Setenv("CADDYWEBHOOK_TEST_RESIGN_SECRET", secret)
				handler, seen := httpTestRecorder(t)
				var now time.Time
				tgt, srv := httpTestSetup(t, c, handler, func(tgt *Target) {
					tgt.URL += "?tenant=7"
					tgt.Resign = &Resign{Scheme: tt.scheme, Secret: "{env.CADDYWEBHOOK_TEST_RESIGN_SECRET}"}
					tgt.now = func() time.Time { return now }
				})
				job := targettest.Job("http")
				job.Headers, job.Payload, job.DeliveryID, job.EventType = tt.headers, []byte(tt.payload), tt.deliveryID, tt.eventType
				job.CreatedAt = httpTestNow

				// The first attempt at once, the retry three hours on:
				// each verifies at its own time.
				for i, at := range []time.Time{httpTestNow, httpTestNow.Add(3 * time.Hour)} {
					now = at
					job.Attempt = i + 1
					if err := tgt.Deliver(t.Context(), job); err != nil {
						t.Fatalf("Deliver: %v", err)
					}
					got := <-seen
					cfg := signature.Config{Scheme: tt.scheme, Secrets: []string{secret}, Now: func() time.Time { return at }}
					if tt.scheme == "twilio" {
						cfg.PublicURL = srv.URL + "/hook"
					}
					v, err := signature.New(cfg)
					if err != nil {
						t.Fatal(err)
					}
					res, err := v.Verify(signature.Request{Method: got.method, URL: srv.URL + "/hook?tenant=7", Header: got.header, Body: got.body})
					if err != nil {
						t.Fatalf("attempt %d does not verify at its time: %v", job.Attempt, err)
					}
					if tt.scheme != "twilio" && (res.DeliveryID != tt.deliveryID || res.EventType != tt.eventType) {
						t.Errorf("attempt %d: id %q, type %q; stored %q, %q", job.Attempt, res.DeliveryID, res.EventType, tt.deliveryID, tt.eventType)
					}
					for name, want := range tt.want {
						if got.header.Get(name) != want {
							t.Errorf("attempt %d: %s = %q, want %q", job.Attempt, name, got.header.Get(name), want)
						}
					}
					if string(got.body) != tt.payload {
						t.Errorf("body %q, want the stored %q", got.body, tt.payload)
					}
					// The provider's clock, an hour later than the attempt
					// it was signed at, refuses it: the time is the attempt's.
					late := cfg
					late.Now = func() time.Time { return at.Add(time.Hour) }
					if lv, err := signature.New(late); err == nil && tt.scheme != signature.SchemeGitHub && tt.scheme != signature.SchemeShopify && tt.scheme != "twilio" {
						if _, err := lv.Verify(signature.Request{Method: got.method, URL: srv.URL + "/hook?tenant=7", Header: got.header, Body: got.body}); !errors.Is(err, signature.ErrTimestamp) {
							t.Errorf("attempt %d verifies an hour later (%v): its time is not the attempt's", job.Attempt, err)
						}
					}
				}

				config, err := json.Marshal(tgt)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(config), secret) {
					t.Errorf("config = %s: it holds the secret", config)
				}
			})
		}
	})
}

// TestTargetResignsTheTransformedBody: what is sent is what is signed,
// also when a transform reshaped the job (the target gets the new
// payload), and a static header the operator set stays.
func TestTargetResignsTheTransformedBody(t *testing.T) {
	forEachClient(t, func(t *testing.T, c client) {
		secret, _ := signature.NewSecret(signature.SchemeGitHub)
		t.Setenv("CADDYWEBHOOK_TEST_RESIGN_SECRET", secret)
		handler, seen := httpTestRecorder(t)
		tgt, _ := httpTestSetup(t, c, handler, func(tgt *Target) {
			tgt.Resign = &Resign{Scheme: signature.SchemeGitHub, Secret: "{env.CADDYWEBHOOK_TEST_RESIGN_SECRET}"}
			tgt.Headers = http.Header{"X-Origin": {"edge"}}
		})
		job := targettest.Job("http")
		job.Payload = []byte(`{"text":"push to main"}`) // as a transform leaves it
		if err := tgt.Deliver(t.Context(), job); err != nil {
			t.Fatal(err)
		}
		got := <-seen
		v, _ := signature.New(signature.Config{Scheme: signature.SchemeGitHub, Secrets: []string{secret}})
		if _, err := v.Verify(signature.Request{Method: got.method, Header: got.header, Body: got.body}); err != nil || string(got.body) != string(job.Payload) {
			t.Errorf("body %q: %v", got.body, err)
		}
		if got.header.Get("X-Origin") != "edge" || got.header.Get("X-Webhook-Delivery-Id") != job.DeliveryID {
			t.Errorf("static or metadata header missing: %v", got.header)
		}
	})
}

func TestTargetResignConfigErrors(t *testing.T) {
	t.Setenv("CADDYWEBHOOK_TEST_EMPTY", "")
	const literal = "whsec_not*base64-part-of-the-secret"
	tests := []struct {
		name   string
		target Target
		want   string
	}{
		{name: "with sign", target: Target{URL: "http://h/", SignSecret: "whsec_c2VjcmV0", Resign: &Resign{Scheme: "github", Secret: "s"}},
			want: "resign and sign_secret: choose one"},
		{name: "no scheme", target: Target{URL: "http://h/", Resign: &Resign{Secret: "s"}}, want: "resign: the scheme is required"},
		{name: "unknown scheme", target: Target{URL: "http://h/", Resign: &Resign{Scheme: "nosuch", Secret: "s"}}, want: `resign: Scheme "nosuch" unknown`},
		{name: "discord cannot be signed again", target: Target{URL: "http://h/", Resign: &Resign{Scheme: "discord", Secret: "s"}},
			want: "resign: only the provider can sign as this scheme: discord signs with the provider's private key"},
		{name: "sendgrid cannot be signed again", target: Target{URL: "http://h/", Resign: &Resign{Scheme: "sendgrid", Secret: "s"}},
			want: "resign: only the provider can sign as this scheme: sendgrid"},
		{name: "no secret", target: Target{URL: "http://h/", Resign: &Resign{Scheme: "github"}}, want: "resign github: the secret is required"},
		{name: "empty env", target: Target{URL: "http://h/", Resign: &Resign{Scheme: "github", Secret: "{env.CADDYWEBHOOK_TEST_EMPTY}"}},
			want: "resign: placeholder {env.CADDYWEBHOOK_TEST_EMPTY} is empty or unset"},
		{name: "standard secret not base64", target: Target{URL: "http://h/", Resign: &Resign{Scheme: "standard", Secret: literal}},
			want: "resign standard: sign: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tgt := tt.target
			err := targettest.Provision(t, &tgt)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "part-of-the-secret") {
				t.Errorf("error %q repeats the secret", err)
			}
		})
	}
}

func TestTargetResignCaddyfile(t *testing.T) {
	targettest.CheckCaddyfile(t, []targettest.CaddyfileCase[Target]{
		{
			Name:  "resign",
			Input: "http http://127.0.0.1:3000/webhooks/stripe {\n resign stripe {env.APP_STRIPE_SECRET}\n}",
			Want:  Target{URL: "http://127.0.0.1:3000/webhooks/stripe", Resign: &Resign{Scheme: "stripe", Secret: "{env.APP_STRIPE_SECRET}"}},
		},
		{Name: "resign without secret", Input: "http http://h/ {\n resign stripe\n}", WantErr: "resign: takes a scheme and a secret"},
		{Name: "resign three arguments", Input: "http http://h/ {\n resign stripe a b\n}", WantErr: "resign: takes a scheme and a secret"},
	})
}
