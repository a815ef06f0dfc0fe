package signature

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestCanResign: every scheme keyed with a shared secret can be signed
// again; the asymmetric ones cannot, and say so by name.
func TestCanResign(t *testing.T) {
	t.Parallel()
	for _, name := range Schemes() {
		err := CanResign(name)
		asymmetric := registry[name].Keys == KeyPublic
		switch {
		case asymmetric && !errors.Is(err, ErrCannotResign):
			t.Errorf("CanResign(%s) = %v, want ErrCannotResign", name, err)
		case asymmetric && !strings.Contains(err.Error(), name):
			t.Errorf("CanResign(%s) = %q: the scheme is not named", name, err)
		case !asymmetric && err != nil:
			t.Errorf("CanResign(%s) = %v", name, err)
		}
	}
	for _, name := range []string{SchemeDiscord, SchemeTelnyx, SchemeSendGrid, "plaid"} {
		if !errors.Is(CanResign(name), ErrCannotResign) {
			t.Errorf("CanResign(%s) accepts an asymmetric scheme", name)
		}
	}
	if err := CanResign("nosuch"); err == nil || errors.Is(err, ErrCannotResign) {
		t.Errorf("CanResign(nosuch) = %v", err)
	}
}

// TestResignVerifies signs a request as each scheme's sender with the
// provider's secret, keeps what a receiver stores of it (the Forward
// headers and Content-Type, the delivery id and event type), and signs it
// again ten minutes later with a secret NewSecret made: a verifier with
// that secret and a clock at the attempt accepts it and reads the same
// delivery id and event type, and the provider's headers arrive as they
// came.
func TestResignVerifies(t *testing.T) {
	t.Parallel()
	const url = "https://app.example.com/webhooks"
	body := []byte(`{"id":"evt_1","type":"invoice.paid","event_id":"e-1","event":"invoice.paid","object":"page"}`)
	for _, name := range Schemes() {
		if CanResign(name) != nil || name == SchemeHMAC {
			continue // hmac signs nothing without its options
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			received := time.Now().Add(-time.Hour)
			attempt := received.Add(70 * time.Minute)
			body := body
			if name == "linear" {
				// Linear's timestamp is a field of the body, which is sent
				// as it came: only a prompt attempt is within a handler's
				// tolerance.
				body = []byte(fmt.Sprintf(`{"type":"Issue","webhookTimestamp":%d}`, received.UnixMilli()))
				attempt = received
			}
			opts := SignOptions{URL: url, Timestamp: received, EventType: "invoice.paid"}
			var (
				sent  []byte
				h     http.Header
				first Verifier
				err   error
			)
			// The first key the scheme takes: a secret's bytes, a Standard
			// Webhooks secret, a base64 one.
			for _, key := range []string{"It's a Secret to Everybody", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "c2VjcmV0LWtleS1mb3ItdGVzdHM="} {
				if sent, h, err = SignAsSender(name, key, body, opts); err == nil {
					first, err = verifierAt(Config{Scheme: name, Secrets: []string{key}, PublicURL: url}, received)
				}
				if err == nil {
					break
				}
			}
			if err != nil {
				t.Fatalf("sign as the provider: %v", err)
			}
			h.Set("X-Provider-Own", "not stored")
			// What the receiver read and stores.
			res, err := first.Verify(Request{Method: http.MethodPost, URL: url, Header: h, Body: sent})
			if err != nil {
				t.Fatalf("the provider's request does not verify: %v", err)
			}
			d, _ := Lookup(name)
			stored := http.Header{}
			for _, f := range append(d.Forward, "Content-Type") {
				if v := h.Get(f); v != "" {
					stored.Set(f, v)
				}
			}

			secret, err := NewSecret(name)
			if err != nil {
				t.Fatal(err)
			}
			out, rh, err := Resign(name, secret, sent, SignOptions{ID: res.DeliveryID, EventType: res.EventType,
				Timestamp: attempt, URL: url, Header: stored})
			if err != nil {
				t.Fatalf("Resign: %v", err)
			}
			handler, err := verifierAt(Config{Scheme: name, Secrets: []string{secret}, PublicURL: url}, attempt)
			if err != nil {
				t.Fatalf("a verifier with the new secret: %v", err)
			}
			again, err := handler.Verify(Request{Method: http.MethodPost, URL: url, Header: rh, Body: out})
			if err != nil {
				t.Fatalf("the signed-again request does not verify with the new secret: %v", err)
			}
			// A scheme whose credential is set in the body (Graph's
			// clientState) changes the body, and with it a body-hash id.
			changed := !bytes.Equal(out, sent) && strings.HasPrefix(res.DeliveryID, "sha256:")
			if (again.DeliveryID != res.DeliveryID && !changed) || again.EventType != res.EventType {
				t.Errorf("signed again: id %q, type %q; the provider's: %q, %q", again.DeliveryID, again.EventType, res.DeliveryID, res.EventType)
			}
			for name := range stored {
				if rh.Get(name) != stored.Get(name) {
					t.Errorf("header %s: %q, stored %q", name, rh.Get(name), stored.Get(name))
				}
			}
			if old, err := handler.Verify(Request{Method: http.MethodPost, URL: url, Header: h, Body: sent}); err == nil {
				t.Errorf("the handler accepts the provider's own signature: %+v", old)
			}
		})
	}
}

