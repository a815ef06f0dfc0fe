package consumer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// done counts target's done jobs in the database file.
func (h *harness) done(t *testing.T, target string) int64 {
	t.Helper()
	return h.count(t, target, queue.StatusDone)
}

// TestListenExtendsInChunks: a listener's pool holding more claims than one
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
			leases := make([]queue.Claimed, tt.leases)
			for i := range leases {
				leases[i] = queue.Claimed{ID: int64(i + 1), Fence: 1}
			}
			lost, err := newAPIStore(l, time.Minute).ExtendLeases(t.Context(), queue.ExtendParams{Claims: leases, Lease: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(sizes, tt.sizes) {
				t.Errorf("extend requests of %v leases, want %v", sizes, tt.sizes)
			}
			if len(lost) != len(tt.sizes) {
				t.Errorf("lost %v; want the first claim of each of %d requests", lost, len(tt.sizes))
			}
		})
	}
}

// TestListenLosesLease: a delivery whose lease the listener can no longer
// prove, because extensions fail or the server says the claim is lost, is
// cancelled before the lease can end, and no answer is sent for it: by
// then the server may have given the job to another consumer.
func TestListenLosesLease(t *testing.T) {
	tests := []struct {
		name   string
		lease  time.Duration
		before time.Duration // the delivery must be cancelled sooner
		extend func(w http.ResponseWriter, req ExtendRequest)
	}{
		// The self-fence, at three quarters of the lease.
		{"extensions fail", 400 * time.Millisecond, 400 * time.Millisecond, func(w http.ResponseWriter, _ ExtendRequest) {
			http.Error(w, `{"error":"down"}`, http.StatusServiceUnavailable)
		}},
		// The first extension, a third of the server's lease in (the
		// listener learns it from the claim's answer), ahead of the
		// fence at 2.25 s.
		{"the claim is lost", 3 * time.Second, 2 * time.Second, func(w http.ResponseWriter, req ExtendRequest) {
			ids := make([]int64, len(req.Leases))
			for i, l := range req.Leases {
				ids[i] = l.ID
			}
			json.NewEncoder(w).Encode(ExtendResponse{Lost: ids, LeaseMS: 3000})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			claimed, acks := false, 0
			claimedAt := make(chan time.Time, 1)
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/claim":
					mu.Lock()
					first := !claimed
					claimed = true
					mu.Unlock()
					resp := ClaimResponse{LeaseMS: tt.lease.Milliseconds(), Jobs: []ClaimedJob{}}
					if first {
						resp.Jobs = []ClaimedJob{{ID: 7, Fence: 1, Attempt: 1, Source: "github", Target: "laptop", DeliveryID: "d7", Payload: []byte("{}")}}
						claimedAt <- time.Now()
					} else {
						select { // a long poll with nothing to hand out
						case <-r.Context().Done():
						case <-time.After(200 * time.Millisecond):
						}
					}
					json.NewEncoder(w).Encode(resp)
				case "/extend":
					var req ExtendRequest
					json.NewDecoder(r.Body).Decode(&req)
					tt.extend(w, req)
				case "/ack":
					mu.Lock()
					acks++
					mu.Unlock()
					json.NewEncoder(w).Encode(AckResponse{Results: []AckReply{{ID: 7, Recorded: true}}})
				}
			}))
			defer api.Close()
			cancelled := make(chan time.Time, 1)
			app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				// An app that reads the event and never answers (the
				// server sees the client go only once the body is read).
				io.Copy(io.Discard, r.Body)
				<-r.Context().Done()
				cancelled <- time.Now()
			}))
			defer app.Close()
			ctx, stop := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				done <- Listen(ctx, ListenConfig{URL: api.URL, Token: laptopToken, Target: "laptop", ForwardTo: app.URL,
					Concurrency: 1, Wait: 100 * time.Millisecond, Timeout: time.Minute})
			}()
			from := testutil.Receive(t, claimedAt)
			at := testutil.Receive(t, cancelled)
			if took := at.Sub(from); took >= tt.before {
				t.Errorf("the delivery was cancelled %v after the claim, want within %v (lease %v)", took, tt.before, tt.lease)
			}
			stop()
			if err := testutil.Receive(t, done); err != nil {
				t.Fatalf("Listen: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if acks != 0 {
				t.Errorf("%d answers sent for a job whose lease was lost, want none", acks)
			}
		})
	}
}

