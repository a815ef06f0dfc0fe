package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/sqlite"
	"github.com/caddywebhook/caddywebhook/signature"
)

func TestPercentile(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = ms(i + 1)
	}
	tests := []struct {
		name string
		lat  []time.Duration
		q    float64
		want time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", []time.Duration{ms(7)}, 0.99, ms(7)},
		{"median of 100", hundred, 0.50, ms(50)},
		{"p99 of 100", hundred, 0.99, ms(99)},
		{"max of 100", hundred, 1, ms(100)},
		{"p99 of 3 is the max", []time.Duration{ms(1), ms(2), ms(3)}, 0.99, ms(3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.lat, tt.q); got != tt.want {
				t.Errorf("percentile(%v) = %s, want %s", tt.q, got, tt.want)
			}
		})
	}
}

func TestReadResponse(t *testing.T) {
	tests := []struct {
		name      string
		raw       string
		status    int
		closeConn bool
		wantErr   bool
	}{
		{"empty body", "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n", 202, false, false},
		{"body with length", "HTTP/1.1 401 Unauthorized\r\nContent-Length: 5\r\n\r\nhello", 401, false, false},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3;x=y\r\nabc\r\n0\r\n\r\n", 200, false, false},
		{"connection close", "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", 503, true, false},
		{"no length runs to the end", "HTTP/1.0 200 OK\r\n\r\n", 200, true, false},
		{"no content on 204", "HTTP/1.1 204 No Content\r\n\r\n", 204, false, false},
		{"garbage", "SSH-2.0-OpenSSH\r\n", 0, false, true},
		{"truncated body", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 0, false, true},
		{"bad length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A good response twice back to back: the first must be
			// consumed exactly. A bad one alone, so nothing pads it.
			input := tt.raw
			if !tt.wantErr {
				input += tt.raw
			}
			br := bufio.NewReader(strings.NewReader(input))
			status, closeConn, err := readResponse(br)
			if (err != nil) != tt.wantErr {
				t.Fatalf("readResponse: err = %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if status != tt.status || closeConn != tt.closeConn {
				t.Errorf("readResponse = %d, close %v; want %d, close %v", status, closeConn, tt.status, tt.closeConn)
			}
			if !closeConn {
				if status2, _, err := readResponse(br); err != nil || status2 != tt.status {
					t.Errorf("second response = %d, %v; the first was not consumed exactly", status2, err)
				}
			}
		})
	}
}

// verifyingServer is a webhook endpoint in the shape of the receiver: it
// verifies the GitHub signature and answers 202, or 401, and remembers the
// delivery ids it accepted. Every tenth request it closes the connection
// after answering, as a server may.
type verifyingServer struct {
	v     signature.Verifier
	mu    sync.Mutex
	ids   map[string]int
	sizes map[int]int
	n     int
}

