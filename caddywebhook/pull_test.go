package caddywebhook

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/pullside"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/queuetest"
	"github.com/caddywebhook/caddywebhook/queue/sqlite"
)

// fakePull is a pull target, as webhook.targets.pull is; that module's
// package imports this one, so the tests cannot.
type fakePull struct{}

func (fakePull) Deliver(context.Context, *queue.Job) error { return errors.New("never delivered") }
func (fakePull) PulledByConsumers()                        {}

// pushTarget is a target the pool delivers to.
type pushTarget struct{}

func (pushTarget) Deliver(context.Context, *queue.Job) error { return nil }

// shapingTarget wraps a target as a content rule's transform does: it
// upper-cases payloads, and fails on a payload of "bad".
type shapingTarget struct{ next Target }

func (s shapingTarget) Deliver(ctx context.Context, job *queue.Job) error {
	j, err := s.shapeJob(job)
	if err != nil {
		return queue.Permanent(err)
	}
	return s.next.Deliver(ctx, j)
}
func (s shapingTarget) unwrapTarget() Target { return s.next }
func (s shapingTarget) shapeJob(job *queue.Job) (*queue.Job, error) {
	if string(job.Payload) == "bad" {
		return nil, errors.New("transform: no field x")
	}
	j := *job
	j.Payload = bytes.ToUpper(job.Payload)
	return &j, nil
}

func TestPullRoutes(t *testing.T) {
	t.Parallel()
	route := func(target string) queue.Route { return queue.Route{Source: "github", Target: target} }
	targets := map[queue.Route]Target{
		route("http"):         pushTarget{},
		route("laptop"):       fakePull{},
		route("shaped"):       shapingTarget{next: fakePull{}},
		route("shaped-http"):  shapingTarget{next: pushTarget{}},
		route("twice-shaped"): shapingTarget{next: shapingTarget{next: fakePull{}}},
	}
	routes := []queue.Route{route("http"), route("laptop"), route("shaped"), route("shaped-http"), route("twice-shaped")}
	pulled, pooled := pullRoutes(routes, targets)
	if want := []queue.Route{route("http"), route("shaped-http")}; !slices.Equal(pooled, want) {
		t.Errorf("pool's routes %v, want %v: a pull target's jobs, wrapped or not, are never the pool's", pooled, want)
	}
	for _, name := range []string{"laptop", "shaped", "twice-shaped"} {
		if rs := pulled[name]; len(rs) != 1 || rs[0] != route(name) {
			t.Errorf("pull routes of %s = %v, want its one route", name, rs)
		}
	}
	if len(pulled) != 3 {
		t.Errorf("pull targets %v, want laptop, shaped and twice-shaped", pulled)
	}
}

// TestPullShape: a consumer is handed the job as the transform made it, and
// a job whose transform fails goes dead at once instead of being handed out.
func TestPullShape(t *testing.T) {
	t.Parallel()
	store, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "queue.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	for id, body := range map[string]string{"d1": "hello", "d2": "bad"} {
		if _, err := store.Enqueue(t.Context(), queue.Event{Source: "github", DeliveryID: id, Payload: []byte(body), Targets: []string{"laptop"}}); err != nil {
			t.Fatal(err)
		}
	}
	route := queue.Route{Source: "github", Target: "laptop"}
	app := &App{}
	p := app.newPull(&delivery{store: &sharedStore{Store: store}, targets: map[queue.Route]Target{route: shapingTarget{next: fakePull{}}},
		obs: queue.NopObserver{}}, map[string][]queue.Route{"laptop": {route}}, nil)
	jobs, err := p.Claim(t.Context(), "laptop", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || string(jobs[0].Payload) != "HELLO" || jobs[0].DeliveryID != "d1" {
		t.Fatalf("handed out %+v, want d1 alone, transformed", jobs)
	}
	page, err := store.ListJobs(t.Context(), queue.ListParams{Filter: queue.Filter{Status: queue.StatusDead}})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Jobs) != 1 || page.Jobs[0].DeliveryID != "d2" || page.Jobs[0].LastError != "transform: no field x" {
		t.Errorf("dead jobs %+v, want d2 with the transform's error", page.Jobs)
	}
	// The stored event is still the sender's bytes.
	d, err := store.GetJob(t.Context(), jobs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Payload) != "hello" {
		t.Errorf("stored payload %q, want the original", d.Payload)
	}
}