// TestLoggedURL: the URLs listen logs keep no user info, query or
// fragment, any of which could hold a credential.
func TestLoggedURL(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "https://hooks.example.com/consume", "https://hooks.example.com/consume"},
		{"query", "https://hooks.example.com/consume?token=s3cret", "https://hooks.example.com/consume?…"},
		{"user info", "https://me:s3cret@hooks.example.com/consume", "https://hooks.example.com/consume"},
		{"fragment", "http://localhost:3000/hook#s3cret", "http://localhost:3000/hook"},
		{"empty query", "http://localhost:3000/hook?", "http://localhost:3000/hook?…"},
		{"does not parse", "http://[::1/s3cret", "(the URL given)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := loggedURL(tt.in); got != tt.want {
				t.Errorf("loggedURL(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestListenStopHandsBackWaiting: with --concurrency 1 a listener holds a
// second job while the first runs; a stop hands back both, and the one
// that waited never reached the app.
func TestListenStopHandsBackWaiting(t *testing.T) {
	h := setup(t, "")
	var (
		mu       sync.Mutex
		requests int
		started  = make(chan struct{}, 2)
	)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests++
		mu.Unlock()
		started <- struct{}{}
		// The app hangs until the listener gives up. (Go's server sees
		// the client leave only once the body has been read.)
		io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	defer app.Close()
	h.send(t, "wait-1")
	h.send(t, "wait-2")
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Listen(ctx, ListenConfig{URL: h.base + "/consume", Token: laptopToken, Target: "laptop",
			ForwardTo: app.URL, Concurrency: 1, Wait: time.Second})
	}()
	testutil.Receive(t, started)
	// Both claimed: the second waits for the slot.
	testutil.Eventually(t, func() bool { return h.count(t, "laptop", queue.StatusRunning) == 2 },
		func() string {
			return fmt.Sprintf("%d of laptop's jobs running", h.count(t, "laptop", queue.StatusRunning))
		})
	stop()
	if err := testutil.Receive(t, done); err != nil {
		t.Fatalf("Listen: %v", err)
	}
	if n := h.count(t, "laptop", queue.StatusPending); n != 2 {
		t.Errorf("%d of laptop's jobs pending after the stop, want both handed back", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if requests != 1 {
		t.Errorf("the app got %d requests, want 1: the waiting job must not be delivered", requests)
	}
}

// count counts target's jobs of a status in the database file, through a
// second store.
func (h *harness) count(t *testing.T, target string, status queue.Status) int64 {
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
		if c.Target == target && c.Status == status {
			n += c.Jobs
		}
	}
	return n
}

// TestListenWrongURL: a --url where no webhook_consumer is mounted (a
// typo in the path, the claim endpoint itself) ends listen with an error
// that says what --url must be, and never shows the URL's query.
func TestListenWrongURL(t *testing.T) {
	h := setup(t, "")
	site := httptest.NewServer(http.NotFoundHandler()) // a site whose unknown paths answer 404
	t.Cleanup(site.Close)
	tests := []struct {
		name, url string
		want      string
	}{
		{"a typo in the path, with a query", h.base + "/consum?key=s3cret", "the answer at " + h.base + "/consum/claim?… is not a webhook_consumer's"},
		{"a path no route takes", h.base + "/elsewhere", "the answer at " + h.base + "/elsewhere/claim is not a webhook_consumer's: --url must be the address where webhook_consumer is mounted, without /claim"},
		{"a site's 404 page", site.URL + "/consume", "server answered 404 at " + site.URL + "/consume/claim: --url must be the address where webhook_consumer is mounted, without /claim"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Listen(t.Context(), ListenConfig{URL: tt.url, Token: laptopToken, Target: "laptop", ForwardTo: "http://127.0.0.1:9/", Wait: time.Second})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Listen: %v\nwant an error containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error shows the URL's query: %v", err)
			}
		})
	}
}

