package caddywebhook

import (
	"context"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/queue"
)

// Pause and resume. The pauses live in the store
// (queue.PauseStore), so they survive a restart and hold for every
// instance sharing a Postgres queue; each app keeps a copy, read when it
// starts, every pauseRefresh, and at once after this process's admin API
// changes it, and its pool leaves the paused routes out of its claims
// (queue.PoolConfig.Paused). Receiving goes on while paused.
//
//	POST /webhook/pause?source=S[&target=T]   pause a source, or one target
//	POST /webhook/resume?source=S[&target=T]  lift it; no target lifts all of S

// pauseRefresh is how often an app rereads the pauses: how long a pause
// made by another instance takes to hold here. The table holds a handful
// of rows, so the read is cheap.
const pauseRefresh = time.Second

// pauseSet is an app's copy of the store's pauses.
type pauseSet struct {
	store  queue.Store
	logger *zap.Logger
	cur    atomic.Pointer[queue.Pauses]
	failed atomic.Bool // the last refresh failed: log only the first failure of a run

	cancel context.CancelFunc
	done   chan struct{}
}

func newPauseSet(store queue.Store, logger *zap.Logger) *pauseSet {
	return &pauseSet{store: store, logger: logger}
}

// paused reports whether r is paused; it is the pool's PoolConfig.Paused.
func (s *pauseSet) paused(r queue.Route) bool { return s.cur.Load().Paused(r) }

// refresh rereads the pauses. On failure the last copy stays.
func (s *pauseSet) refresh(ctx context.Context) error {
	ps, err := s.store.ListPauses(ctx)
	if err != nil {
		return err
	}
	s.cur.Store(queue.NewPauses(ps))
	return nil
}

// lift drops from the copy what Resume(source, target) lifts.
func (s *pauseSet) lift(source, target string) {
	ps := s.cur.Load().List()
	ps = slices.DeleteFunc(ps, func(p queue.Pause) bool {
		return p.Source == source && (target == "" || p.Target == target)
	})
	s.cur.Store(queue.NewPauses(ps))
}

// Start rereads the pauses every pauseRefresh until Stop.
func (s *pauseSet) Start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		t := time.NewTicker(pauseRefresh)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			err := s.refresh(ctx)
			switch {
			case err != nil && ctx.Err() == nil && !s.failed.Swap(true):
				s.logger.Error("read webhook pauses; keeping the last known", zap.Error(err))
			case err == nil && s.failed.Swap(false):
				s.logger.Info("read webhook pauses again")
			}
		}
	}()
}

// Stop ends the refresh loop.
func (s *pauseSet) Stop() {
	if s.cancel != nil {
		s.cancel()
		<-s.done
	}
}

// handlePause pauses the source, or one of its targets, of the running
// config: a name the config does not have is refused, so a typo cannot
// look like a pause that holds.
func (a *adminAPI) handlePause(w http.ResponseWriter, r *http.Request, q *runningConfig, _ int64) error {
	source, target, err := pauseParams(r)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(q.Routes, func(rt queue.Route) bool { return rt.Source == source }) {
		return badParam("source", "%q is not a source of the running config", source)
	}
	if target != "" && !q.routable(source, target) {
		return badParam("target", "%q is not a target of source %q in the running config", target, source)
	}
	if err := q.Store.Pause(r.Context(), source, target); err != nil {
		return storeError(0, err)
	}
	adminLogger().Info("webhook paused", zap.String("source", source), zap.String("target", target))
	return a.writePauses(w, r, q, source, target)
}

// handleResume lifts a pause. Any name is accepted, so that a pause of a
// source or target since removed from the config can be lifted too.
func (a *adminAPI) handleResume(w http.ResponseWriter, r *http.Request, q *runningConfig, _ int64) error {
	source, target, err := pauseParams(r)
	if err != nil {
		return err
	}
	// The resume wakes the pool (Store.Ready) as it commits, before
	// writePauses could refresh the set: lift the pause from this
	// process's copy first, so the claim it wakes takes the resumed jobs
	// rather than waiting out a poll interval. A failed resume puts the
	// store's pauses back.
	if q.pauses != nil {
		q.pauses.lift(source, target)
	}
	if err := q.Store.Resume(r.Context(), source, target); err != nil {
		if q.pauses != nil {
			_ = q.pauses.refresh(context.WithoutCancel(r.Context()))
		}
		return storeError(0, err)
	}
	adminLogger().Info("webhook resumed", zap.String("source", source), zap.String("target", target))
	return a.writePauses(w, r, q, source, target)
}

func pauseParams(r *http.Request) (source, target string, err error) {
	query := r.URL.Query()
	source, target = query.Get("source"), query.Get("target")
	if source == "" {
		return "", "", badParam("source", "is required: the source to pause or resume (target narrows it to one target)")
	}
	return source, target, nil
}

// writePauses refreshes this process's pause set at once, so its pool
// heeds the change without waiting for the next refresh, and answers with
// every pause now in force. Paused says whether source/target is paused
// now: a target stays paused after its resume while its whole source is.
func (a *adminAPI) writePauses(w http.ResponseWriter, r *http.Request, q *runningConfig, source, target string) error {
	ps, err := q.Store.ListPauses(r.Context())
	if err != nil {
		return storeError(0, err)
	}
	set := queue.NewPauses(ps)
	if q.pauses != nil {
		q.pauses.cur.Store(set)
	}
	resp := adminapi.PauseResponse{Source: source, Target: target, Pauses: ps}
	if resp.Pauses == nil {
		resp.Pauses = []queue.Pause{}
	}
	if target == "" {
		resp.Paused = slices.ContainsFunc(ps, func(p queue.Pause) bool { return p.Source == source && p.Target == "" })
	} else {
		resp.Paused = set.Paused(queue.Route{Source: source, Target: target})
	}
	return adminapi.WriteJSON(w, http.StatusOK, resp)
}
