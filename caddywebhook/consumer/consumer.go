// Package consumer is the webhook_consumer HTTP handler, through which
// consumers claim, extend and answer for the jobs of pull targets
// (webhook.targets.pull) over a JSON API, and the `caddy webhook listen`
// command, a consumer that forwards each job to a local URL. The API is
// documented in docs/CONSUMER.md.
package consumer

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddywebhook/caddywebhook/caddywebhook"
	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Default limits of a Handler.
const (
	DefaultMaxClaim   = 100
	DefaultMaxWait    = time.Minute
	DefaultMaxWaiting = 4
	DefaultMaxBody    = 1 << 20

	// minTokenLen is the shortest token accepted: 16 random bytes is
	// beyond guessing, and a shorter one is likely a placeholder left
	// empty or a word.
	minTokenLen = 16
)

// Handler is the webhook_consumer endpoint. The user mounts it in a site:
//
//	handle /consume/* {
//		webhook_consumer {
//			token {env.LAPTOP_TOKEN}
//			targets laptop
//		}
//	}
//
// and consumers POST JSON to <mount>/claim, <mount>/extend and
// <mount>/ack (docs/CONSUMER.md). Every request must carry one of the
// tokens as `Authorization: Bearer <token>`; any other request gets 401
// before anything else is looked at, the same answer whatever the path,
// the method, the body or the target, so it learns nothing, and no log
// line. The tokens are compared in constant time and never logged.
type Handler struct {
	// Tokens are the bearer tokens a consumer may present, usually
	// placeholders such as {env.LAPTOP_TOKEN}, resolved when the config
	// loads; each must be at least 16 bytes. Every token may consume every
	// target of Targets. Required.
	Tokens []string `json:"tokens,omitempty"`

	// Targets are the pull targets (webhook.targets.pull, named by their
	// `to` line's name) the tokens may consume. A claim names one of
	// them; an extension or answer for another target's job changes
	// nothing. Required.
	Targets []string `json:"targets,omitempty"`

	// MaxClaim caps the jobs one claim hands out; a claim asking for more
	// gets at most this many. Default: 100.
	MaxClaim int `json:"max_claim,omitempty"`

	// MaxWait caps how long a claim waits for jobs when none is ready; a
	// claim asking to wait longer waits this long. Default: 1m.
	MaxWait caddy.Duration `json:"max_wait,omitempty"`

	// MaxWaiting caps the claims of one token waiting at once; one more
	// gets 429. Default: 4.
	MaxWaiting int `json:"max_waiting,omitempty"`

	// MaxBody caps the body of a request, in bytes; a larger one gets
	// 413. Default: 1 MiB.
	MaxBody int64 `json:"max_body,omitempty"`

	logger  *zap.Logger
	app     *caddywebhook.App
	tokens  [][sha256.Size]byte // the tokens' hashes, for constant-time matching
	waiting []atomic.Int32      // claims waiting, per token
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.webhook_consumer",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision resolves the tokens, applies the defaults and finds the
// webhook app.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	h.tokens = make([][sha256.Size]byte, len(h.Tokens))
	for i, tok := range h.Tokens {
		// The error names a global placeholder ({env.*}, {file.*}) that
		// is unset, never the token nor a brace pair inside it.
		v, err := caddywebhook.ResolveSecret(ctx, fmt.Sprintf("webhook_consumer: token %d", i+1), tok)
		if err != nil {
			return err
		}
		if len(v) < minTokenLen {
			return fmt.Errorf("webhook_consumer: token %d is %d bytes, shorter than %d", i+1, len(v), minTokenLen)
		}
		h.tokens[i] = sha256.Sum256([]byte(v))
	}
	h.waiting = make([]atomic.Int32, len(h.Tokens))
	if h.MaxClaim == 0 {
		h.MaxClaim = DefaultMaxClaim
	}
	if h.MaxWait == 0 {
		h.MaxWait = caddy.Duration(DefaultMaxWait)
	}
	if h.MaxWaiting == 0 {
		h.MaxWaiting = DefaultMaxWaiting
	}
	if h.MaxBody == 0 {
		h.MaxBody = DefaultMaxBody
	}
	appVal, err := ctx.App("webhook")
	if err != nil {
		return fmt.Errorf("webhook_consumer: load the webhook app: %w", err)
	}
	h.app = appVal.(*caddywebhook.App)
	return nil
}

// Validate checks the options; each message names its option.
func (h *Handler) Validate() error {
	switch {
	case len(h.Tokens) == 0:
		return errors.New("webhook_consumer: token: at least one is required")
	case len(h.Targets) == 0:
		return errors.New("webhook_consumer: targets: at least one pull target is required")
	case h.MaxClaim < 0:
		return fmt.Errorf("webhook_consumer: max_claim is %d, must be positive", h.MaxClaim)
	case h.MaxWait < 0:
		return errors.New("webhook_consumer: max_wait must not be negative")
	case h.MaxWaiting < 0:
		return fmt.Errorf("webhook_consumer: max_waiting is %d, must be positive", h.MaxWaiting)
	case h.MaxBody < 0:
		return fmt.Errorf("webhook_consumer: max_body is %d, must be positive", h.MaxBody)
	}
	for _, t := range h.Targets {
		if t == "" {
			return errors.New("webhook_consumer: targets: a name is empty")
		}
	}
	return nil
}

// token returns the index of the configured token r presents, or -1. Every
// configured token is compared, each in constant time, so the time taken
// says nothing of which matched, or how much of one.
func (h *Handler) token(r *http.Request) int {
	auth := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(auth) <= len(prefix) || !strings.EqualFold(auth[:len(prefix)], prefix) {
		return -1
	}
	sum := sha256.Sum256([]byte(auth[len(prefix):]))
	found := -1
	for i := range h.tokens {
		if subtle.ConstantTimeCompare(sum[:], h.tokens[i][:]) == 1 {
			found = i
		}
	}
	return found
}

// ServeHTTP answers the consumer API. It never calls next: everything
// under the handler's route is the API's.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	tok := h.token(r)
	if tok < 0 {
		unauthorized(w, r)
		return nil
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		adminapi.WriteError(w, http.StatusMethodNotAllowed, "method not allowed: the consumer API takes POST", "")
		return nil
	}
	switch path.Base(r.URL.Path) {
	case "claim":
		h.serveClaim(w, r, tok)
	case "extend":
		h.serveExtend(w, r)
	case "ack":
		h.serveAck(w, r)
	default:
		adminapi.WriteError(w, http.StatusNotFound, "no such endpoint: POST claim, extend or ack", "")
	}
	return nil
}

// unauthorized answers a request without a valid token: one answer for
// every such request, whatever it asked, with nothing of it logged. A body
// left unread closes the connection, so a forged request costs its sender
// the bytes it sent and no more.
func unauthorized(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="webhook_consumer"`)
	adminapi.WriteError(w, http.StatusUnauthorized, "unauthorized", "")
}

// allowed reports whether the handler's tokens may consume target.
func (h *Handler) allowed(target string) bool { return slices.Contains(h.Targets, target) }

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
