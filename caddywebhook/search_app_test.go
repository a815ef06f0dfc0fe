package caddywebhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
)

// TestReplayQueryInApp: in a running app, a replay by query's dry run
// changes nothing and sends nothing; the replay delivers exactly the
// matching events to the target, once each; and it leaves one audit log
// line and one Caddy event, neither with a body.
func TestReplayQueryInApp(t *testing.T) {
	var broken atomic.Bool
	broken.Store(true)
	var mu sync.Mutex
	got := map[string][]string{} // target → delivery ids, in order
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := strings.TrimPrefix(r.URL.Path, "/")
		if target == "billing" && broken.Load() {
			w.WriteHeader(http.StatusBadRequest) // permanent: dead at once
			return
		}
		mu.Lock()
		got[target] = append(got[target], r.Header.Get("X-Webhook-Delivery-Id"))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(up.Close)
	deliveries := func(target string) []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got[target])
	}
	for len(recordedEvents) > 0 {
		<-recordedEvents
	}

	h := newHarness(t)
	h.apps = map[string]any{"events": map[string]any{"subscriptions": []any{map[string]any{
		"events":   []string{EventBulkReplay},
		"handlers": []any{map[string]any{"handler": "webhook_test_recorder"}},
	}}}}
	h.load(t, map[string]any{"workers": 2},
		githubReceiver("shop", httpTarget("billing", up.URL+"/billing"), httpTarget("mail", up.URL+"/mail")))
	customers := map[string]string{"o-1": "A", "o-2": "B", "o-3": "A", "o-4": "C", "o-5": "A"}
	for _, id := range []string{"o-1", "o-2", "o-3", "o-4", "o-5"} {
		body := fmt.Appendf(nil, `{"customer":%q,"marker":%q}`, customers[id], testBodyMarker)
		if status := h.post(t, "shop", id, "order.paid", body); status != http.StatusAccepted {
			t.Fatalf("post %s: %d", id, status)
		}
	}
	s := h.store(t)
	testutil.Eventually(t, func() bool {
		st, err := s.Stats(t.Context(), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		n := map[queue.Status]int64{}
		for _, c := range st.Counts {
			n[c.Status] += c.Jobs
		}
		return n[queue.StatusDead] == 5 && n[queue.StatusDone] == 5
	}, func() string { return "billing's 5 jobs dead, mail's 5 done" })
	if d := deliveries("mail"); len(d) != 5 {
		t.Fatalf("mail got %v", d)
	}
	broken.Store(false)

	replay := func(query string) adminapi.ReplayQueryResponse {
		t.Helper()
		rec := httptest.NewRecorder()
		serveAdmin(rec, httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/webhook/replay?"+query, nil), "/webhook/replay")
		if rec.Code != http.StatusOK {
			t.Fatalf("POST /webhook/replay?%s: %d %s", query, rec.Code, rec.Body)
		}
		var r adminapi.ReplayQueryResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	before, err := s.Stats(t.Context(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dry := replay(where(`body.customer == "A"`, "status", "dead", "target", "billing", "dry_run", "true"))
	if dry.Replayed != 3 || dry.Events != 3 {
		t.Errorf("dry run: %+v, want 3 events, 3 to replay", dry)
	}
	after, err := s.Stats(t.Context(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(after.Counts) != fmt.Sprint(before.Counts) {
		t.Errorf("the dry run changed the counts: %+v to %+v", before.Counts, after.Counts)
	}

	r := replay(where(`body.customer == "A"`, "status", "dead", "target", "billing"))
	if r.Replayed != 3 {
		t.Fatalf("replay: %+v, want 3 replayed", r)
	}
	testutil.Eventually(t, func() bool { return len(deliveries("billing")) >= 3 }, func() string {
		return fmt.Sprintf("billing got %v, want o-1, o-3, o-5", deliveries("billing"))
	})
	for _, m := range r.Matches {
		waitStatus(t, s, m.Job, queue.StatusDone)
	}
	// Two workers deliver them: in any order, each once.
	if d := deliveries("billing"); !slices.Equal(slices.Sorted(slices.Values(d)), []string{"o-1", "o-3", "o-5"}) {
		t.Errorf("billing got %v, want o-1, o-3, o-5 once each", d)
	}
	if d := deliveries("mail"); len(d) != 5 {
		t.Errorf("mail got %v, want its 5 first deliveries only", d)
	}

	// One Caddy event, with the query and the counts.
	select {
	case e := <-recordedEvents:
		d := e.Data
		if e.Name() != EventBulkReplay || d["where"] != `body.customer == "A"` || d["target"] != "billing" || d["status"] != "dead" || d["replayed"] != 3 {
			t.Errorf("event %s %v, want the replay's query and counts", e.Name(), d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no webhook_bulk_replay event")
	}
	if len(recordedEvents) != 0 {
		t.Errorf("%d more events: the dry run emitted one?", len(recordedEvents))
	}
	lines := h.logs(t)
	var audit []map[string]any
	for _, m := range lines {
		if m["msg"] == "webhook jobs replayed by query" {
			audit = append(audit, m)
		}
	}
	if len(audit) != 1 || audit[0]["where"] != `body.customer == "A"` || audit[0]["replayed"] != float64(3) || audit[0]["events"] != float64(3) {
		t.Errorf("audit lines %v, want one with the query and counts", audit)
	}
	raw := h.rawLogs(t)
	assertNoCanaries(t, raw)
	if bytes.Contains(raw, []byte(`"customer":"A"`)) {
		t.Error("a body reached the logs")
	}
}
