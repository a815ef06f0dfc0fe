// Package caddyfileopt reads the arguments of Caddyfile options the same
// way in every module of the plugin (the webhook global option and its
// storage lines, the receiver, the targets, the consumer endpoint): a
// number, a count, a duration, a size and a timeout, each with messages that name the
// option. It is for the plugin's own packages, no part of its public API.
package caddyfileopt

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"
)

// Int reads the one non-negative integer argument of option opt of the
// webhook global option.
func Int(d *caddyfile.Dispenser, opt string) (int, error) {
	var s string
	if !d.AllArgs(&s) {
		return 0, d.Errf("webhook: %s needs one number", opt)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, d.Errf("webhook: %s: %q is not a non-negative number", opt, s)
	}
	return n, nil
}

// Count reads the one argument of option opt of the webhook global
// option, a number of at least 1 (0 would read as the default in JSON).
func Count(d *caddyfile.Dispenser, opt string) (int, error) {
	n, err := Int(d, opt)
	if err != nil {
		return 0, err
	}
	if n < 1 {
		return 0, d.Errf("webhook: %s must be at least 1", opt)
	}
	return n, nil
}

// Duration reads the one argument of option opt of the webhook global
// option, a positive duration.
func Duration(d *caddyfile.Dispenser, opt string) (caddy.Duration, error) {
	var s string
	if !d.AllArgs(&s) {
		return 0, d.Errf("webhook: %s needs one duration", opt)
	}
	v, err := caddy.ParseDuration(s)
	if err != nil || v <= 0 {
		return 0, d.Errf("webhook: %s: %q is not a positive duration", opt, s)
	}
	return caddy.Duration(v), nil
}

// Size reads the one size argument of option opt (1MB, 64KiB, 1048576):
// more than 0, which would read as the default in JSON, and at most max.
// where starts the messages (the directive or "webhook"), example shows a
// size the option takes.
func Size(d *caddyfile.Dispenser, where, opt, example string, max uint64) (int64, error) {
	var s string
	if !d.AllArgs(&s) {
		return 0, d.Errf("%s: %s needs one size, e.g. %s", where, opt, example)
	}
	n, err := humanize.ParseBytes(s)
	if err != nil || n == 0 || n > max {
		return 0, d.Errf("%s: %s: %q is not a size such as %s", where, opt, s, example)
	}
	return int64(n), nil
}

// Timeout reads the one duration argument of a target's timeout option;
// kind names the target in the messages.
func Timeout(d *caddyfile.Dispenser, kind string) (caddy.Duration, error) {
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
