// Command caddy is Caddy with the caddywebhook plugin and Caddy's standard
// modules, for local development, the demo and the tests. Users build their
// own binary with xcaddy (see xcaddy.md); this one needs nothing but Go.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddywebhook/caddywebhook"
)

func main() {
	caddycmd.Main()
}
