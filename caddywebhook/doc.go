// Package caddywebhook is the Caddy side of the caddywebhook plugin: Caddy
// modules that make Caddy a durable webhook receiver. A signed request is
// verified (package signature) and stored with one job per target (package
// queue) before it is answered 202; a worker pool in the same process then
// delivers each job to its target, with leases, retries, dead letters and
// replay.
//
// The plugin's modules, each in the file named for it; the dashboard and
// those of the storage and targets namespaces live in packages of their
// own, which register themselves (the module root's imports.go links them
// all in):
//
//	http.handlers.webhook_receiver   Receiver     receiver.go, Caddyfile directive webhook_receiver
//	http.handlers.webhook_dashboard  Dashboard    dashboard (package dashboard), Caddyfile directive webhook_dashboard
//	webhook                          App          app.go, global option webhook { … }
//	admin.api.webhook                (admin API)  admin.go, /webhook/… on Caddy's admin endpoint
//	webhook.storage.sqlite           Storage      storage/sqlite (package sqlitestorage)
//	webhook.storage.postgres         Storage      storage/postgres (package postgresstorage)
//	webhook.targets.http             Target       targets/http (package httptarget)
//	webhook.targets.exec             Target       targets/exec (package exectarget)
//	webhook.targets.pull             Target       targets/pull (package pulltarget), its jobs left to consumers (pull.go)
//	http.handlers.webhook_consumer   Handler      consumer (package consumer), with `caddy webhook listen`
//
// The namespaces' interfaces are Storage (storage.go) and Target
// (target.go); every secret-bearing field of any module resolves through
// ResolveSecret (resolve.go).
//
// The `caddy webhook` command is package cli, a client of the admin API
// whose wire types are package adminapi. This package adds the
// caddy_webhook_* metrics (metrics.go). What outlives a config reload is
// declared in process.go; the running app's config is one value
// (running.go). caddyfile.go
// holds the Caddyfile parsing of the directive and the global option.
//
// The modules' config fields are the JSON reference; each field's doc
// comment ends with its default, and docs/CONFIGURATION.md's
// tables are checked against them by a test. docs/ARCHITECTURE.md follows a
// request and a delivery through the files and draws the job state machine.
//
// Build Caddy with the plugin with xcaddy (see xcaddy.md):
//
//	xcaddy build --with github.com/caddywebhook/caddywebhook
package caddywebhook
