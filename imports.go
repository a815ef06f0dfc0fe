// Package caddywebhook is the module root of the caddywebhook Caddy plugin.
// It holds no code of its own: importing it registers every one of the
// plugin's Caddy modules, so the form every Caddy plugin's README shows
// works here too:
//
//	xcaddy build --with github.com/caddywebhook/caddywebhook
//
// Naming the package github.com/caddywebhook/caddywebhook/caddywebhook
// alone registers only the modules that live in it, without a storage
// backend or a target kind; name this one.
package caddywebhook

import (
	// http.handlers.webhook_receiver, the webhook app and admin.api.webhook.
	_ "github.com/caddywebhook/caddywebhook/caddywebhook"
	// the `caddy webhook` command, a client of the admin API
	_ "github.com/caddywebhook/caddywebhook/caddywebhook/cli"
	// http.handlers.webhook_dashboard
	_ "github.com/caddywebhook/caddywebhook/caddywebhook/dashboard"
	// http.handlers.webhook_consumer, and `caddy webhook listen`
	_ "github.com/caddywebhook/caddywebhook/caddywebhook/consumer"
	// webhook.storage.postgres
	_ "github.com/caddywebhook/caddywebhook/caddywebhook/storage/postgres"
	// webhook.storage.sqlite
	_ "github.com/caddywebhook/caddywebhook/caddywebhook/storage/sqlite"
	// webhook.targets.exec
	_ "github.com/caddywebhook/caddywebhook/caddywebhook/targets/exec"
	// webhook.targets.http
	_ "github.com/caddywebhook/caddywebhook/caddywebhook/targets/http"
	// webhook.targets.pull
	_ "github.com/caddywebhook/caddywebhook/caddywebhook/targets/pull"
)
