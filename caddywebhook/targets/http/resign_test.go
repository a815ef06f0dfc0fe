package httptarget

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
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

// TestTargetResignsAsTheSDKsCheck: the upstream's request passes the check
// each provider documents for its handlers, computed here from the
// documentation and not with package signature, whose verifier accepts
// more than one SDK does (Polar's both keyings): the signature header
// over the bytes the provider signs, keyed as its SDK keys, with the time
// of the attempt.
func TestTargetResignsAsTheSDKsCheck(t *testing.T) {
	mac := func(h func() hash.Hash, key []byte, msg string) []byte {
		m := hmac.New(h, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	ts := strconv.FormatInt(httpTestNow.Unix(), 10)
	tests := []struct {
		name, scheme, id, contentType, body string
		// want is the header the SDK compares and the value it computes
		// from the secret, the request's headers and its body.
		header string
		want   func(secret string, h http.Header, body string) string
	}{
		// docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
		{name: "github", scheme: signature.SchemeGitHub, id: "72d3162e-cc78-11e3-81ab-4c9367dc0958", body: `{"zen":"Keep it logically awesome."}`,
			header: "X-Hub-Signature-256", want: func(s string, _ http.Header, b string) string {
				return "sha256=" + hex.EncodeToString(mac(sha256.New, []byte(s), b))
			}},
		// docs.stripe.com/webhooks (verify manually): the whole secret
		// string, whsec_ included, keys "<t>.<body>".
		{name: "stripe", scheme: signature.SchemeStripe, body: `{"id":"evt_1Q","object":"event","type":"invoice.paid"}`,
			header: "Stripe-Signature", want: func(s string, _ http.Header, b string) string {
				return "t=" + ts + ",v1=" + hex.EncodeToString(mac(sha256.New, []byte(s), ts+"."+b))
			}},
		// github.com/standard-webhooks/standard-webhooks spec: the key is
		// the base64 after whsec_.
		{name: "standard", scheme: signature.SchemeStandard, id: "msg_2LhU", body: `{"type":"invoice.paid"}`,
			header: "Webhook-Signature", want: func(s string, h http.Header, b string) string {
				key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
				return "v1," + base64.StdEncoding.EncodeToString(mac(sha256.New, key, h.Get("Webhook-Id")+"."+ts+"."+b))
			}},
		// Polar's SDKs key Standard Webhooks with the whole secret
		// string's bytes (signature/polar.go cites them).
		{name: "polar", scheme: "polar", id: "msg_2LhU", body: `{"type":"order.paid"}`,
			header: "Webhook-Signature", want: func(s string, h http.Header, b string) string {
				return "v1," + base64.StdEncoding.EncodeToString(mac(sha256.New, []byte(s), h.Get("Webhook-Id")+"."+ts+"."+b))
			}},
		// api.slack.com/authentication/verifying-requests-from-slack
		{name: "slack", scheme: "slack", body: `{"type":"event_callback","event_id":"Ev1"}`,
			header: "X-Slack-Signature", want: func(s string, h http.Header, b string) string {
				if h.Get("X-Slack-Request-Timestamp") != ts {
					return "timestamp " + h.Get("X-Slack-Request-Timestamp") + ", not the attempt's"
				}
				return "v0=" + hex.EncodeToString(mac(sha256.New, []byte(s), "v0:"+ts+":"+b))
			}},
		// shopify.dev/docs/apps/build/webhooks/subscribe/https (verify):
		// base64 of the HMAC of the raw body.
		{name: "shopify", scheme: signature.SchemeShopify, id: "e-1", body: `{"id":820982911946154500}`,
			header: "X-Shopify-Hmac-Sha256", want: func(s string, _ http.Header, b string) string {
				return base64.StdEncoding.EncodeToString(mac(sha256.New, []byte(s), b))
			}},
		// www.twilio.com/docs/usage/webhooks/webhooks-security: the URL the
		// upstream is called at, then each POST parameter's name and value
		// sorted by name, HMAC-SHA1 with the auth token, base64.
		{name: "twilio", scheme: "twilio", contentType: "application/x-www-form-urlencoded", body: "MessageSid=SM1&Body=hi&From=%2B16505550123",
			header: "X-Twilio-Signature", want: func(s string, h http.Header, b string) string {
				form, _ := url.ParseQuery(b)
				names := slices.Sorted(maps.Keys(form))
				msg := h.Get("X-Test-URL")
				for _, n := range names {
					msg += n + form.Get(n)
				}
				return base64.StdEncoding.EncodeToString(mac(sha1.New, []byte(s), msg))
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secret, err := signature.NewSecret(tt.scheme)
			if err != nil {
				t.Fatal(err)
			}
			t.Setenv("CADDYWEBHOOK_TEST_RESIGN_SECRET", secret)
			handler, seen := httpTestRecorder(t)
			tgt, srv := httpTestSetup(t, "transport", handler, func(tgt *Target) {
				tgt.URL += "?tenant=7"
				tgt.Resign = &Resign{Scheme: tt.scheme, Secret: "{env.CADDYWEBHOOK_TEST_RESIGN_SECRET}"}
			})
			job := targettest.Job("http")
			job.Payload, job.DeliveryID, job.EventType = []byte(tt.body), cmp.Or(tt.id, job.DeliveryID), "invoice.paid"
			job.Headers = []queue.Header{{Name: "Content-Type", Value: cmp.Or(tt.contentType, "application/json")}}
			if tt.scheme == signature.SchemeGitHub {
				job.Headers = append(job.Headers, queue.Header{Name: "X-GitHub-Delivery", Value: tt.id})
			}
			if err := tgt.Deliver(t.Context(), job); err != nil {
				t.Fatalf("Deliver: %v", err)
			}
			got := <-seen
			got.header.Set("X-Test-URL", srv.URL+"/hook?tenant=7")
			if want := tt.want(secret, got.header, string(got.body)); got.header.Get(tt.header) != want {
				t.Errorf("%s = %q, the SDK computes %q", tt.header, got.header.Get(tt.header), want)
			}
		})
	}
}