// TestListenStopGrace: a stop (Ctrl-C) claims nothing more and lets the
// requests the app already has finish within the grace, their answers
// recorded; the jobs not started go back uncharged; what runs past the
// grace, or past a second interrupt, is cut short and handed back
// uncharged. The listener says which it did. Before, a stop aborted the
// app's requests and the server sent them again with the same attempt
// number: the app processed them twice.
func TestListenStopGrace(t *testing.T) {
	tests := []struct {
		name  string
		grace time.Duration
		// hold is how long the app takes with each request; 0: until the
		// listener gives up on it.
		hold  time.Duration
		abort bool // a second interrupt, once the stop has begun
		// What becomes of the four jobs: done (answered within the
		// grace) and pending (handed back), and the summary line.
		wantDone, wantPending int64
		wantLine              string
	}{
		{
			name: "requests in flight finish", grace: 10 * time.Second, hold: 300 * time.Millisecond,
			wantDone: 2, wantPending: 2,
			wantLine: "stopped: 2 deliveries finished and answered; handed back 2 jobs uncharged (2 not started)",
		},
		{
			name: "the grace runs out", grace: 300 * time.Millisecond,
			wantPending: 4,
			wantLine:    "stopped: handed back 4 jobs uncharged (2 cut short, 2 not started)",
		},
		{
			name: "a second interrupt cuts the grace short", grace: time.Hour, abort: true,
			wantPending: 4,
			wantLine:    "stopped: handed back 4 jobs uncharged (2 cut short, 2 not started)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := setup(t, "")
			var (
				mu       sync.Mutex
				requests = map[string]int{}
				inApp    = make(chan struct{}, 4)
			)
			app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				mu.Lock()
				requests[r.Header.Get(caddywebhook.HeaderDeliveryID)]++
				mu.Unlock()
				inApp <- struct{}{}
				if tt.hold == 0 {
					<-r.Context().Done()
					return
				}
				time.Sleep(tt.hold)
			}))
			defer app.Close()
			for i := range 4 {
				h.send(t, fmt.Sprintf("grace-%d", i))
			}
			var log lockedBuffer
			ctx, stop := context.WithCancel(t.Context())
			abort := make(chan struct{})
			done := make(chan error, 1)
			start := time.Now()
			go func() {
				done <- Listen(ctx, ListenConfig{URL: h.base + "/consume", Token: laptopToken, Target: "laptop",
					ForwardTo: app.URL, Concurrency: 2, Wait: time.Second, Grace: tt.grace, Abort: abort, Log: &log})
			}()
			testutil.Receive(t, inApp)
			testutil.Receive(t, inApp)
			stop() // the first interrupt
			if tt.abort {
				testutil.Eventually(t, func() bool {
					return strings.Contains(log.String(), "stopping: 2 requests the app has may finish within 1h0m0s")
				},
					func() string { return "no stopping line:\n" + log.String() })
				close(abort)
			}
			if err := testutil.Receive(t, done); err != nil {
				t.Fatalf("Listen: %v", err)
			}
			if tt.abort && time.Since(start) > time.Minute {
				t.Errorf("the second interrupt did not cut the grace short: Listen took %s", time.Since(start))
			}
			if n := h.count(t, "laptop", queue.StatusDone); n != tt.wantDone {
				t.Errorf("%d of laptop's jobs done, want %d\n%s", n, tt.wantDone, log.String())
			}
			if n := h.count(t, "laptop", queue.StatusPending); n != tt.wantPending {
				t.Errorf("%d of laptop's jobs pending, want %d\n%s", n, tt.wantPending, log.String())
			}
			if !strings.Contains(log.String(), tt.wantLine) {
				t.Errorf("the listener's log lacks %q:\n%s", tt.wantLine, log.String())
			}
			// Handed back uncharged: the jobs sent back have no attempt
			// counted, so the app's next delivery of them is attempt 1.
			page := h.jobs(t, "laptop")
			for _, j := range page {
				if j.Status == queue.StatusPending && j.Attempts != 0 {
					t.Errorf("job %d (%s) handed back with %d attempts charged, want 0", j.ID, j.DeliveryID, j.Attempts)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for id, n := range requests {
				if n != 1 {
					t.Errorf("the app got %s %d times, want once", id, n)
				}
			}
		})
	}
}

// jobs lists target's jobs in the database file, through a second store.
func (h *harness) jobs(t *testing.T, target string) []queue.JobSummary {
	t.Helper()
	s, err := sqlite.Open(t.Context(), sqlite.Config{Path: h.dbPath})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	page, err := s.ListJobs(t.Context(), queue.ListParams{Filter: queue.Filter{Target: target}, Limit: queue.MaxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	return page.Jobs
}

// TestListenLine: a delivery's line sets its fields apart by two spaces,
// as docs/CONSUMER.md shows it, and a field from the sender is one line
// with its own runs of white space made one space.
func TestListenLine(t *testing.T) {
	var out strings.Builder
	at := time.Date(2026, 12, 1, 21, 47, 8, 0, time.Local)
	l := &listener{cfg: ListenConfig{Out: &out, Target: "laptop", Now: func() time.Time { return at }}}
	tests := []struct {
		name string
		job  queue.Job
		note string
		want string
	}{
		{"a delivery", queue.Job{Source: "github", EventType: "push", DeliveryID: "7d2e0c40"}, "",
			"2026-12-01 21:47:08  github → laptop  push  7d2e0c40  [200] done  12 ms\n"},
		{"no event type, a note", queue.Job{Source: "stripe", DeliveryID: "evt_1"}, "upstream\tsaid  no",
			"2026-12-01 21:47:08  stripe → laptop  -  evt_1  [200] done  12 ms  upstream said no\n"},
		{"a sender's id with spaces and a newline", queue.Job{Source: "hmac", EventType: "a  b", DeliveryID: "x\ny"}, "",
			"2026-12-01 21:47:08  hmac → laptop  a b  x y  [200] done  12 ms\n"},
	}
	// docs/CONSUMER.md shows this one.
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "CONSUMER.md"))
	if err != nil {
		t.Fatal(err)
	}
	const documented = "2026-12-01 21:47:08  github → laptop  push  7d2e0c40-cf1e-11f0-8f7e-6f1a1b0c9a3e  [200] done  12 ms\n"
	if !strings.Contains(string(doc), documented) {
		t.Errorf("docs/CONSUMER.md no longer shows the line %q", documented)
	}
	tests = append(tests, struct {
		name string
		job  queue.Job
		note string
		want string
	}{"as documented", queue.Job{Source: "github", EventType: "push", DeliveryID: "7d2e0c40-cf1e-11f0-8f7e-6f1a1b0c9a3e"}, "", documented})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out.Reset()
			l.line(&tt.job, "[200] done", 12*time.Millisecond, tt.note)
			if out.String() != tt.want {
				t.Errorf("line %q, want %q", out.String(), tt.want)
			}
		})
	}
}
