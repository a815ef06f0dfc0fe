package consumer

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/caddywebhook"
	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/sqlite"
)

// TestListenConcurrency: a listener holds more jobs than it runs, so that
// the app's next job is at hand while answers travel, but it never sends
// the local app more than --concurrency requests at once, and it delivers
// every job once.
func TestListenConcurrency(t *testing.T) {
	tests := []struct {
		name        string
		concurrency int
		events      int
	}{
		{name: "one at a time", concurrency: 1, events: 6},
		{name: "three at once", concurrency: 3, events: 24},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := setup(t, "")
			var (
				mu            sync.Mutex
				now, most     int
				seen          = map[string]int{}
				allDelivered  = make(chan struct{})
				deliveredOnce sync.Once
			)
			app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				now++
				most = max(most, now)
				mu.Unlock()
				// Long enough for every slot to fill while the others run.
				time.Sleep(40 * time.Millisecond)
				mu.Lock()
				now--
				seen[r.Header.Get(caddywebhook.HeaderDeliveryID)]++
				if len(seen) == tt.events {
					deliveredOnce.Do(func() { close(allDelivered) })
				}
				mu.Unlock()
			}))
			defer app.Close()
			for i := range tt.events {
				h.send(t, fmt.Sprintf("conc-%d", i))
			}
			ctx, stop := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				done <- Listen(ctx, ListenConfig{URL: h.base + "/consume", Token: laptopToken, Target: "laptop",
					ForwardTo: app.URL, Concurrency: tt.concurrency, Wait: time.Second})
			}()
			testutil.Receive(t, allDelivered)
			// Every answer recorded: on disk, all of laptop's jobs are done.
			recorded := int64(0)
			testutil.Eventually(t, func() bool {
				recorded = h.done(t, "laptop")
				return recorded == int64(tt.events)
			}, func() string { return fmt.Sprintf("%d of laptop's %d jobs done", recorded, tt.events) })
			stop()
			if err := testutil.Receive(t, done); err != nil {
				t.Fatalf("Listen: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if most != tt.concurrency {
				t.Errorf("the app had %d requests at once at most, want %d", most, tt.concurrency)
			}
			for id, n := range seen {
				if n != 1 {
					t.Errorf("%s delivered %d times, want once", id, n)
				}
			}
		})
	}
}

// done counts target's done jobs in the database file, through a second
// store.
func (h *harness) done(t *testing.T, target string) int64 {
	t.Helper()
	s, err := sqlite.Open(t.Context(), sqlite.Config{Path: h.dbPath})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Stats(t.Context(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, c := range st.Counts {
		if c.Target == target && c.Status == queue.StatusDone {
			n += c.Jobs
		}
	}
	return n
}

// TestListenExtendsInChunks: a listener holding more claims than one
// extend may name (maxLeases) extends them in several requests, each
// within the server's cap, and reads every answer's lost claims.
func TestListenExtendsInChunks(t *testing.T) {
	tests := []struct {
		name   string
		leases int
		sizes  []int
	}{
		{name: "one request", leases: 10, sizes: []int{10}},
		{name: "exactly the cap", leases: maxLeases, sizes: []int{maxLeases}},
		{name: "past the cap", leases: 2*maxLeases + 5, sizes: []int{maxLeases, maxLeases, 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sizes []int
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var req ExtendRequest
				if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.URL.Path != "/extend" {
					t.Errorf("%s: %v", r.URL.Path, err)
				}
				sizes = append(sizes, len(req.Leases))
				// The first claim of every request is lost.
				json.NewEncoder(w).Encode(ExtendResponse{Lost: []int64{req.Leases[0].ID}, LeaseMS: 60000})
			}))
			defer srv.Close()
			l, err := newListener(ListenConfig{URL: srv.URL, Token: laptopToken, Target: "laptop", ForwardTo: "http://127.0.0.1:9/"})
			if err != nil {
				t.Fatal(err)
			}
			leases := make([]Lease, tt.leases)
			for i := range leases {
				leases[i] = Lease{ID: int64(i + 1), Fence: 1}
			}
			lost, leaseMS, extended := l.extend(t.Context(), leases)
			if !slices.Equal(sizes, tt.sizes) {
				t.Errorf("extend requests of %v leases, want %v", sizes, tt.sizes)
			}
			if len(lost) != len(tt.sizes) || leaseMS != 60000 || len(extended) != tt.leases {
				t.Errorf("lost %d, lease %d ms, %d extended; want %d lost, 60000, %d", len(lost), leaseMS, len(extended), len(tt.sizes), tt.leases)
			}
		})
	}
}
