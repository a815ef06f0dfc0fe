package consumer

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/caddyfileopt"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("webhook_consumer", parseDirective)
	// Beside the other terminal handlers: it answers everything under its
	// route, after the site's authentication has run.
	httpcaddyfile.RegisterDirectiveOrder("webhook_consumer", httpcaddyfile.Before, "respond")
}

func parseDirective(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	c := new(Handler)
	if err := c.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	return c, nil
}

// UnmarshalCaddyfile sets up the handler from the directive:
//
//	webhook_consumer [<matcher>] {
//		token <token>                # repeatable; usually {env.NAME}
//		targets <name…>              # the pull targets the tokens may consume
//		max_claim <n>                # jobs per claim, at most; default 100
//		max_wait <duration>          # longest wait of a claim; default 1m
//		max_waiting <n>              # claims waiting at once per token; default 4
//		max_body <size>              # request body, at most; default 1MiB
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.Errf("webhook_consumer: unexpected argument %q; options go in a block", d.Val())
	}
	for d.NextBlock(0) {
		switch opt := d.Val(); opt {
		case "token":
			var tok string
			if !d.AllArgs(&tok) {
				return d.Errf("webhook_consumer: token takes one value")
			}
			h.Tokens = append(h.Tokens, tok)
		case "targets":
			names := d.RemainingArgs()
			if len(names) == 0 {
				return d.Errf("webhook_consumer: targets needs at least one name")
			}
			h.Targets = append(h.Targets, names...)
		case "max_claim", "max_waiting":
			var v string
			if !d.AllArgs(&v) {
				return d.Errf("webhook_consumer: %s takes one number", opt)
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return d.Errf("webhook_consumer: %s: %q is not a number of at least 1", opt, v)
			}
			if opt == "max_claim" {
				h.MaxClaim = n
			} else {
				h.MaxWaiting = n
			}
		case "max_wait":
			var v string
			if !d.AllArgs(&v) {
				return d.Errf("webhook_consumer: max_wait takes one duration")
			}
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur <= 0 {
				return d.Errf("webhook_consumer: max_wait: %q is not a positive duration", v)
			}
			h.MaxWait = caddy.Duration(dur)
		case "max_body":
			n, err := caddyfileopt.Size(d, "webhook_consumer", opt, "1MiB", 1<<40)
			if err != nil {
				return err
			}
			h.MaxBody = n
		default:
			return d.Errf("webhook_consumer: unknown option %q; known: token, targets, max_claim, max_wait, max_waiting, max_body", opt)
		}
	}
	return nil
}

// Interface guard
var _ caddyfile.Unmarshaler = (*Handler)(nil)