func (s *verifyingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	res, err := s.v.Verify(signature.Request{Method: "POST", Header: r.Header, Body: body})
	if err != nil {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	s.mu.Lock()
	s.ids[res.DeliveryID]++
	s.sizes[len(body)]++
	s.n++
	closeConn := s.n%10 == 0
	s.mu.Unlock()
	if closeConn {
		w.Header().Set("Connection", "close")
	}
	w.WriteHeader(http.StatusAccepted)
}

func setupServer(t *testing.T, secret string) (*verifyingServer, string) {
	t.Helper()
	v, err := signature.New(signature.Config{Scheme: signature.SchemeGitHub, Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	s := &verifyingServer{v: v, ids: make(map[string]int), sizes: make(map[int]int)}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, strings.TrimPrefix(srv.URL, "http://")
}

func TestLoadRun(t *testing.T) {
	tests := []struct {
		name       string
		signWith   string
		servers    int
		wantStatus int
	}{
		{"signed requests are accepted", "right", 1, http.StatusAccepted},
		{"a wrong secret is refused", "wrong", 1, http.StatusUnauthorized},
		{"connections go round-robin over the servers", "right", 2, http.StatusAccepted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var srvs []*verifyingServer
			var addrs []string
			for range tt.servers {
				srv, addr := setupServer(t, "right")
				srvs, addrs = append(srvs, srv), append(addrs, addr)
			}
			l := load{addrs: addrs, path: "/hook", secret: tt.signWith, tag: "t", bodySize: 300,
				conns: 3, warmup: 20 * time.Millisecond, duration: 150 * time.Millisecond, want: http.StatusAccepted}
			res, err := l.run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.sent == 0 || res.transport != 0 {
				t.Fatalf("sent %d, transport errors %d; want some requests and no errors", res.sent, res.transport)
			}
			if res.statuses[tt.wantStatus] != res.sent {
				t.Errorf("statuses %v, want all %d", res.statuses, tt.wantStatus)
			}
			if int64(len(res.lat)) > res.sent || res.okWindow > res.ok {
				t.Errorf("window counts %d latencies, %d ok exceed the totals %d, %d", len(res.lat), res.okWindow, res.sent, res.ok)
			}
			ids := res.acceptedIDs(l.tag)
			seen := 0
			for i, srv := range srvs {
				srv.mu.Lock()
				defer srv.mu.Unlock()
				seen += len(srv.ids)
				if tt.wantStatus == http.StatusAccepted && len(srv.ids) == 0 {
					t.Errorf("server %d got no request", i)
				}
				for id := range srv.ids {
					// Connection c of tag t sends t-c-seq, to server c%n.
					c, _, _ := strings.Cut(strings.TrimPrefix(id, l.tag+"-"), "-")
					if atoi(t, c)%len(srvs) != i {
						t.Errorf("server %d got %s, from connection %s", i, id, c)
					}
					if _, ok := ids[id]; !ok {
						t.Errorf("server accepted %s, which the load did not count", id)
					}
					if srv.ids[id] != 1 {
						t.Errorf("id %s accepted %d times by the server, want 1", id, srv.ids[id])
					}
				}
				for size := range srv.sizes {
					if size != l.bodySize {
						t.Errorf("server saw a body of %d bytes, want %d", size, l.bodySize)
					}
				}
			}
			if len(ids) != seen || int64(len(ids)) != res.ok {
				t.Fatalf("load counted %d accepted (%d unique ids), the servers accepted %d ids", res.ok, len(ids), seen)
			}
		})
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}

func TestUpstream(t *testing.T) {
	u, err := startUpstream()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.close() })
	u.reset(2 * time.Millisecond)
	post := func(id string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, u.url(), strings.NewReader("{}"))
		if id != "" {
			req.Header.Set("X-Webhook-Delivery-Id", id)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		id   string
		want int
	}{{"a", 200}, {"b", 200}, {"a", 200}, {"", 400}} {
		if got := post(tc.id); got != tc.want {
			t.Errorf("POST with id %q = %d, want %d", tc.id, got, tc.want)
		}
	}
	ids, repeats := u.snapshot()
	if len(ids) != 2 || ids["a"] != 2 || ids["b"] != 1 || repeats != 1 || u.answered.Load() != 3 {
		t.Errorf("recorded %v, %d repeats, %d answered; want a×2, b×1, 1 repeat, 3 answered", ids, repeats, u.answered.Load())
	}
	u.reset(0)
	if ids, _ := u.snapshot(); len(ids) != 0 || u.answered.Load() != 0 {
		t.Errorf("after reset: %v, %d answered; want nothing", ids, u.answered.Load())
	}
}

// setupSeeded seeds a database of n jobs and returns its path.
func setupSeeded(t *testing.T, n, bodySize int) (string, seedResult) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "q.db")
	s, err := seed(context.Background(), path, "seed", n, bodySize, source, targetName, queue.StatusPending)
	if err != nil {
		t.Fatal(err)
	}
	return path, s
}

