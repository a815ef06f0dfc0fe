// Package forward holds what the target modules share about the request
// or program they forward a job to: the Standard Webhooks message id and
// signature of a forwarded payload, the header-value check, and the
// redaction of secrets from what an upstream or a program echoes back. It
// is for the plugin's own packages, no part of its public API.
package forward

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/signature"
)

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

// Sign returns the Standard Webhooks headers (webhook-id,
// webhook-timestamp, webhook-signature) that sign a forwarded payload with
// secret, a "whsec_" secret. Its error never quotes the secret.
func Sign(secret, id string, ts time.Time, payload []byte) (http.Header, error) {
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
