package caddywebhook

import "github.com/caddywebhook/caddywebhook/caddywebhook/rules"

// What the admin API's operations need to know of the running config:
// the targets of each source, which of them an event type goes to, and
// the largest body a source accepts. Each receiver registers its source
// once, during its Provision (App.registerReceiver); the running config
// carries them to the admin API (runningConfig.source).

// sourceConfig is one source of the running config.
type sourceConfig struct {
	// receiver is the receiver that registered the source.
	receiver *Receiver
	// targets are the source's target names, in config order.
	targets []string
	// targetsFor returns the targets an event goes to: by its type and the
	// targets' filters.
	targetsFor func(ev *rules.Event) []string
	// maxBody is the largest body the source's receiver accepts.
	maxBody int64
}
