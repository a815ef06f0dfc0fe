package caddywebhook

import (
	"cmp"
	"context"
	"encoding/base64"
	"net/url"
	"slices"
	"strings"

	"github.com/caddywebhook/caddywebhook/queue"
)

// minSecretLen is the shortest configured value the redactor looks for:
// shorter ones ("1", "yes", a port) would blank out ordinary words of an
// error message.
const minSecretLen = 8

// redactor replaces every configured secret of one config load (receiver
// secrets and verify tokens, every target's header values and their
// bearer and basic parts, sign secrets, URL credentials, exec env values)
// in the error text of a delivery, before it becomes a job's last error,
// a log line, a notice or an answer of the admin API. An upstream that
// answers "invalid token <token>" echoes the token without the
// "Bearer " that a whole-header match would need, and one target's
// upstream may echo another's secret, so the redactor holds them all and
// their parts.
type redactor struct {
	secrets []string // longest first, so a secret is replaced before a part of it
}

// newRedactor builds the redactor of values and the parts a credential
// is made of.
func newRedactor(values []string) *redactor {
	r := new(redactor)
	for _, v := range values {
		r.add(v)
	}
	slices.SortFunc(r.secrets, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	r.secrets = slices.Compact(r.secrets)
	return r
}

// add adds v and its parts: for a URL (an upstream's, a DSN) the
// password and the query string and its values; for a key=value DSN its
// password; for an Authorization-style value ("Bearer <token>",
// "Basic <base64>", "token <t>"), the credential after the scheme and,
// for Basic, the decoded "user:password" and the password.
func (r *redactor) add(v string) {
	v = strings.TrimSpace(v)
	if len(v) < minSecretLen {
		return
	}
	r.secrets = append(r.secrets, v)
	if u, err := url.Parse(v); err == nil && u.Scheme != "" && u.Host != "" {
		if pw, ok := u.User.Password(); ok {
			r.part(pw)
		}
		r.part(u.RawQuery)
		for _, values := range u.Query() {
			for _, q := range values {
				r.part(q)
				r.part(url.QueryEscape(q))
			}
		}
		return
	}
	for _, f := range strings.Fields(v) {
		if pw, ok := strings.CutPrefix(f, "password="); ok {
			r.part(strings.Trim(pw, "'"))
		}
	}
	scheme, cred, ok := strings.Cut(v, " ")
	if !ok {
		return
	}
	cred = strings.TrimSpace(cred)
	r.part(cred)
	if strings.EqualFold(scheme, "basic") {
		if dec, err := base64.StdEncoding.DecodeString(cred); err == nil {
			pair := string(dec)
			r.part(pair)
			if _, pw, ok := strings.Cut(pair, ":"); ok {
				r.part(pw)
			}
		}
	}
}

// redactorLocked builds the redactor of this config load from every
// value its modules resolved from a secret-bearing field (Secrets: the
// receivers' secrets and verify tokens, the targets' URLs, headers,
// sign secrets and exec env, notify's, the DSN). a.mu is held.
func (a *App) redactorLocked() *redactor {
	return newRedactor(a.secrets.Values())
}

// part adds a part of a secret, if it is long enough to look for.
func (r *redactor) part(v string) {
	if len(v) >= minSecretLen {
		r.secrets = append(r.secrets, v)
	}
}

// redact replaces every secret in s with [redacted].
func (r *redactor) redact(s string) string {
	if r == nil {
		return s
	}
	for _, v := range r.secrets {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	return s
}

// error returns err with the secrets taken out of its text, or err itself
// when its text holds none.
func (r *redactor) error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if clean := r.redact(msg); clean != msg {
		return redactedError{err: err, msg: clean}
	}
	return err
}

// redactingHandler is the pool's handler: next's errors with the
// config's secrets taken out of their text.
type redactingHandler struct {
	next queue.Handler
	r    *redactor
}

// Handle implements queue.Handler.
func (h redactingHandler) Handle(ctx context.Context, job *queue.Job) error {
	return h.r.error(h.next.Handle(ctx, job))
}

// redactedError is an error whose text had secrets taken out. It unwraps
// to the original so the pool still reads its kind (queue.Permanent,
// queue.RetryAfter); its text is the redacted one.
type redactedError struct {
	err error
	msg string
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }

// Interface guard.
var _ queue.Handler = redactingHandler{}