// checkSeedClaims claims every job of a seed of n jobs of bodySize bytes
// from st, the real store on the seeded database, and checks that they
// are all due and routed and that the first decodes as the receiver would
// have stored it.
func checkSeedClaims(ctx context.Context, t *testing.T, st queue.Store, n, bodySize int) {
	t.Helper()
	jobs, err := st.Claim(ctx, queue.ClaimParams{
		Owner: "test", Limit: 2 * n, Lease: time.Minute, Now: time.Now(),
		Routes: []queue.Route{{Source: source, Target: targetName}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != n {
		t.Fatalf("claimed %d jobs, want %d (every seeded job due and routed)", len(jobs), n)
	}
	j := jobs[0]
	if j.DeliveryID != "seed-0000000001" || j.EventType != "push" || len(j.Payload) != bodySize || j.Attempt != 1 {
		t.Errorf("first job: id %q, type %q, %d-byte payload, attempt %d", j.DeliveryID, j.EventType, len(j.Payload), j.Attempt)
	}
	want := []queue.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "X-GitHub-Event", Value: "push"}}
	if len(j.Headers) != 2 || j.Headers[0] != want[0] || j.Headers[1] != want[1] {
		t.Errorf("headers %v, want %v", j.Headers, want)
	}
	if !strings.HasPrefix(string(j.Payload), `{"seed":"0000000001","pad":"x`) || !strings.HasSuffix(string(j.Payload), `x"}`) {
		t.Errorf("payload %q is not the seed's JSON", j.Payload)
	}
}

// TestSeedMatchesStore proves that seeded rows are rows the real store can
// claim, decode and deliver: the seed writes SQL of its own against the
// store's schema, so this is where a schema change would show.
func TestSeedMatchesStore(t *testing.T) {
	const n, bodySize = 40, 512
	path, s := setupSeeded(t, n, bodySize)
	if s.jobs != n || s.lastID != n {
		t.Fatalf("seed = %d jobs, last id %d; want %d, %d", s.jobs, s.lastID, n, n)
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	checkSeedClaims(ctx, t, st, n, bodySize)
	// A second seed appends after the first.
	s2, err := seed(ctx, filepath.Join(t.TempDir(), "other.db"), "seed", 3, bodySize, source, targetName, queue.StatusPending)
	if err != nil || s2.jobs != 3 {
		t.Errorf("seed of a second file = %d jobs, %v", s2.jobs, err)
	}
}

// TestQueryPlans holds the load test's own reads to indexes whose cost does
// not grow with the pending backlog, so measuring the backlog phase does
// not slow it.
func TestQueryPlans(t *testing.T) {
	path, _ := setupSeeded(t, 10, 256)
	q, err := openQueueDB(path)
	if err != nil {
		t.Fatal(err)
	}
	defer q.close()
	tests := []struct {
		name, query string
		args        []any
		want        string
	}{
		{"done count", sqlDone, nil, "COVERING INDEX jobs_done"},
		{"phase's jobs", sqlStatusAfter, []any{int64(5)}, "INDEX jobs_event (event_id>?)"},
		{"phase's events", sqlEventsAfter, []any{int64(5)}, "INTEGER PRIMARY KEY (rowid>?)"},
		{"done ids", sqlDoneIDs, nil, "INDEX jobs_done"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := q.plan(context.Background(), tt.query, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(plan, tt.want) {
				t.Errorf("plan:\n%s\nwant it to use %s", plan, tt.want)
			}
		})
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		check   func(o options) bool
		wantErr string
	}{
		{"defaults", nil, func(o options) bool {
			return o.duration == 10*time.Second && o.rounds == 3 && o.conns == 32 && o.bodySize == 512 && o.backlog == 1_000_000 && len(o.phases) == len(allPhases)
		}, ""},
		{"smoke shrinks the defaults", []string{"-smoke"}, func(o options) bool {
			return o.smoke && o.duration == time.Second && o.rounds == 1 && o.conns == 8 && o.backlog == 20_000
		}, ""},
		{"smoke keeps explicit values", []string{"-smoke", "-c", "4", "-backlog", "500"}, func(o options) bool {
			return o.conns == 4 && o.backlog == 500 && o.duration == time.Second
		}, ""},
		{"phases", []string{"-phases", "e2e, static"}, func(o options) bool {
			return len(o.phases) == 2 && o.phases[0] == "e2e" && o.phases[1] == "static"
		}, ""},
		{"profile keeps the work directory", []string{"-profile", "ingest"}, func(o options) bool { return o.keep }, ""},
		{"unknown phase", []string{"-phases", "ingest,warp"}, nil, `unknown phase "warp"`},
		{"tiny body", []string{"-body", "10"}, nil, "-body 10"},
		{"rounds too short", []string{"-d", "1s", "-rounds", "20"}, nil, "at least 100ms a round"},
		{"stray argument", []string{"now"}, nil, "unexpected arguments"},
		{"against", []string{"-caddy", "/b/new", "-against", "/b/old", "-pairs", "5"}, func(o options) bool {
			return o.against == "/b/old" && o.caddy == "/b/new" && o.pairs == 5
		}, ""},
		{"against needs caddy", []string{"-against", "/b/old"}, nil, "-against needs -caddy"},
		{"against itself", []string{"-caddy", "/b/x", "-against", "/b/x"}, nil, "is -caddy itself"},
		{"no pairs", []string{"-caddy", "/b/new", "-against", "/b/old", "-pairs", "0"}, nil, "-pairs 0"},
		{"pairs alone", []string{"-pairs", "2"}, nil, "-pairs applies to -against only"},
		{"against with dir", []string{"-caddy", "/b/new", "-against", "/b/old", "-dir", "/tmp/x"}, nil, "-dir does not apply"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseFlags(tt.args, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(o) {
				t.Errorf("options %+v", o)
			}
		})
	}
}

func TestFigures(t *testing.T) {
	rep := newReport(options{backlog: 1_000_000})
	add := func(name string, f func(pr *phaseResult)) {
		pr := rep.phase(name)
		pr.finished = true
		pr.load = &loadResult{}
		f(pr)
	}
	add("static", func(pr *phaseResult) { pr.rate = 30000 })
	add("ingest", func(pr *phaseResult) { pr.rate = 12000; pr.p99 = 4 * time.Millisecond; pr.peakRSS = 100 << 20 })
	add("e2e", func(pr *phaseResult) {
		pr.rate, pr.deliveredRate, pr.backlogSlope, pr.backlogEnd, pr.peakRSS = 10000, 9000, 2000, 50000, 100<<20
	})
	add("slow1", func(pr *phaseResult) { pr.load, pr.ref, pr.deliveredRate = nil, slowRef1, 195 })
	add("backlog-ingest", func(pr *phaseResult) { pr.rate = 9000; pr.peakRSS = 140 << 20 })
	add("backlog-e2e", func(pr *phaseResult) { pr.rate, pr.deliveredRate, pr.peakRSS = 9000, 8000, 120<<20 })
	add("ingest-traced", func(pr *phaseResult) { pr.firstRate, pr.secondRate = 10000, 9800 })
	add(rulesPhase, func(pr *phaseResult) { pr.firstRate, pr.secondRate = 8000, 7200 })

	got := map[string]figure{}
	for _, f := range rep.figures() {
		got[f.name] = f
	}
	tests := []struct {
		name    string
		ratio   float64
		ok      bool
		missing string
	}{
		{"ingest / static", 0.4, false, ""},
		{"p99 group commit / p99 one commit", 0, false, "baseline not run"},
		// 0.9 delivered, but the backlog grows 20% of the accepted rate.
		{"e2e delivered / accepted", 0.9, false, ""},
		{"5 ms upstream, 1 worker", 0.975, true, ""},
		{"5 ms upstream, 32 workers", 0, false, "slow32 not run"},
		{"backlog 1M: ingest / empty", 0.75, false, ""},
		{"backlog 1M: delivered / empty", 8000.0 / 9000, true, ""},
		{"backlog 1M: RSS growth", 40.0 / 32, false, ""},
		{"traceparent: ingest, traced / plain", 0.98, true, ""},
		{"traceparent: e2e, traced / plain", 0, false, "e2e-traced not run"},
		{"2 KB ingest with a filter / without", 0.9, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, ok := got[tt.name]
			if !ok {
				t.Fatalf("no figure %q in %v", tt.name, got)
			}
			if f.missing != tt.missing {
				t.Fatalf("missing = %q, want %q", f.missing, tt.missing)
			}
			if tt.missing != "" {
				return
			}
			if d := f.ratio - tt.ratio; d > 1e-9 || d < -1e-9 || f.ok != tt.ok {
				t.Errorf("ratio %.4f ok %v, want %.4f ok %v", f.ratio, f.ok, tt.ratio, tt.ok)
			}
		})
	}
	if missed := rep.missedTargets(); len(missed) != 5 {
		t.Errorf("missed targets %q, want 5", missed)
	}
}

func TestPhaseRounds(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	pr := &phaseResult{name: "e2e"}
	// Two rounds of unequal length and speed: the figures are totals over
	// totals, not means of the rounds' rates.
	pr.addLoad(&loadResult{window: 2 * time.Second, sent: 120, ok: 110, okWindow: 100,
		statuses: map[int]int64{202: 110, 503: 10}, lat: []time.Duration{ms(3), ms(1)}})
	pr.addLoad(&loadResult{window: time.Second, sent: 60, ok: 60, okWindow: 50,
		statuses: map[int]int64{202: 60}, lat: []time.Duration{ms(2), ms(9)}})
	pr.delivered, pr.deliveredWindow = 90, 3*time.Second
	pr.cpuSeconds, pr.cpuWindow = 1.5, 3*time.Second
	pr.slopes = []float64{10, 30}
	pr.finish()

	tests := []struct {
		name      string
		got, want float64
	}{
		{"rate", pr.rate, 150.0 / 3},
		{"delivered/s", pr.deliveredRate, 30},
		{"cores", pr.cores, 0.5},
		{"slope", pr.backlogSlope, 20},
		{"p50 ms", float64(pr.p50) / float64(time.Millisecond), 2},
		{"p99 ms", float64(pr.p99) / float64(time.Millisecond), 9},
		{"sent", float64(pr.load.sent), 180},
		{"503s", float64(pr.load.statuses[503]), 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := tt.got - tt.want; d > 1e-9 || d < -1e-9 {
				t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
			}
		})
	}
	if !pr.finished {
		t.Error("finish did not mark the phase finished")
	}
}