// TestPullRedactsErrors: what a consumer answers, and what a transform
// fails with, is stored with the config's secrets taken out, as the
// pool's own attempts are: a consumer may echo an upstream that echoed
// the request's credentials.
func TestPullRedactsErrors(t *testing.T) {
	t.Parallel()
	const secret = "target-token-0123456789"
	store, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "queue.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	route := queue.Route{Source: "github", Target: "laptop"}
	p := (&App{}).newPull(&delivery{store: &sharedStore{Store: store}, targets: map[queue.Route]Target{route: fakePull{}},
		redact: newRedactor([]string{secret}), obs: queue.NopObserver{}}, map[string][]queue.Route{"laptop": {route}}, nil)
	tests := []struct {
		name    string
		outcome pullside.AckOutcome
		status  queue.Status
	}{
		{"retry", pullside.AckRetry, queue.StatusPending},
		{"dead", pullside.AckDead, queue.StatusDead},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := store.Enqueue(t.Context(), queue.Event{Source: "github", DeliveryID: tt.name, Payload: []byte("{}"), Targets: []string{"laptop"}}); err != nil {
				t.Fatal(err)
			}
			jobs, err := p.Claim(t.Context(), "laptop", 1)
			if err != nil || len(jobs) != 1 {
				t.Fatalf("Claim = %d jobs, %v; want 1", len(jobs), err)
			}
			res, err := p.Answer(t.Context(), []string{"laptop"}, []pullside.Ack{{Claim: jobs[0].Claimed(), Outcome: tt.outcome,
				Error: "upstream answered 401: bad token " + secret}})
			if err != nil || len(res) != 1 || !res[0].Recorded || res[0].Status != tt.status {
				t.Fatalf("Answer = %+v, %v; want recorded, %s", res, err, tt.status)
			}
			d, err := store.GetJob(t.Context(), jobs[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			if want := "upstream answered 401: bad token [redacted]"; d.LastError != want {
				t.Errorf("stored error %q, want %q", d.LastError, want)
			}
		})
	}
}

// TestPullSealed: a consumer is handed an encrypted event decrypted, and a
// job of an event under a key the store no longer lists goes dead at once,
// naming the key, instead of being handed out.
func TestPullSealed(t *testing.T) {
	t.Parallel()
	ring := func(ids ...string) queue.Keys { return queue.Keys{Ring: queuetest.Ring(t, ids...)} }
	store, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "queue.db"), Keys: ring("k2")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	enqueue := func(id string) {
		if _, err := store.Enqueue(t.Context(), queue.Event{Source: "github", DeliveryID: id, Payload: []byte("body of " + id), Targets: []string{"laptop"}}); err != nil {
			t.Fatal(err)
		}
	}
	enqueue("d1")
	// d2 under k1, which then goes: the store's secret stays under k2.
	if err := store.SetKeys(t.Context(), ring("k1", "k2")); err != nil {
		t.Fatal(err)
	}
	enqueue("d2")
	if err := store.SetKeys(t.Context(), ring("k2")); err != nil {
		t.Fatal(err)
	}
	route := queue.Route{Source: "github", Target: "laptop"}
	p := (&App{}).newPull(&delivery{store: &sharedStore{Store: store}, targets: map[queue.Route]Target{route: fakePull{}},
		obs: queue.NopObserver{}}, map[string][]queue.Route{"laptop": {route}}, nil)
	jobs, err := p.Claim(t.Context(), "laptop", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].DeliveryID != "d1" || string(jobs[0].Payload) != "body of d1" {
		t.Fatalf("handed out %+v, want d1 alone, decrypted", jobs)
	}
	page, err := store.ListJobs(t.Context(), queue.ListParams{Filter: queue.Filter{Status: queue.StatusDead}})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Jobs) != 1 || page.Jobs[0].DeliveryID != "d2" || !strings.Contains(page.Jobs[0].LastError, "key k1") {
		t.Errorf("dead jobs %+v, want d2 with an error naming k1", page.Jobs)
	}
}
