package caddywebhook

import "github.com/caddywebhook/caddywebhook/caddywebhook/rules"

// What the admin API's operations need to know of the running config:
// the targets of each source, which of them an event type goes to, and
// the largest body a source accepts. The App answers for its receivers;
// the admin API finds it as the owner of the active queue. Each receiver
// registers its source once, during its Provision (App.registerReceiver).

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

// source returns the registered source of the running config.
func (a *App) source(name string) (sourceConfig, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cfg, ok := a.sources[name]
	return cfg, ok
}
