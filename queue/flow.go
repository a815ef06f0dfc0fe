package queue

import (
	"math"
	"sync"
	"time"
)

// FlowControl shapes delivery per route: before each claim the pool asks it
// which routes it may claim now and how many jobs of each, so that a job is
// claimed only when it can start at once. No claimed job waits on a rate,
// a concurrency limit or an open circuit with its lease running, and a job
// held back is not charged an attempt. Its methods are called from many
// goroutines at once and must be fast.
type FlowControl interface {
	// Plan returns the routes the next claim may take, each with the most
	// jobs it may give, and, when some route is held back for a time (a
	// rate, a circuit's cool-down), the earliest time to plan again. A
	// route left out costs the claim nothing.
	Plan(now time.Time) (routes []RouteQuota, wakeAt time.Time)
	// Claimed is told of each job a claim returned, before it starts.
	Claimed(job *Job, now time.Time)
	// Delivered is told the handler's result for a job that ran: err nil
	// or Permanent (the target answered), or a transient error.
	Delivered(job *Job, err error, now time.Time)
	// Released is told once for every claimed job when the pool lets it
	// go: finished, handed back or lost.
	Released(job *Job)
}

// RouteQuota is one route of a FlowControl plan and the most jobs of it the
// next claim may take.
type RouteQuota struct {
	Route
	Quota int
}

// Rate is a delivery rate: N deliveries per Per. The zero Rate is no limit.
type Rate struct {
	N   int
	Per time.Duration
}

// Breaker configures a route's circuit breaker.
type Breaker struct {
	// Failures is how many transient failures in a row open the circuit.
	Failures int
	// Cooldown is how long the circuit stays open before one probe is let
	// through; it doubles each time the probe fails, up to MaxCooldown.
	Cooldown    time.Duration
	MaxCooldown time.Duration
}

// FlowLimits are the limits of one route. The zero value limits nothing.
type FlowLimits struct {
	Rate        Rate     // deliveries started per period; zero: no limit
	Concurrency int      // deliveries at once; 0: no limit
	Breaker     *Breaker // nil: no circuit breaker
}

// CircuitState is the state of a route's circuit breaker.
type CircuitState int

// The states of a circuit: closed delivers; open delivers nothing until its
// cool-down ends; half-open lets one probe through, whose success closes
// the circuit and whose failure opens it again for a longer cool-down.
const (
	CircuitClosed CircuitState = iota
	CircuitOpen
	CircuitHalfOpen
)

// String returns closed, open or half_open.
func (s CircuitState) String() string {
	switch s {
	case CircuitOpen:
		return "open"
	case CircuitHalfOpen:
		return "half_open"
	}
	return "closed"
}

// FlowConfig configures a Flow.
type FlowConfig struct {
	// Routes are the routes the pool claims; a route not listed is never
	// claimed. Required.
	Routes []Route
	// Limits gives each route's limits; a route not in it is unlimited.
	Limits map[Route]FlowLimits
	// Paused, when not nil, reports the routes not to claim at all for
	// now. It must be fast. Default: nil, none.
	Paused func(Route) bool
	// CircuitChanged, when not nil, is called once for each change of a
	// circuit's state, after the change, outside the Flow's lock. cooldown
	// is the cool-down of an opening. Default: nil.
	CircuitChanged func(r Route, state CircuitState, cooldown time.Duration)
}

// Flow is the FlowControl of the limits in a FlowConfig, for the pool of
// one process: its rates, concurrency limits and circuits count what this
// pool delivers, so with several instances sharing a PostgreSQL queue each
// instance applies them on its own (a rate of 50/s with three instances
// delivers up to 150/s).
type Flow struct {
	routes  []Route
	paused  func(Route) bool
	changed func(Route, CircuitState, time.Duration)

	mu    sync.Mutex
	state map[Route]*routeFlow
}

// routeFlow is one route's limits and their state, guarded by Flow.mu.
type routeFlow struct {
	FlowLimits
	running int // claimed and not released

	// The token bucket of Rate: tokens at last, at most burst.
	tokens, burst float64
	last          time.Time

	circuit   CircuitState
	failures  int           // transient failures in a row while closed
	cooldown  time.Duration // of the current or last opening
	openUntil time.Time
	probe     int64 // the job id of the half-open probe; 0 if none is out
}

// flowBurst is how much of its rate a route may deliver at once after
// idling: a tenth of a second's worth, at least one, so the rate holds
// over any window longer than that.
const flowBurst = 100 * time.Millisecond

// NewFlow returns the Flow of cfg.
func NewFlow(cfg FlowConfig) *Flow {
	f := &Flow{
		routes:  cfg.Routes,
		paused:  cfg.Paused,
		changed: cfg.CircuitChanged,
		state:   make(map[Route]*routeFlow, len(cfg.Routes)),
	}
	for _, r := range cfg.Routes {
		l := cfg.Limits[r]
		rf := &routeFlow{FlowLimits: l}
		if l.Rate.N > 0 && l.Rate.Per > 0 {
			rf.burst = max(1, float64(l.Rate.N)*float64(flowBurst)/float64(l.Rate.Per))
			rf.tokens = rf.burst
		}
		f.state[r] = rf
	}
	return f
}

