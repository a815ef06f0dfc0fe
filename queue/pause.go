package queue

import (
	"context"
	"slices"
	"time"
)

// PauseStore is the part of Store that keeps pauses: a whole source, or one
// target of a source, whose jobs no pool claims until it is resumed. The
// pauses live in the store, so they survive a restart and hold for every
// instance sharing it; each pool reads them (one small table) and leaves
// the paused routes out of its claims, so paused jobs are never charged an
// attempt and cost the claim nothing (see PoolConfig.Paused). Receiving
// goes on while paused: Enqueue never looks at them.
type PauseStore interface {
	// Pause pauses target of source, or every target of source when
	// target is empty. Pausing what is already paused changes nothing,
	// not even its Since.
	Pause(ctx context.Context, source, target string) error

	// Resume lifts the pause Pause(source, target) made; with an empty
	// target it lifts every pause of source, the whole source's and each
	// target's. Resuming what is not paused changes nothing. It signals
	// Ready, since the resumed jobs may be due.
	Resume(ctx context.Context, source, target string) error

	// ListPauses returns every pause, by source, then target ("" first).
	ListPauses(ctx context.Context) ([]Pause, error)
}

// Pause is one pause: Target empty pauses every target of Source.
type Pause struct {
	Source string    `json:"source"`
	Target string    `json:"target,omitempty"`
	Since  time.Time `json:"since"` // when it was paused, by the store's clock
}

// Pauses is a set of pauses, for a pool's PoolConfig.Paused.
type Pauses struct {
	list    []Pause
	sources map[string]bool // whole sources paused
	routes  map[Route]bool  // single targets paused
}

// NewPauses returns the set of ps.
func NewPauses(ps []Pause) *Pauses {
	s := &Pauses{list: slices.Clone(ps), sources: make(map[string]bool), routes: make(map[Route]bool)}
	for _, p := range ps {
		if p.Target == "" {
			s.sources[p.Source] = true
		} else {
			s.routes[Route{Source: p.Source, Target: p.Target}] = true
		}
	}
	return s
}

// Paused reports whether r is paused, as a whole source or as one target.
// A nil set pauses nothing.
func (s *Pauses) Paused(r Route) bool {
	if s == nil {
		return false
	}
	return s.sources[r.Source] || s.routes[r]
}

// Empty reports whether the set pauses nothing.
func (s *Pauses) Empty() bool { return s == nil || len(s.sources)+len(s.routes) == 0 }

// List returns a copy of the pauses the set was made of.
func (s *Pauses) List() []Pause {
	if s == nil {
		return nil
	}
	return slices.Clone(s.list)
}