// TestPairedTrace: a paired load sends a trace context in every other
// slice of the window, and its halves' rates are each over their own
// share of it.
func TestPairedTrace(t *testing.T) {
	l := load{pairEvery: 250 * time.Millisecond}
	from := time.Unix(1000, 0)
	tests := []struct {
		name   string
		at     time.Duration
		traced bool
	}{
		{"warmup", -100 * time.Millisecond, false},
		{"first slice", 10 * time.Millisecond, false},
		{"second slice", 260 * time.Millisecond, true},
		{"third slice", 500 * time.Millisecond, false},
		{"fourth slice", 999 * time.Millisecond, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := l.secondAt(from.Add(tt.at), from); got != tt.traced {
				t.Errorf("secondAt(%v) = %v, want %v", tt.at, got, tt.traced)
			}
		})
	}
	for _, tt := range []struct {
		window, traced time.Duration
	}{{time.Second, 500 * time.Millisecond}, {1100 * time.Millisecond, 500 * time.Millisecond}, {1400 * time.Millisecond, 650 * time.Millisecond}} {
		if got := l.secondShare(tt.window); got != tt.traced {
			t.Errorf("secondShare(%v) = %v, want %v", tt.window, got, tt.traced)
		}
	}
	first := load{pairEvery: 250 * time.Millisecond, secondFirst: true}
	if !first.secondAt(from.Add(10*time.Millisecond), from) || first.secondAt(from.Add(260*time.Millisecond), from) {
		t.Error("a load that starts traced does not alternate from a traced first slice")
	}
	if got := first.secondShare(1100 * time.Millisecond); got != 600*time.Millisecond {
		t.Errorf("secondShare of a load that starts traced = %v, want 600ms", got)
	}
	r := loadResult{window: time.Second, windowSecond: 500 * time.Millisecond, okWindow: 1900, okSecond: 900}
	if plain, traced := r.pairRates(); plain != 2000 || traced != 1800 {
		t.Errorf("pairRates = %v, %v; want 2000, 1800", plain, traced)
	}
	if plain, traced := (&loadResult{window: time.Second, okWindow: 5}).pairRates(); plain != 0 || traced != 0 {
		t.Errorf("an unpaired load's pairRates = %v, %v; want none", plain, traced)
	}
}

