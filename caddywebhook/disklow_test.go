package caddywebhook

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/sqlite"
)

func init() {
	caddy.RegisterModule(new(gatedStorage))
}

// gatedStoreControl is what gatedStorage's store does, set by the test: refuse makes
// every Enqueue answer queue.ErrDiskLow, as the SQLite store's reserve does
// once free space falls below min_free_space; an event whose delivery id
// begins with "slow-" is admitted, reported on admitted, and then waits
// for release before it is written, as one admitted just before the
// reserve filled waits for its batch's commit.
var gatedStoreControl struct {
	refuse   atomic.Bool
	admitted chan struct{}
	release  chan struct{}
}

// gatedStorage, webhook.storage.test_gated, is a real SQLite store whose
// admission the test decides: the reserve's refusal without filling a
// disk, and an admitted event held in flight across it.
type gatedStorage struct {
	Path string `json:"path"`
}

func (*gatedStorage) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "webhook.storage.test_gated", New: func() caddy.Module { return new(gatedStorage) }}
}

func (s *gatedStorage) StoreKey() string      { return "test_gated:" + s.Path }
func (s *gatedStorage) StoreName() string     { return s.Path }
func (s *gatedStorage) StoreSettings() string { return "" }
func (*gatedStorage) ClaimAhead() bool        { return true }

func (s *gatedStorage) OpenStore(ctx context.Context, keys queue.Keys) (queue.Store, error) {
	st, err := sqlite.Open(ctx, sqlite.Config{Path: s.Path})
	if err != nil {
		return nil, err
	}
	return gatedStore{st}, nil
}

type gatedStore struct{ queue.Store }

func (g gatedStore) Enqueue(ctx context.Context, ev queue.Event) (queue.EnqueueResult, error) {
	if gatedStoreControl.refuse.Load() {
		return queue.EnqueueResult{}, queue.ErrDiskLow
	}
	if strings.HasPrefix(ev.DeliveryID, "slow-") {
		gatedStoreControl.admitted <- struct{}{}
		<-gatedStoreControl.release
	}
	return g.Store.Enqueue(ctx, ev)
}

// TestDiskLowLoggedOncePerEpisode: a disk-low episode is one warning when
// it begins and one line when storing resumes, however the requests in
// flight interleave. An event admitted before the first refusal and
// written after it is not the space coming back: the old receiver said
// "back" for it and then "below" again for the next refusal, and CI's
// disk_low scenario saw the episode logged twice.
func TestDiskLowLoggedOncePerEpisode(t *testing.T) {
	gatedStoreControl.admitted, gatedStoreControl.release = make(chan struct{}), make(chan struct{})
	gatedStoreControl.refuse.Store(false)
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(gatedStoreControl.release) }) }
	t.Cleanup(func() { gatedStoreControl.refuse.Store(false) })

	h := newHarness(t)
	t.Cleanup(release) // runs before the harness's stop: cleanups run last in, first out
	h.load(t, map[string]any{"workers": 0, "storage": map[string]any{"backend": "test_gated", "path": h.dbPath}},
		githubReceiver("disk", httpTarget("", "http://127.0.0.1:9/")))
	post := func(id string) int {
		body := []byte(`{"id":"` + id + `"}`)
		return h.do(t, http.MethodPost, "/hooks/disk", signed(t, testSecret, id, "push", body), bytes.NewReader(body)).status
	}

	// Admitted, then held in flight.
	inFlight := make(chan int, 1)
	slow := []byte(`{"id":"slow-1"}`)
	req, err := http.NewRequest(http.MethodPost, "http://"+h.addr+"/hooks/disk", bytes.NewReader(slow))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = signed(t, testSecret, "slow-1", "push", slow)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			inFlight <- 0
			return
		}
		resp.Body.Close()
		inFlight <- resp.StatusCode
	}()
	testutil.Receive(t, gatedStoreControl.admitted)

	// The reserve fills: refusals, while the admitted event is written.
	gatedStoreControl.refuse.Store(true)
	if got := post("low-1"); got != http.StatusServiceUnavailable {
		t.Fatalf("while low: got %d, want 503", got)
	}
	release()
	if got := testutil.Receive(t, inFlight); got != http.StatusAccepted {
		t.Fatalf("the event admitted before the refusal: got %d, want 202", got)
	}
	if got := post("low-2"); got != http.StatusServiceUnavailable {
		t.Fatalf("still low: got %d, want 503", got)
	}

	// Space is freed.
	gatedStoreControl.refuse.Store(false)
	for _, id := range []string{"back-1", "back-2"} {
		if got := post(id); got != http.StatusAccepted {
			t.Fatalf("after the space came back: %s got %d, want 202", id, got)
		}
	}
	h.stop(t)

	var lines []string
	for _, l := range h.logs(t) {
		if msg, _ := l["msg"].(string); strings.Contains(msg, "min_free_space") {
			lines = append(lines, msg)
		}
	}
	want := []string{
		"free disk space is below min_free_space; refusing events with 503 until space is freed",
		"free disk space is back above min_free_space; storing events again",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("log lines:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}
