// Package caddywebhook is the module root of the caddywebhook Caddy plugin.
// It holds no code of its own: importing it registers the plugin's Caddy
// modules, so the form every Caddy plugin's README shows works here too:
//
//	xcaddy build --with github.com/caddywebhook/caddywebhook
//
// Naming the package that holds the modules,
// github.com/caddywebhook/caddywebhook/caddywebhook, works as well.
package caddywebhook

import (
	// The Caddy modules: the webhook_receiver handler, the webhook app, its
	// http and exec targets and its admin API.
	_ "github.com/caddywebhook/caddywebhook/caddywebhook"
	// The pull target, and the webhook_consumer handler its consumers use.
	_ "github.com/caddywebhook/caddywebhook/caddywebhook/consumer"
	_ "github.com/caddywebhook/caddywebhook/caddywebhook/targets/pull"
)
