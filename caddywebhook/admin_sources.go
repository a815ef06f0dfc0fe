package caddywebhook

import "slices"

// What the admin API's operations need to know of the running config:
// the targets of each source, which of them an event type goes to, and
// the largest body a source accepts. The App answers for its receivers;
// the admin API finds it as the owner of the active queue.

// sourceConfig is one source of the running config.
type sourceConfig struct {
	// targets are the source's target names, in config order.
	targets []string
	// targetsFor returns the targets an event of the given type goes to.
	targetsFor func(eventType string) []string
	// maxBody is the largest body the source's receiver accepts.
	maxBody int64
}

// runningConfig looks up a source of the running config.
type runningConfig interface {
	sourceConfig(source string) (sourceConfig, bool)
}

// addReceiver records rc for the admin API, during rc's Provision, once
// registerReceiver has accepted its source.
func (a *App) addReceiver(rc *Receiver) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.receivers == nil {
		a.receivers = make(map[string]*Receiver)
	}
	a.receivers[rc.Source] = rc
}

// sourceConfig implements runningConfig.
func (a *App) sourceConfig(source string) (sourceConfig, bool) {
	a.mu.Lock()
	rc := a.receivers[source]
	a.mu.Unlock()
	if rc == nil {
		return sourceConfig{}, false
	}
	targets := slices.Clone(rc.allTargets)
	if rc.filters != nil {
		targets = targets[:0]
		for _, f := range rc.filters {
			targets = append(targets, f.name)
		}
	}
	return sourceConfig{targets: targets, targetsFor: rc.targetsFor, maxBody: rc.maxBody}, true
}

var _ runningConfig = (*App)(nil)
