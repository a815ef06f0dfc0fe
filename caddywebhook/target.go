package caddywebhook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/signature"
)

// Target is a module in the webhook.targets namespace: it delivers one job
// once. Deliver returns nil when the job is done, an error wrapped with
// queue.Permanent when no retry can help, an error wrapped with
// queue.RetryAfter when the upstream asked for a wait, and any other error for
// a transient failure. It must honour ctx: the pool cancels it when the lease
// is lost or the grace period of a shutdown runs out.
//
// Modules in the namespace are named webhook.targets.<kind>, each in its
// own package under caddywebhook/targets; their Caddyfile unmarshaler sees
// the tokens `<kind> <args…> { <options> }` of a `to` line, without the
// options the receiver keeps (name, events and the delivery settings of
// TargetConfig). A target resolves its secret-bearing fields with
// ResolveSecret.
type Target interface {
	Deliver(ctx context.Context, job *queue.Job) error
}

// The metadata headers a target that speaks HTTP adds to every forwarded
// request, so the upstream can deduplicate, trace and route without parsing
// the payload.
const (
	// HeaderDeliveryID carries the sender's delivery id (the dedupe key
	// within a source).
	HeaderDeliveryID = "X-Webhook-Delivery-Id"
	// HeaderSource carries the name of the receiver that accepted the event.
	HeaderSource = "X-Webhook-Source"
	// HeaderEventType carries the event type, when the event has one.
	HeaderEventType = "X-Webhook-Event-Type"
	// HeaderAttempt carries the attempt number, 1 for the first
	// delivery. It keeps counting across replays, so a resend never
	// repeats a number the upstream has seen answered; only a delivery cut
	// short by a stop (handed back, uncharged) is sent again with its
	// number.
	HeaderAttempt = "X-Webhook-Attempt"
	// HeaderReplay carries how many times an operator replayed the job
	// from dead; absent until the first replay, so its presence marks a
	// resend.
	HeaderReplay = "X-Webhook-Replay"
	// HeaderJobID carries the id of the job in the queue, the handle for the
	// admin API (`caddy webhook show <id>`).
	HeaderJobID = "X-Webhook-Job-Id"
)

// UnmarshalTimeout reads the one duration argument of a target's timeout
// option; kind names the target in the messages.
func UnmarshalTimeout(d *caddyfile.Dispenser, kind string) (caddy.Duration, error) {
	if !d.NextArg() {
		return 0, d.Errf("%s target: timeout: missing the duration", kind)
	}
	dur, err := caddy.ParseDuration(d.Val())
	if err != nil {
		return 0, d.Errf("%s target: timeout: %v", kind, err)
	}
	if d.NextArg() {
		return 0, d.Errf("%s target: timeout: takes one duration", kind)
	}
	return caddy.Duration(dur), nil
}

// MessageID is the Standard Webhooks message id of a job: the same for
// every attempt and every replay of one event to one target, so the upstream
// can deduplicate, and different for each target of an event. It is derived
// from names rather than the job's row id, which a new database would reuse.
func MessageID(job *queue.Job) string {
	h := sha256.New()
	for _, part := range []string{job.Source, job.DeliveryID, job.Target} {
		h.Write([]byte(strconv.Itoa(len(part))))
		h.Write([]byte{':'})
		h.Write([]byte(part))
	}
	return "msg_" + hex.EncodeToString(h.Sum(nil)[:16])
}

// SignForwarded returns the Standard Webhooks headers (webhook-id,
// webhook-timestamp, webhook-signature) that sign a forwarded payload with
// secret, a "whsec_" secret. Its error never quotes the secret.
func SignForwarded(secret, id string, ts time.Time, payload []byte) (http.Header, error) {
	return signature.Sign(signature.SchemeStandard, secret, payload, signature.SignOptions{
		ID:        id,
		Timestamp: ts,
	})
}

// ValidHeaderValue reports whether v can be sent as a header value, by
// the rule net/http's transport applies: no control character but tab.
func ValidHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// RedactSecrets replaces every occurrence of each of secrets in s. The
// targets use it on text a program or an upstream wrote, which is stored as
// a job's last error and shown by the admin API.
func RedactSecrets(s string, secrets []string) string {
	for _, v := range secrets {
		if v != "" {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	return s
}