func TestComparisonSummary(t *testing.T) {
	c := &comparison{
		phases: []string{"static", "ingest", "e2e", "slow1"},
		runsA: []buildRun{
			{"static": 20000, "ingest": 8000, "e2e": 4000},
			{"static": 25000, "ingest": 9000, "e2e": 5000},
			{"static": 30000, "ingest": 10000, "e2e": 6000},
		},
		runsB: []buildRun{
			{"static": 20000, "ingest": 10000, "e2e": 3000},
			{"static": 25000, "ingest": 8000, "e2e": 6000},
			{"static": 30000, "ingest": 12000, "e2e": 6000},
		},
	}
	tests := []struct {
		name                         string
		phase                        string
		meanA, meanB, ratioA, ratioB float64
		bAhead, pairs                int
	}{
		{"static has no ratio of its own", "static", 25000, 25000, 0, 0, 0, 3},
		{"ingest, B ahead twice", "ingest", 9000, 10000, (0.4 + 0.36 + 1.0/3) / 3, (0.5 + 0.32 + 0.4) / 3, 2, 3},
		{"a tie is not ahead", "e2e", 5000, 5000, (0.2 + 0.2 + 0.2) / 3, (0.15 + 0.24 + 0.2) / 3, 1, 3},
	}
	got := map[string]phaseSummary{}
	for _, s := range c.summarise() {
		got[s.phase] = s
	}
	if _, ok := got["slow1"]; ok {
		t.Errorf("slow1 ran in no pair, yet it has a summary")
	}
	near := func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ok := got[tt.phase]
			if !ok {
				t.Fatalf("no summary of %s", tt.phase)
			}
			if !near(s.meanA, tt.meanA) || !near(s.meanB, tt.meanB) || !near(s.ratioA, tt.ratioA) || !near(s.ratioB, tt.ratioB) || s.bAhead != tt.bAhead || s.pairs != tt.pairs {
				t.Errorf("summary %+v, want means %.0f %.0f, ratios %.4f %.4f, B ahead %d of %d", s, tt.meanA, tt.meanB, tt.ratioA, tt.ratioB, tt.bAhead, tt.pairs)
			}
		})
	}
	var out strings.Builder
	c.print(&out)
	lines := map[string]bool{}
	for line := range strings.SplitSeq(out.String(), "\n") {
		lines[strings.Join(strings.Fields(line), " ")] = true
	}
	for _, want := range []string{"ingest 1 8000 10000 1.25", "e2e 1 4000 3000 0.75", "ingest 9000 10000 1.11 2 of 3 0.364 0.407", "static 25000 25000 1.00 0 of 3 — —"} {
		if !lines[want] {
			t.Errorf("printed comparison lacks the line %q:\n%s", want, out.String())
		}
	}
}
