package notify

import (
	"context"
	"encoding/json"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/sqlite"
)

// notifyClock is a settable clock for a store and its notifier.
type notifyClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *notifyClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *notifyClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

var notifyT0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// notifySetup opens a real SQLite store on clk and a notifier over it.
func notifySetup(t *testing.T, pendingAge time.Duration) (*Notifier, queue.Store, *notifyClock) {
	t.Helper()
	clk := &notifyClock{t: notifyT0}
	s, err := sqlite.Open(t.Context(), sqlite.Config{
		Path:        filepath.Join(t.TempDir(), "queue.db"),
		Synchronous: "normal",
		Now:         clk.Now,
	})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	n := New(Config{Store: s, PendingAge: pendingAge, Now: clk.Now})
	return n, s, clk
}

// flushAt flushes n at at and checks how many notices it stored.
func flushAt(t *testing.T, n *Notifier, at time.Time, all bool, want int) {
	t.Helper()
	sent, err := n.Flush(t.Context(), at, all)
	if err != nil {
		t.Fatalf("flush at %s: %v", at.Sub(notifyT0), err)
	}
	if sent != want {
		t.Fatalf("flush at +%s stored %d notices, want %d", at.Sub(notifyT0), sent, want)
	}
}

// storedNotices returns the notices in the store, oldest first, with their
// jobs.
func storedNotices(t *testing.T, s queue.Store) ([]Notice, []queue.JobDetail) {
	t.Helper()
	page, err := s.ListJobs(t.Context(), queue.ListParams{Filter: queue.Filter{Source: Source}, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var notices []Notice
	var details []queue.JobDetail
	for _, j := range slices.Backward(page.Jobs) {
		d, err := s.GetJob(t.Context(), j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d.Target != Target || d.EventType == "" {
			t.Errorf("notice job %d: target %q, event type %q", d.ID, d.Target, d.EventType)
		}
		var nt Notice
		if err := json.Unmarshal(d.Payload, &nt); err != nil {
			t.Fatalf("notice payload %q: %v", d.Payload, err)
		}
		if nt.Type != d.EventType {
			t.Errorf("notice type %q stored with event type %q", nt.Type, d.EventType)
		}
		notices = append(notices, nt)
		details = append(details, d)
	}
	return notices, details
}

func deadJob(id int64, source, target string) *queue.Job {
	return &queue.Job{ID: id, Source: source, Target: target, DeliveryID: "d", Attempt: 12}
}

func TestNotifierAggregatesDeadJobs(t *testing.T) {
	n, s, _ := notifySetup(t, 0)
	long := strings.Repeat("upstream answered 500: ", 40)
	dies := []struct {
		at     time.Duration
		job    *queue.Job
		errMsg string
	}{
		{0, deadJob(1, "gh", "http"), "upstream answered 503"},
		{10 * time.Second, deadJob(2, "gh", "http"), "upstream answered 502"},
		{20 * time.Second, deadJob(3, "gh", "http"), long},
		{30 * time.Second, deadJob(4, "gh", "exec"), "exit status 1"},
		// A notice's own death is never reported.
		{30 * time.Second, deadJob(5, Source, Target), "upstream answered 500"},
	}
	for _, d := range dies {
		n.JobDead(d.job, queue.Completion{Status: queue.StatusDead, Error: d.errMsg, Now: notifyT0.Add(d.at)})
	}

	flushAt(t, n, notifyT0.Add(time.Minute-time.Millisecond), false, 0)
	flushAt(t, n, notifyT0.Add(time.Minute), false, 1) // gh/http's window closed
	flushAt(t, n, notifyT0.Add(time.Minute+20*time.Second), false, 0)
	flushAt(t, n, notifyT0.Add(90*time.Second), false, 1) // gh/exec's
	flushAt(t, n, notifyT0.Add(2*time.Hour), true, 0)

	got, _ := storedNotices(t, s)
	want := []Notice{
		{Type: TypeJobDead, Source: "gh", Target: "http", Count: 3,
			FirstAt: notifyT0, LastAt: notifyT0.Add(20 * time.Second),
			JobIDs: []int64{1, 2, 3}, LastError: queue.SafeLine(long, noticeErrorLen)},
		{Type: TypeJobDead, Source: "gh", Target: "exec", Count: 1,
			FirstAt: notifyT0.Add(30 * time.Second), LastAt: notifyT0.Add(30 * time.Second),
			JobIDs: []int64{4}, LastError: "exit status 1"},
	}
	if gotJSON, wantJSON := noticeJSON(t, got), noticeJSON(t, want); gotJSON != wantJSON {
		t.Errorf("notices\n got %s\nwant %s", gotJSON, wantJSON)
	}
	if len(got) > 0 && len(got[0].LastError) > noticeErrorLen {
		t.Errorf("last error of %d bytes, want at most %d", len(got[0].LastError), noticeErrorLen)
	}

	// A window that opens after a flush is a new notice.
	n.JobDead(deadJob(6, "gh", "http"), queue.Completion{Error: "x", Now: notifyT0.Add(3 * time.Hour)})
	flushAt(t, n, notifyT0.Add(3*time.Hour+time.Minute), false, 1)
}

func noticeJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestNotifierCircuitChanged: the hook the circuit breaker calls gives one
// notice per direction and route in a window, with counts.
func TestNotifierCircuitChanged(t *testing.T) {
	n, s, clk := notifySetup(t, 0)
	route := queue.Route{Source: "stripe", Target: "orders"}
	n.CircuitChanged(route, true)
	clk.Set(notifyT0.Add(5 * time.Second))
	n.CircuitChanged(route, false)
	clk.Set(notifyT0.Add(10 * time.Second))
	n.CircuitChanged(route, true)
	n.CircuitChanged(queue.Route{Source: Source, Target: Target}, true) // never about itself
	flushAt(t, n, notifyT0.Add(time.Minute+5*time.Second), false, 2)

	got, _ := storedNotices(t, s)
	counts := map[string]int{}
	for _, nt := range got {
		if nt.Source != "stripe" || nt.Target != "orders" {
			t.Errorf("notice about %s/%s, want stripe/orders", nt.Source, nt.Target)
		}
		counts[nt.Type] = nt.Count
	}
	if want := map[string]int{TypeCircuitOpened: 2, TypeCircuitClosed: 1}; !maps.Equal(counts, want) {
		t.Errorf("counts %v, want %v", counts, want)
	}
}

// TestNotifierBacklog: a route whose oldest due pending job passes
// pending_age gets a backlog.stale notice, again only after another
// pending_age, and the notices' own backlog none.
func TestNotifierBacklog(t *testing.T) {
	n, s, clk := notifySetup(t, 15*time.Minute)
	for _, d := range []string{"d1", "d2"} {
		if _, err := s.Enqueue(t.Context(), queue.Event{Source: "gh", DeliveryID: d, Payload: []byte(`{}`), Targets: []string{"http"}}); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		at   time.Duration
		want int // notices stored by the flush after the check
	}{
		{10 * time.Minute, 0},
		{15 * time.Minute, 1},
		{20 * time.Minute, 0}, // reported 5m ago; the notice of 15m is itself pending now
		{31 * time.Minute, 1},
	}
	for _, st := range steps {
		at := notifyT0.Add(st.at)
		clk.Set(at)
		if err := n.checkBacklog(t.Context(), at); err != nil {
			t.Fatal(err)
		}
		flushAt(t, n, at, true, st.want)
	}
	got, _ := storedNotices(t, s)
	if len(got) != 2 {
		t.Fatalf("%d notices, want 2", len(got))
	}
	want := Notice{Type: TypeBacklogStale, Source: "gh", Target: "http", Count: 1,
		FirstAt: notifyT0.Add(15 * time.Minute), LastAt: notifyT0.Add(15 * time.Minute),
		Pending: 2, OldestPendingSeconds: 15 * 60}
	if noticeJSON(t, got[0]) != noticeJSON(t, want) {
		t.Errorf("notice\n got %s\nwant %s", noticeJSON(t, got[0]), noticeJSON(t, want))
	}
}

// TestNotifierStopFlushes: Stop stores the notices of open windows at once.
func TestNotifierStopFlushes(t *testing.T) {
	n, s, _ := notifySetup(t, 0)
	n.Start(t.Context())
	n.JobDead(deadJob(1, "gh", "http"), queue.Completion{Error: "boom", Now: notifyT0})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := n.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := storedNotices(t, s); len(got) != 1 || got[0].Count != 1 {
		t.Fatalf("notices after stop: %+v, want one", got)
	}
}
