package queue

import "context"

// Hooks for the external tests in package queue_test.

// RunOnce exposes runOnce.
func (p *Pool) RunOnce(ctx context.Context) (int, error) { return p.runOnce(ctx) }

// ExtendOnce exposes extendOnce.
func (p *Pool) ExtendOnce(ctx context.Context) { p.extendOnce(ctx) }

// Stopping is closed once Stop has begun.
func (p *Pool) Stopping() <-chan struct{} { return p.stopping }

// RunOnce exposes runOnce.
func (h *Housekeeper) RunOnce(ctx context.Context) (int, error) { return h.runOnce(ctx) }