// unlimited is the quota of a route nothing limits.
const unlimited = math.MaxInt32

// Plan implements FlowControl.
func (f *Flow) Plan(now time.Time) ([]RouteQuota, time.Time) {
	var wake time.Time
	later := func(t time.Time) {
		if wake.IsZero() || t.Before(wake) {
			wake = t
		}
	}
	var changes []circuitChange
	f.mu.Lock()
	plan := make([]RouteQuota, 0, len(f.routes))
	for _, r := range f.routes {
		if f.paused != nil && f.paused(r) {
			continue
		}
		rf := f.state[r]
		q := unlimited
		switch rf.circuit {
		case CircuitOpen:
			if now.Before(rf.openUntil) {
				later(rf.openUntil)
				continue
			}
			rf.circuit = CircuitHalfOpen
			changes = append(changes, circuitChange{r, CircuitHalfOpen, 0})
			q = 1
		case CircuitHalfOpen:
			if rf.probe != 0 {
				continue
			}
			q = 1
		}
		if rf.Concurrency > 0 {
			q = min(q, rf.Concurrency-rf.running)
		}
		if rf.burst > 0 {
			rf.refill(now)
			if rf.tokens < 1 {
				// At least a millisecond: a rounding error must not
				// make the pool spin.
				d := time.Duration((1 - rf.tokens) * float64(rf.Rate.Per) / float64(rf.Rate.N))
				later(now.Add(max(d, time.Millisecond)))
			}
			q = min(q, int(rf.tokens))
		}
		if q > 0 {
			plan = append(plan, RouteQuota{Route: r, Quota: q})
		}
	}
	f.mu.Unlock()
	f.report(changes)
	return plan, wake
}

// refill adds the tokens earned since last, up to burst.
func (rf *routeFlow) refill(now time.Time) {
	if !rf.last.IsZero() && now.After(rf.last) {
		rf.tokens = min(rf.burst, rf.tokens+float64(now.Sub(rf.last))*float64(rf.Rate.N)/float64(rf.Rate.Per))
	}
	if rf.last.IsZero() || now.After(rf.last) {
		rf.last = now
	}
}

// Claimed implements FlowControl: the job takes a place and a token, and in
// a half-open circuit it is the probe.
func (f *Flow) Claimed(job *Job, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rf := f.state[Route{job.Source, job.Target}]
	if rf == nil {
		return
	}
	rf.running++
	if rf.burst > 0 {
		rf.refill(now)
		rf.tokens--
	}
	if rf.circuit == CircuitHalfOpen && rf.probe == 0 {
		rf.probe = job.ID
	}
}

// Delivered implements FlowControl: transient failures in a row open the
// circuit, a probe's result closes it or opens it again for longer.
func (f *Flow) Delivered(job *Job, err error, now time.Time) {
	r := Route{job.Source, job.Target}
	failed := err != nil && !IsPermanent(err)
	var changes []circuitChange
	f.mu.Lock()
	rf := f.state[r]
	if rf == nil || rf.Breaker == nil {
		f.mu.Unlock()
		return
	}
	b := rf.Breaker
	switch rf.circuit {
	case CircuitClosed:
		if !failed {
			rf.failures = 0
			break
		}
		rf.failures++
		if rf.failures >= max(b.Failures, 1) {
			rf.failures = 0
			rf.open(b.Cooldown, now)
			changes = append(changes, circuitChange{r, CircuitOpen, rf.cooldown})
		}
	case CircuitHalfOpen:
		if job.ID != rf.probe {
			break // a delivery that started before the circuit opened
		}
		rf.probe = 0
		if failed {
			rf.open(min(2*rf.cooldown, max(b.MaxCooldown, b.Cooldown)), now)
			changes = append(changes, circuitChange{r, CircuitOpen, rf.cooldown})
		} else {
			rf.circuit, rf.cooldown = CircuitClosed, 0
			changes = append(changes, circuitChange{r, CircuitClosed, 0})
		}
	}
	f.mu.Unlock()
	f.report(changes)
}

// open opens rf's circuit for cooldown from now.
func (rf *routeFlow) open(cooldown time.Duration, now time.Time) {
	rf.circuit, rf.cooldown, rf.openUntil = CircuitOpen, cooldown, now.Add(cooldown)
}

// Released implements FlowControl: the job gives its place back, and a
// probe that never reported lets the next one through.
func (f *Flow) Released(job *Job) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rf := f.state[Route{job.Source, job.Target}]
	if rf == nil {
		return
	}
	rf.running--
	if rf.probe == job.ID {
		rf.probe = 0
	}
}

// Circuits returns the routes whose circuit is not closed, and their state.
func (f *Flow) Circuits() map[Route]CircuitState {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[Route]CircuitState)
	for r, rf := range f.state {
		if rf.circuit != CircuitClosed {
			out[r] = rf.circuit
		}
	}
	return out
}

// circuitChange is one change of a circuit, reported after the lock.
type circuitChange struct {
	route    Route
	state    CircuitState
	cooldown time.Duration
}

func (f *Flow) report(changes []circuitChange) {
	if f.changed == nil {
		return
	}
	for _, c := range changes {
		f.changed(c.route, c.state, c.cooldown)
	}
}
