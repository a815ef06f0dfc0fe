package caddywebhook

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/queue"
)

// The rekey of a store (POST, GET and DELETE /webhook/rekey): the store's
// Rekey, run in the background. It belongs to the store, shared across
// reloads, not to one config: a reload neither stops nor restarts it (a
// config whose first key differs stops it, queue.ErrKeysChanged), and it
// ends when the store closes. The walk's position is stored, so a rekey
// stopped for any reason resumes where it was when started again.

// rekeyRun is a store's rekey: the one running, or the last one.
type rekeyRun struct {
	mu     sync.Mutex
	state  adminapi.RekeyResponse
	cancel context.CancelFunc // set while running
	done   chan struct{}      // closed when the running one returns
}

// snapshot returns the state, its slices copied.
func (r *rekeyRun) snapshot() adminapi.RekeyResponse {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.state
	st.Progress.MissingKeys = append([]string(nil), st.Progress.MissingKeys...)
	return st
}

// start begins a rekey of s with p, unless one runs; ok is false then.
func (r *rekeyRun) start(s queue.Store, p queue.RekeyParams, logger *zap.Logger) (adminapi.RekeyResponse, bool) {
	r.mu.Lock()
	if r.state.Running {
		r.mu.Unlock()
		return r.snapshot(), false
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	r.state = adminapi.RekeyResponse{Running: true, ToPlainText: p.ToPlainText, NoVacuum: p.NoVacuum, Started: time.Now().UTC()}
	done := r.done
	r.mu.Unlock()

	p.Progress = func(prog queue.RekeyProgress) {
		r.mu.Lock()
		r.state.Progress = prog
		r.mu.Unlock()
		if prog.Phase == "vacuum" && prog.VacuumSeconds > 0 {
			logger.Warn("rekey: vacuuming the queue file; the write lock is held meanwhile, and senders whose events cannot be stored in time get 503 and send again",
				zap.Float64("estimated_seconds", prog.VacuumSeconds))
		}
	}
	logger.Info("rekey started", zap.Bool("to_plain_text", p.ToPlainText), zap.Bool("no_vacuum", p.NoVacuum))
	go func() {
		defer close(done)
		prog, err := s.Rekey(ctx, p)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.state.Running, r.state.Ended, r.cancel = false, time.Now().UTC(), nil
		if prog.Phase != "" {
			r.state.Progress = prog
		}
		fields := []zap.Field{zap.String("target", prog.Target), zap.Int64("resealed", prog.Resealed),
			zap.Int64("remaining", prog.Remaining), zap.Int64("skipped", prog.Skipped), zap.Strings("missing_keys", prog.MissingKeys)}
		switch {
		case errors.Is(err, context.Canceled):
			r.state.Stopped = true
			logger.Info("rekey stopped; it resumes where it stopped when started again", fields...)
		case err != nil:
			r.state.Error = err.Error()
			logger.Error("rekey failed", append(fields, zap.Error(err))...)
		default:
			logger.Info("rekey done", append(fields, zap.Bool("nothing_to_do", prog.Nothing), zap.String("vacuum", prog.Vacuum))...)
		}
	}()
	return r.snapshot(), true
}

// stop stops the running rekey, if any, and waits for it to return.
func (r *rekeyRun) stop() adminapi.RekeyResponse {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	return r.snapshot()
}

// handleRekey starts a rekey of the running config's store (POST), shows
// it (GET) or stops it (DELETE).
func (a *adminAPI) handleRekey(w http.ResponseWriter, r *http.Request, q *runningConfig, _ int64) error {
	s, ok := q.Store.(*sharedStore)
	if !ok {
		return apiError(http.StatusNotImplemented, "this store has no rekey")
	}
	switch r.Method {
	case http.MethodDelete:
		return adminapi.WriteJSON(w, http.StatusOK, s.rekey.stop())
	case http.MethodPost:
	default:
		return adminapi.WriteJSON(w, http.StatusOK, s.rekey.snapshot())
	}
	query := r.URL.Query()
	var p queue.RekeyParams
	var err error
	if p.ToPlainText, err = boolParam(query.Get, "to_plain_text"); err != nil {
		return err
	}
	if p.NoVacuum, err = boolParam(query.Get, "no_vacuum"); err != nil {
		return err
	}
	// Refused here rather than by the store in the background, so the
	// caller reads why at once.
	switch {
	case p.ToPlainText && (q.keys.Ring == nil || !q.keys.DecryptOnly):
		return apiError(http.StatusConflict, "a rekey to plain text needs the keys listed with decrypt_only in the encryption block, so that nothing new is sealed meanwhile")
	case !p.ToPlainText && !q.keys.Sealing():
		return apiError(http.StatusConflict, "no key to seal with: add an encryption block with a key (or, to write everything plain, rekey --to-plain-text with decrypt_only)")
	}
	st, started := s.rekey.start(s.Store, p, caddy.Log().Named("webhook"))
	if !started {
		return apiError(http.StatusConflict, "a rekey is running already: GET /webhook/rekey shows its progress, DELETE stops it")
	}
	return adminapi.WriteJSON(w, http.StatusAccepted, st)
}
