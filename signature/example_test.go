package signature_test

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/caddywebhook/caddywebhook/signature"
)

// A GitHub endpoint checked against GitHub's documented example.
func Example() {
	v, err := signature.New(signature.Config{
		Scheme:  signature.SchemeGitHub,
		Secrets: []string{"It's a Secret to Everybody"},
	})
	if err != nil {
		panic(err)
	}
	h := http.Header{}
	h.Set("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")
	h.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	h.Set("X-GitHub-Event", "push")

	res, err := v.Verify(signature.Request{Method: "POST", Header: h, Body: []byte("Hello, World!")})
	fmt.Println(res.DeliveryID, res.EventType, err)

	_, err = v.Verify(signature.Request{Method: "POST", Header: h, Body: []byte("Hello, World?")})
	fmt.Println(errors.Is(err, signature.ErrNoMatch))
	// Output:
	// 72d3162e-cc78-11e3-81ab-4c9367dc0958 push <nil>
	// true
}

// Rotating a Stripe secret: the new one is tried first, the old one still
// verifies, and SecretIndex says which did.
func ExampleNew_rotation() {
	now := time.Unix(1700000000, 0)
	v, err := signature.New(signature.Config{
		Scheme:  signature.SchemeStripe,
		Secrets: []string{"whsec_new", "whsec_old"},
		Now:     func() time.Time { return now },
	})
	if err != nil {
		panic(err)
	}
	body := []byte(`{"id":"evt_1","type":"invoice.paid"}`)
	h, _ := signature.Sign(signature.SchemeStripe, "whsec_old", body, signature.SignOptions{Timestamp: now})

	res, err := v.Verify(signature.Request{Method: "POST", Header: h, Body: body})
	fmt.Println(res.SecretIndex, res.DeliveryID, res.EventType, err)
	// Output: 1 evt_1 invoice.paid <nil>
}

// Polar signs Standard Webhooks with the secret string's bytes; SecretBoth
// accepts either kind of sender without relying on the secret's prefix.
func ExampleNew_standardWebhooks() {
	now := time.Unix(1614265330, 0)
	v, err := signature.New(signature.Config{
		Scheme:     signature.SchemeStandard,
		Secrets:    []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
		SecretMode: signature.SecretBoth,
		Now:        func() time.Time { return now },
	})
	if err != nil {
		panic(err)
	}
	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")

	res, err := v.Verify(signature.Request{Method: "POST", Header: h, Body: []byte(`{"test": 2432232314}`)})
	fmt.Println(res.DeliveryID, err)

	later := now.Add(10 * time.Minute)
	v, _ = signature.New(signature.Config{
		Scheme:  signature.SchemeStandard,
		Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
		Now:     func() time.Time { return later },
	})
	_, err = v.Verify(signature.Request{Method: "POST", Header: h, Body: []byte(`{"test": 2432232314}`)})
	fmt.Println(errors.Is(err, signature.ErrTimestamp))
	// Output:
	// msg_p5jXN8AQM9LWM0D4loKWxJek <nil>
	// true
}

// Sign produces what a sender sends, for tests and load generators.
func ExampleSign() {
	h, err := signature.Sign(signature.SchemeSlack, "8f742231b10e8888abcd99yyyzzz85a5", []byte("a=b"),
		signature.SignOptions{Timestamp: time.Unix(1531420618, 0)})
	if err != nil {
		panic(err)
	}
	fmt.Println(h.Get("X-Slack-Request-Timestamp"))
	fmt.Println(h.Get("X-Slack-Signature")[:3])
	// Output:
	// 1531420618
	// v0=
}
