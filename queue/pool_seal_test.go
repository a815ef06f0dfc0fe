package queue_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/queuetest"
	"github.com/caddywebhook/caddywebhook/queue/seal"
)

// TestPoolUnreadableJob checks that a job whose event is sealed under a
// key the store no longer lists never reaches its handler: its attempt is
// recorded dead, the error naming the key, whatever attempts it had left;
// and that once the key is back a replay delivers it.
func TestPoolUnreadableJob(t *testing.T) {
	s := setup(t, nil)
	ctx := t.Context()
	keys := func(ids ...string) queue.Keys { return queue.Keys{Ring: queuetest.Ring(t, ids...)} }
	// The store's secret goes under k2 by a rekey; k1 then seals one
	// event, and is removed.
	for _, step := range []func() error{
		func() error { return s.SetKeys(ctx, keys("k2")) },
		func() error { _, err := s.Rekey(ctx, queue.RekeyParams{}); return err },
		func() error { return s.SetKeys(ctx, keys("k1", "k2")) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	id := enqueue(t, s, "d1", "mail")
	if err := s.SetKeys(ctx, keys("k2")); err != nil {
		t.Fatal(err)
	}

	var calls atomic.Int64
	var payload atomic.Value
	rec := newRecorder(t, 4)
	p := newPool(t, queue.PoolConfig{
		Store: s, Workers: 1, MaxAttempts: 5, Observer: rec,
		Handler: queue.HandlerFunc(func(_ context.Context, j *queue.Job) error {
			calls.Add(1)
			payload.Store(string(j.Payload))
			return nil
		}),
	})
	runOnce(t, p, 1)
	f := rec.nextFinished(t)
	var mk *seal.MissingKeyError
	if calls.Load() != 0 || f.c.Status != queue.StatusDead || !errors.As(f.err, &mk) || mk.KeyID != "k1" {
		t.Fatalf("handler ran %d times; completion %s, error %v; want dead at the first attempt, naming k1, the handler never run", calls.Load(), f.c.Status, f.err)
	}
	if d := getJob(t, s, id); d.Status != queue.StatusDead || !strings.Contains(d.LastError, "k1") {
		t.Errorf("stored job: %s, %q; want dead naming k1", d.Status, d.LastError)
	}

	if err := s.SetKeys(ctx, keys("k2", "k1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Replay(ctx, id); err != nil {
		t.Fatal(err)
	}
	runOnce(t, p, 1)
	if f := rec.nextFinished(t); f.c.Status != queue.StatusDone || calls.Load() != 1 || payload.Load() != `{"n":1}` {
		t.Errorf("after the replay: %s, handler ran %d times with %v; want delivered as sent", f.c.Status, calls.Load(), payload.Load())
	}
}