// verifierAt is the verifier of cfg with its clock at now, and without
// cfg.PublicURL for a scheme that does not sign the URL.
func verifierAt(cfg Config, now time.Time) (Verifier, error) {
	cfg.Now = func() time.Time { return now }
	if v, err := New(cfg); err == nil {
		return v, nil
	}
	cfg.PublicURL = ""
	return New(cfg)
}

// TestResignKeepsTheSendersHeaders: the provider's ids and headers come
// from what was stored, never made up again, and a receiver's override of
// the event type does not rewrite the provider's header.
func TestResignKeepsTheSendersHeaders(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		scheme string
		stored http.Header
		opts   SignOptions // ID and EventType: what the receiver read
		want   map[string]string
	}{
		{name: "github/delivery, event and hook from the store", scheme: SchemeGitHub,
			stored: hdr("X-GitHub-Event", "push", "X-GitHub-Delivery", "d-1", "X-GitHub-Hook-ID", "77", "Content-Type", "application/json"),
			opts:   SignOptions{ID: "d-1", EventType: "overridden"},
			want:   map[string]string{"X-GitHub-Event": "push", "X-GitHub-Delivery": "d-1", "X-GitHub-Hook-ID": "77"}},
		{name: "github/an event stored without its delivery header", scheme: SchemeGitHub,
			stored: hdr("X-GitHub-Event", "push"),
			opts:   SignOptions{ID: "d-2", EventType: "push"},
			want:   map[string]string{"X-GitHub-Event": "push", "X-GitHub-Delivery": "d-2", "Content-Type": "application/json"}},
		{name: "shopify/event id, webhook id and shop from the store", scheme: SchemeShopify,
			stored: hdr("X-Shopify-Topic", "orders/paid", "X-Shopify-Event-Id", "e-1", "X-Shopify-Webhook-Id", "w-1",
				"X-Shopify-Shop-Domain", "acme.myshopify.com", "X-Shopify-API-Version", "2026-01"),
			opts: SignOptions{ID: "e-1:orders/paid", EventType: "orders/paid"},
			want: map[string]string{"X-Shopify-Topic": "orders/paid", "X-Shopify-Event-Id": "e-1", "X-Shopify-Webhook-Id": "w-1",
				"X-Shopify-Shop-Domain": "acme.myshopify.com", "X-Shopify-Api-Version": "2026-01"}},
		{name: "shopify/a webhook id alone stays alone", scheme: SchemeShopify,
			stored: hdr("X-Shopify-Topic", "orders/paid", "X-Shopify-Webhook-Id", "w-1"),
			opts:   SignOptions{ID: "w-1", EventType: "orders/paid"},
			want:   map[string]string{"X-Shopify-Webhook-Id": "w-1"}},
		{name: "shopify/an event stored before its ids were kept", scheme: SchemeShopify,
			stored: hdr("X-Shopify-Topic", "orders/create"),
			opts:   SignOptions{ID: "e-0", EventType: "orders/create"},
			want:   map[string]string{"X-Shopify-Event-Id": "e-0", "X-Shopify-Topic": "orders/create"}},
		{name: "standard/the signed id is the delivery id", scheme: SchemeStandard,
			stored: hdr("Content-Type", "application/json"),
			opts:   SignOptions{ID: "msg_2Lh", EventType: "invoice.paid"},
			want:   map[string]string{"Webhook-Id": "msg_2Lh"}},
		{name: "twilio/the form's content type", scheme: "twilio",
			stored: hdr("Content-Type", "application/x-www-form-urlencoded", "I-Twilio-Idempotency-Token", "tok-1"),
			opts:   SignOptions{ID: "sha256:00"},
			want:   map[string]string{"Content-Type": "application/x-www-form-urlencoded", "I-Twilio-Idempotency-Token": "tok-1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.opts.Header = tc.stored
			tc.opts.URL = "https://app.example.com/hook"
			secret, _ := NewSecret(tc.scheme)
			body := []byte("From=%2B16505550123&Body=hi")
			if tc.scheme != "twilio" {
				body = []byte(`{"type":"invoice.paid"}`)
			}
			_, h, err := Resign(tc.scheme, secret, body, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range tc.want {
				if got := h.Get(name); got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
			if tc.scheme == SchemeShopify && tc.stored.Get("X-Shopify-Event-Id") == "" && tc.want["X-Shopify-Event-Id"] == "" {
				if got := h.Get("X-Shopify-Event-Id"); got != "" {
					t.Errorf("X-Shopify-Event-Id = %q, made up", got)
				}
			}
		})
	}
}

// TestSignAsSenderKeepsTheCallersHeaders: the headers a sample brings
// (its delivery id, Shopify's webhook id) are sent as they are, not
// replaced by ones the sender would make up.
func TestSignAsSenderKeepsTheCallersHeaders(t *testing.T) {
	t.Parallel()
	given := hdr("X-Shopify-Event-Id", "e-9", "X-Shopify-Webhook-Id", "w-9", "X-Shopify-Topic", "orders/paid",
		"X-Shopify-Shop-Domain", "acme.myshopify.com", "User-Agent", "Shopify-Captain-Hook")
	_, h, err := SignAsSender(SchemeShopify, "s3cret", []byte(`{}`), SignOptions{Header: given})
	if err != nil {
		t.Fatal(err)
	}
	for name := range given {
		if h.Get(name) != given.Get(name) {
			t.Errorf("%s = %q, given %q", name, h.Get(name), given.Get(name))
		}
	}
	if h.Get("X-Shopify-Hmac-Sha256") == "" || h.Get("X-Shopify-Api-Version") == "" {
		t.Errorf("the signature or a header the sender adds is missing: %v", h)
	}
}

// TestNewSecret: the forms the providers' SDKs expect, fresh each time.
func TestNewSecret(t *testing.T) {
	t.Parallel()
	cases := []struct {
		scheme string
		re     string
		decode func(string) ([]byte, error)
	}{
		{scheme: SchemeStandard, re: `^whsec_[A-Za-z0-9+/]{32}$`, decode: func(s string) ([]byte, error) {
			return base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
		}},
		{scheme: "polar", re: `^whsec_[A-Za-z0-9+/]{32}$`},
		{scheme: SchemeStripe, re: `^whsec_[0-9a-f]{64}$`},
		{scheme: SchemeGitHub, re: `^[0-9a-f]{64}$`, decode: hex.DecodeString},
		{scheme: SchemeSlack, re: `^[0-9a-f]{64}$`},
	}
	for _, tc := range cases {
		t.Run(tc.scheme, func(t *testing.T) {
			a, err := NewSecret(tc.scheme)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := NewSecret(tc.scheme)
			if !regexp.MustCompile(tc.re).MatchString(a) || a == b {
				t.Errorf("NewSecret = %q then %q, want fresh secrets matching %s", a, b, tc.re)
			}
			if tc.decode != nil {
				if raw, err := tc.decode(a); err != nil || len(raw) < 24 {
					t.Errorf("%q decodes to %d bytes, %v", a, len(raw), err)
				}
			}
		})
	}
	if _, err := NewSecret(SchemeDiscord); !errors.Is(err, ErrCannotResign) {
		t.Errorf("NewSecret(discord) = %v, want ErrCannotResign", err)
	}
}
