package httptarget

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddywebhook/caddywebhook/caddywebhook"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/signature"
)

// Resign makes the forwarded request the one the provider would have sent
// the upstream: signed as the sender of Scheme signs, with a secret of the
// operator's choosing instead of the provider's, so a handler that
// verifies with the provider's SDK (stripe.webhooks.constructEvent,
// GitHub's X-Hub-Signature-256 check, Shopify's HMAC helper) takes it
// unchanged once it is configured with that secret. The request carries
// the provider's headers as they came (the event type and delivery id
// headers and the others the receiver stores: Shopify's shop domain and
// webhook id, GitHub's hook id), its signature and, for schemes that sign
// a time, the time of the attempt: a retry hours later is as fresh as
// the first attempt. A transform's body is what is signed, as it is what
// is sent; Twilio's signature covers the target's URL.
//
// Schemes whose signature only the provider can make (Discord's and
// Telnyx's ed25519, SendGrid's ECDSA, Plaid's JWS) cannot be signed again:
// a config that asks for one does not load.
type Resign struct {
	// The signature scheme whose sender the request imitates, as a
	// receiver's scheme names it: github, stripe, standard, shopify,
	// slack, twilio, paddle, polar, … It need not be the source's own
	// scheme. Required.
	Scheme string `json:"scheme,omitempty"`

	// The secret to sign with, in the form the scheme's SDK expects
	// ("whsec_…" for Stripe and Standard Webhooks); usually a placeholder
	// such as {env.APP_WEBHOOK_SECRET}. `caddy webhook listen --print-secret
	// --resign <scheme>` prints a fresh one. The resolved secret is kept
	// out of the config, logs, errors and the store. Required.
	Secret string `json:"secret,omitempty"`
}

// resigner is a target's Resign, resolved.
type resigner struct {
	scheme string
	secret string
	url    string // the URL the sender would have signed: the target's, as the upstream sees it
}

// provisionResign resolves the secret of t.Resign and the URL it signs.
func (t *Target) provisionResign(ctx caddy.Context, parsed *url.URL) error {
	if t.Resign == nil {
		return nil
	}
	secret, err := caddywebhook.ResolveSecret(ctx, "resign", t.Resign.Secret)
	if err != nil {
		return err
	}
	r := &resigner{scheme: t.Resign.Scheme, secret: secret, url: t.url}
	if parsed != nil {
		// The upstream sees neither the userinfo nor, with a Host header,
		// the URL's host: it checks a signature over the URL it was
		// called at.
		u := *parsed
		u.User = nil
		if t.host != "" {
			u.Host = t.host
		}
		r.url = u.String()
	}
	t.resign = r
	t.redact = append(t.redact, secret)
	return nil
}

// validateResign checks the scheme, that it can be signed again, and the
// secret, by signing once.
func (t *Target) validateResign() error {
	if t.Resign == nil {
		return nil
	}
	if t.SignSecret != "" {
		return errors.New("resign and sign_secret: choose one (resign signs as the provider signs, for a handler that verifies with the provider's SDK; sign_secret signs with Standard Webhooks under the target's own message id)")
	}
	if t.Resign.Scheme == "" {
		return fmt.Errorf("resign: the scheme is required, one of %s", strings.Join(signature.Schemes(), ", "))
	}
	if err := signature.CanResign(t.Resign.Scheme); err != nil {
		return fmt.Errorf("resign: %w", err)
	}
	if t.resign == nil || t.resign.secret == "" {
		return fmt.Errorf("resign %s: the secret is required", t.Resign.Scheme)
	}
	// Signing once here turns a malformed secret (a Standard Webhooks one
	// that is not base64) into a config error instead of a dead job per
	// delivery. Sign's errors never quote the key.
	if _, _, err := signature.Resign(t.resign.scheme, t.resign.secret, []byte("{}"), signature.SignOptions{
		ID: "validate", Timestamp: time.Unix(0, 0), URL: t.resign.url,
	}); err != nil {
		return fmt.Errorf("resign %s: %w", t.Resign.Scheme, err)
	}
	return nil
}

// resigned returns the body to send for job and the headers that sign
// it: the signature's, and those of the provider's headers the stored
// ones lack. The stored headers themselves are already on the request.
func (r *resigner) resigned(job *queue.Job, now time.Time) ([]byte, http.Header, error) {
	stored := make(http.Header, len(job.Headers))
	for _, h := range job.Headers {
		stored.Add(h.Name, h.Value)
	}
	body, h, err := signature.Resign(r.scheme, r.secret, job.Payload, signature.SignOptions{
		ID: job.DeliveryID, EventType: job.EventType, Timestamp: now,
		Method: http.MethodPost, URL: r.url, Header: stored,
	})
	if err != nil {
		return nil, nil, queue.Permanent(fmt.Errorf("sign request as %s: %w", r.scheme, err))
	}
	for name, values := range h {
		if v := stored[name]; len(v) == len(values) && (len(v) == 0 || v[0] == values[0]) {
			// Already on the request, or replaced there by a static
			// header the operator configured.
			delete(h, name)
		}
	}
	return body, h, nil
}
