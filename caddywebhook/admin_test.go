package caddywebhook

import (
	"cmp"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/sqlite"
)

// adminT0 is the fixed "now" of the admin tests.
var adminT0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// adminFixture is a real SQLite store made the active queue, and the admin
// API serving it behind a mux as Caddy's admin server mounts it.
type adminFixture struct {
	store   *sqlite.Store
	dbPath  string
	api     *adminAPI
	handler http.Handler
	now     atomic.Int64 // unix nanoseconds; read by the store and the API
	// cfg is the running config the fixture's API acts on; nil: no app runs.
	cfg atomic.Pointer[runningConfig]
	seq int
}

// adminRoutes are the routes of the fixture's running config. Jobs of
// github/gone are unroutable: the config has no such target.
var adminRoutes = []queue.Route{
	{Source: "github", Target: "http"}, {Source: "github", Target: "exec"},
	{Source: "stripe", Target: "http"}, {Source: "slack", Target: "http"},
}

// setupAdmin opens a store in t.TempDir(), makes it the active queue with a
// 24h retention and returns the fixture. The clock starts at adminT0.
func setupAdmin(t *testing.T) *adminFixture {
	t.Helper()
	f := new(adminFixture)
	f.now.Store(adminT0.UnixNano())
	clock := func() time.Time { return time.Unix(0, f.now.Load()).UTC() }
	f.dbPath = filepath.Join(t.TempDir(), "queue.db")
	st, err := sqlite.Open(t.Context(), sqlite.Config{
		Path:        f.dbPath,
		Synchronous: "normal", // durability across power loss is not under test here
		Now:         clock,
	})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	f.store = st
	f.api = &adminAPI{now: clock, running: f.cfg.Load}
	f.cfg.Store(&runningConfig{Store: st, Retention: 24 * time.Hour, Routes: adminRoutes})
	f.handler = adminMux(f.api)
	return f
}

// adminMux mounts the module's routes on a ServeMux and turns a handler's
// error into a JSON response the way Caddy's admin server does
// (adminHandler.handleError in caddy/admin.go).
func adminMux(r caddy.AdminRouter) http.Handler {
	mux := http.NewServeMux()
	for _, route := range r.Routes() {
		mux.Handle(route.Pattern, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			err := route.Handler.ServeHTTP(w, req)
			if err == nil {
				return
			}
			var apiErr caddy.APIError
			if !errors.As(err, &apiErr) {
				apiErr = caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: err}
			}
			if apiErr.HTTPStatus == 0 {
				apiErr.HTTPStatus = http.StatusInternalServerError
			}
			if apiErr.Message == "" && apiErr.Err != nil {
				apiErr.Message = apiErr.Err.Error()
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(apiErr.HTTPStatus)
			_ = json.NewEncoder(w).Encode(apiErr)
		}))
	}
	return mux
}

// jobSpec describes one job to create.
type jobSpec struct {
	source, target string
	status         queue.Status
	eventType      string
	payload        []byte
	lastError      string
	finished       time.Duration // for done/dead: how long before adminT0 the job finished
	code           queue.Code    // what the target reported of the attempt
	took           time.Duration // the attempt's duration; default 1s
}

// addJob enqueues one event with one job and drives the job to spec.status
// through the store's own Claim and Finish. It returns the job id.
func (f *adminFixture) addJob(t *testing.T, spec jobSpec) int64 {
	t.Helper()
	ctx := t.Context()
	f.seq++
	payload := spec.payload
	if payload == nil {
		payload = fmt.Appendf(nil, `{"n":%d}`, f.seq)
	}
	res, err := f.store.Enqueue(ctx, queue.Event{
		Source:     spec.source,
		DeliveryID: fmt.Sprintf("d-%d", f.seq),
		EventType:  spec.eventType,
		Headers:    []queue.Header{{Name: "Content-Type", Value: "application/json"}},
		Payload:    payload,
		Targets:    []string{spec.target},
	})
	if err != nil || res.Jobs != 1 {
		t.Fatalf("enqueue: %+v, %v", res, err)
	}
	// The new job is the one with the highest id for its route.
	page, err := f.store.ListJobs(ctx, queue.ListParams{Filter: queue.Filter{Source: spec.source, Target: spec.target}, Limit: 1})
	if err != nil || len(page.Jobs) != 1 {
		t.Fatalf("find new job: %+v, %v", page, err)
	}
	id := page.Jobs[0].ID
	f.drive(t, id, spec)
	return id
}

// drive takes the pending job id, of spec's source and target, to
// spec.status through the store's own Claim and Finish.
func (f *adminFixture) drive(t *testing.T, id int64, spec jobSpec) {
	t.Helper()
	ctx := t.Context()
	if spec.status == queue.StatusPending {
		return
	}
	// Claim every ready job of the route, keep ours and hand back the rest,
	// so earlier pending jobs of the same route stay as they were.
	owner := fmt.Sprintf("test-%d-%d", f.seq, id)
	now := time.Unix(0, f.now.Load())
	jobs, err := f.store.Claim(ctx, queue.ClaimParams{
		Owner: owner, Limit: 1000, Lease: time.Hour, Now: now,
		Routes: []queue.Route{{Source: spec.source, Target: spec.target}},
	})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	var others []queue.Claimed
	var fence int64
	found := false
	for _, j := range jobs {
		if j.ID == id {
			found, fence = true, j.Fence
		} else {
			others = append(others, j.Claimed())
		}
	}
	if !found {
		t.Fatalf("claim did not return job %d", id)
	}
	if len(others) > 0 {
		if err := f.store.HandBack(ctx, owner, others); err != nil {
			t.Fatalf("hand back: %v", err)
		}
	}
	if spec.status == queue.StatusRunning {
		return
	}
	finished := adminT0.Add(-spec.finished)
	took := cmp.Or(spec.took, time.Second)
	rec, err := f.store.Finish(ctx, []queue.Completion{{
		JobID: id, Owner: owner, Fence: fence, Status: spec.status, Error: spec.lastError,
		Started: finished.Add(-time.Second), Duration: took, Code: spec.code, Now: finished,
	}})
	if err != nil || !rec[0] {
		t.Fatalf("finish job %d: %v, %v", id, rec, err)
	}
}

// do sends one request through the mux and returns the recorder.
func (f *adminFixture) do(t *testing.T, method, target string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), method, target, nil)
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, req)
	return rec
}

// decode decodes a JSON response body into a T.
func decode[T any](t *testing.T, rec *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json; body %s", ct, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("decode %s: %v", rec.Body, err)
	}
	return v
}

// getJob reads a job from the store, failing the test on error.
func (f *adminFixture) getJob(t *testing.T, id int64) queue.JobDetail {
	t.Helper()
	j, err := f.store.GetJob(t.Context(), id)
	if err != nil {
		t.Fatalf("get job %d: %v", id, err)
	}
	return j
}

// adminData is the standard data set: its job ids by role.
type adminData struct {
	githubHTTPDead, githubExecDone, stripeHTTPDead, stripeHTTPRunning, githubHTTPPending, binary int64
}

func (f *adminFixture) seed(t *testing.T) adminData {
	t.Helper()
	var d adminData
	d.githubHTTPDead = f.addJob(t, jobSpec{source: "github", target: "http", status: queue.StatusDead, eventType: "push",
		payload: []byte(`{"ref":"refs/heads/main"}`), lastError: "upstream answered 400 Bad Request", finished: time.Hour,
		code: queue.CodeOf(400), took: 420 * time.Microsecond})
	d.githubExecDone = f.addJob(t, jobSpec{source: "github", target: "exec", status: queue.StatusDone, eventType: "push", finished: 48 * time.Hour,
		code: queue.CodeOf(0)})
	d.stripeHTTPDead = f.addJob(t, jobSpec{source: "stripe", target: "http", status: queue.StatusDead, eventType: "invoice.paid",
		lastError: "dial tcp 127.0.0.1:9: connection refused", finished: time.Minute})
	d.stripeHTTPRunning = f.addJob(t, jobSpec{source: "stripe", target: "http", status: queue.StatusRunning, eventType: "invoice.paid"})
	d.githubHTTPPending = f.addJob(t, jobSpec{source: "github", target: "http", status: queue.StatusPending, eventType: "release"})
	d.binary = f.addJob(t, jobSpec{source: "slack", target: "http", status: queue.StatusPending, payload: []byte{0xff, 0xfe, 0x00, 0x01}})
	return d
}

// adminCase is one request to the admin API over the standard data, and
// what must hold after it: the answer's status; for an error, the text of
// its message (and a 405's Allow); for a success, pieces the body holds or
// lacks, a listing's jobs in order, the jobs' statuses afterwards, and
// pieces of the job page read then.
type adminCase struct {
	name   string
	method string
	path   string        // the request's path and query; {job} is job's id
	job    role          // the job the path names
	clock  time.Duration // how long after adminT0 the API answers
	status int
	err    string // a piece of an error answer's message
	allow  string // a 405's Allow header
	has    []string
	lacks  []string
	ids    []role                // a listing's jobs, newest first
	after  map[role]queue.Status // "" for a job that is gone
	page   []string              // pieces of GET /webhook/jobs/{job} afterwards
}

// role names a job of the standard data (adminData).
type role string

const (
	githubHTTPDead    role = "github/http dead"
	githubExecDone    role = "github/exec done"
	stripeHTTPDead    role = "stripe/http dead"
	stripeHTTPRunning role = "stripe/http running"
	githubHTTPPending role = "github/http pending"
	binaryPending     role = "slack/http pending, binary"
)

func (d adminData) id(r role) int64 {
	return map[role]int64{githubHTTPDead: d.githubHTTPDead, githubExecDone: d.githubExecDone, stripeHTTPDead: d.stripeHTTPDead,
		stripeHTTPRunning: d.stripeHTTPRunning, githubHTTPPending: d.githubHTTPPending, binaryPending: d.binary}[r]
}

// runAdminCases runs each case on a fixture of its own, seeded with the
// standard data, and makes the one assertion of them all.
func runAdminCases(t *testing.T, cases []adminCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setupAdmin(t)
			d := f.seed(t)
			f.now.Store(adminT0.Add(tc.clock).UnixNano())
			expand := func(s string) string { return strings.ReplaceAll(s, "{job}", strconv.FormatInt(d.id(tc.job), 10)) }
			path := expand(tc.path)
			rec := f.do(t, tc.method, path)
			body := rec.Body.String()
			if rec.Code != tc.status {
				t.Fatalf("%s %s = %d, want %d; body %s", tc.method, path, rec.Code, tc.status, body)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			if tc.status >= 400 {
				var e adminapi.Error
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || !strings.Contains(e.Error, expand(tc.err)) {
					t.Errorf("error %q (%v), want it to hold %q", e.Error, err, expand(tc.err))
				}
			}
			if got := rec.Header().Get("Allow"); got != tc.allow {
				t.Errorf("Allow = %q, want %q", got, tc.allow)
			}
			for _, p := range tc.has {
				if !strings.Contains(body, expand(p)) {
					t.Errorf("body lacks %s:\n%s", expand(p), body)
				}
			}
			for _, p := range tc.lacks {
				if strings.Contains(body, expand(p)) {
					t.Errorf("body holds %s:\n%s", expand(p), body)
				}
			}
			if tc.ids != nil {
				page := decode[queue.JobPage](t, rec)
				want := make([]int64, len(tc.ids))
				for i, r := range tc.ids {
					want[i] = d.id(r)
				}
				if got := jobIDs(page.Jobs); !slices.Equal(got, want) {
					t.Errorf("jobs %v, want %v", got, want)
				}
			}
			for r, want := range tc.after {
				j, err := f.store.GetJob(t.Context(), d.id(r))
				switch {
				case want == "" && !errors.Is(err, queue.ErrNotFound):
					t.Errorf("%s afterwards: %s (%v), want it gone", r, j.Status, err)
				case want != "" && (err != nil || j.Status != want):
					t.Errorf("%s afterwards: %s (%v), want %s", r, j.Status, err, want)
				}
			}
			if tc.page != nil {
				page := f.do(t, http.MethodGet, expand("/webhook/jobs/{job}")).Body.String()
				for _, p := range tc.page {
					if !strings.Contains(page, p) {
						t.Errorf("job page afterwards lacks %s:\n%s", p, page)
					}
				}
			}
		})
	}
}

func TestAdminStats(t *testing.T) {
	t.Parallel()
	runAdminCases(t, []adminCase{
		{name: "counts per source, target and status", method: "GET", path: "/webhook/stats", status: 200, has: []string{
			`"source":"github","target":"http","status":"dead","jobs":1`, `"source":"github","target":"exec","status":"done","jobs":1`,
			`"source":"stripe","target":"http","status":"dead","jobs":1`, `"source":"stripe","target":"http","status":"running","jobs":1`,
			`"source":"github","target":"http","status":"pending","jobs":1`, `"source":"slack","target":"http","status":"pending","jobs":1`,
			`"events":6`,
		}},
		// The pending jobs were enqueued at adminT0.
		{name: "oldest pending age from the clock", method: "GET", path: "/webhook/stats", clock: 90 * time.Second, status: 200,
			has: []string{`"oldest_pending_ns":90000000000`, `"oldest_pending":"1m30s"`}},
		{name: "a query is refused", method: "GET", path: "/webhook/stats?x=1", status: 400, err: "invalid parameter x"},
		{name: "POST is not allowed", method: "POST", path: "/webhook/stats", status: 405, allow: "GET, HEAD", err: "not allowed"},
	})
}

func TestAdminJobs(t *testing.T) {
	t.Parallel()
	runAdminCases(t, []adminCase{
		{name: "all, newest first, without payloads", method: "GET", path: "/webhook/jobs", status: 200,
			ids:   []role{binaryPending, githubHTTPPending, stripeHTTPRunning, stripeHTTPDead, githubExecDone, githubHTTPDead},
			lacks: []string{`"payload"`, `"next_cursor"`}},
		{name: "filtered by status, source and target", method: "GET", path: "/webhook/jobs?status=dead&source=github&target=http", status: 200,
			ids: []role{githubHTTPDead}, has: []string{`"last_error":"upstream answered 400 Bad Request"`, `"event_type":"push"`}},
		{name: "no match is an empty array, not null", method: "GET", path: "/webhook/jobs?source=slack&status=dead", status: 200,
			has: []string{`{"jobs":[]}`}},
		{name: "limit 0", method: "GET", path: "/webhook/jobs?limit=0", status: 400, err: "invalid parameter limit"},
		{name: "limit 1001", method: "GET", path: "/webhook/jobs?limit=1001", status: 400, err: "invalid parameter limit"},
		{name: "limit not a number", method: "GET", path: "/webhook/jobs?limit=ten", status: 400, err: "invalid parameter limit"},
		{name: "status unknown", method: "GET", path: "/webhook/jobs?status=zombie", status: 400, err: "invalid parameter status"},
		{name: "cursor negative", method: "GET", path: "/webhook/jobs?cursor=-5", status: 400, err: "invalid parameter cursor"},
		{name: "unknown filter", method: "GET", path: "/webhook/jobs?sorce=github", status: 400, err: "invalid parameter sorce"},
		{name: "DELETE is not allowed", method: "DELETE", path: "/webhook/jobs", status: 405, allow: "GET, HEAD", err: "not allowed"},
	})
}

func TestAdminJob(t *testing.T) {
	t.Parallel()
	payload := `{"ref":"refs/heads/main"}`
	runAdminCases(t, []adminCase{
		// The wire form keeps []byte's base64 for machines; payload_text
		// repeats a UTF-8 payload for people. The history names the
		// upstream's answer "status".
		{name: "text payload with payload_text, headers and history", method: "GET", path: "/webhook/jobs/{job}", job: githubHTTPDead, status: 200, has: []string{
			`"id":{job}`, `"status":"dead"`, `"attempts":1`,
			`"payload":"` + base64.StdEncoding.EncodeToString([]byte(payload)) + `"`, `"payload_text":` + strconv.Quote(payload),
			`"headers":[{"name":"Content-Type"`,
			`"duration_ns":420000`, `"outcome":"dead"`, `"status":400`, `"error":"upstream answered 400 Bad Request"`,
		}},
		{name: "binary payload has no payload_text", method: "GET", path: "/webhook/jobs/{job}", job: binaryPending, status: 200,
			has: []string{`"payload":"//4AAQ=="`}, lacks: []string{"payload_text"}},
		{name: "not found", method: "GET", path: "/webhook/jobs/999999", status: 404, err: "job 999999 not found"},
		{name: "id not a number", method: "GET", path: "/webhook/jobs/abc", status: 400, err: "invalid parameter id"},
		{name: "PUT is not allowed", method: "PUT", path: "/webhook/jobs/1", status: 405, allow: "GET, HEAD, DELETE", err: "not allowed"},
	})
}

func TestAdminReplay(t *testing.T) {
	t.Parallel()
	runAdminCases(t, []adminCase{
		// The attempts keep counting; the replay is counted.
		{name: "a dead job is pending with a fresh budget", method: "POST", path: "/webhook/jobs/{job}/replay", job: githubHTTPDead, status: 200,
			has: []string{`"id":{job}`, `"replayed":1`}, page: []string{`"status":"pending"`, `"attempts":1`, `"replays":1`}},
		{name: "a pending job is not dead", method: "POST", path: "/webhook/jobs/{job}/replay", job: githubHTTPPending, status: 409, err: "is not dead",
			after: map[role]queue.Status{githubHTTPPending: queue.StatusPending}},
		{name: "a running job is not dead", method: "POST", path: "/webhook/jobs/{job}/replay", job: stripeHTTPRunning, status: 409, err: "is not dead"},
		{name: "not found", method: "POST", path: "/webhook/jobs/999999/replay", status: 404, err: "job 999999 not found"},
		{name: "id zero", method: "POST", path: "/webhook/jobs/0/replay", status: 400, err: "invalid parameter id"},
		{name: "GET is not allowed", method: "GET", path: "/webhook/jobs/1/replay", status: 405, allow: "POST", err: "not allowed"},
	})
}

func TestAdminReplayDead(t *testing.T) {
	t.Parallel()
	runAdminCases(t, []adminCase{
		{name: "of one source only", method: "POST", path: "/webhook/replay?status=dead&source=stripe", status: 200,
			has: []string{`"replayed":1`}, lacks: []string{`"id"`},
			after: map[role]queue.Status{stripeHTTPDead: queue.StatusPending, githubHTTPDead: queue.StatusDead}},
		{name: "every source", method: "POST", path: "/webhook/replay?status=dead", status: 200, has: []string{`"replayed":2`},
			after: map[role]queue.Status{stripeHTTPDead: queue.StatusPending, githubHTTPDead: queue.StatusPending}},
		{name: "by target with nothing dead", method: "POST", path: "/webhook/replay?status=dead&target=exec", status: 200, has: []string{`"replayed":0`}},
		{name: "status done", method: "POST", path: "/webhook/replay?status=done", status: 400, err: "invalid parameter status: must be dead"},
		{name: "without status", method: "POST", path: "/webhook/replay?source=github", status: 400, err: "invalid parameter status"},
		// A typo must not widen a bulk replay to every source.
		{name: "a misspelt source replays nothing", method: "POST", path: "/webhook/replay?status=dead&sorce=stripe", status: 400,
			err: "invalid parameter sorce", after: map[role]queue.Status{githubHTTPDead: queue.StatusDead, stripeHTTPDead: queue.StatusDead}},
	})
}

func TestAdminDiscard(t *testing.T) {
	t.Parallel()
	runAdminCases(t, []adminCase{
		{name: "a done job and its event", method: "DELETE", path: "/webhook/jobs/{job}", job: githubExecDone, status: 200,
			has: []string{`"id":{job}`, `"discarded":true`}, after: map[role]queue.Status{githubExecDone: ""},
			page: []string{`not found`}},
		{name: "a running job is refused", method: "DELETE", path: "/webhook/jobs/{job}", job: stripeHTTPRunning, status: 409, err: "is running",
			after: map[role]queue.Status{stripeHTTPRunning: queue.StatusRunning}},
		{name: "not found", method: "DELETE", path: "/webhook/jobs/999999", status: 404, err: "job 999999 not found"},
	})
}

func TestAdminPurgeDone(t *testing.T) {
	t.Parallel()
	runAdminCases(t, []adminCase{
		{name: "done jobs older than the app's retention", method: "POST", path: "/webhook/purge", status: 200,
			has:   []string{`"purged":1`, `"cutoff":"` + adminT0.Add(-24*time.Hour).Format(time.RFC3339Nano) + `"`, `"older_than":"24h0m0s"`},
			after: map[role]queue.Status{githubExecDone: "", githubHTTPDead: queue.StatusDead}},
		{name: "older_than longer than every done job", method: "POST", path: "/webhook/purge?older_than=3d", status: 200,
			has: []string{`"purged":0`, `"older_than":"72h0m0s"`}, after: map[role]queue.Status{githubExecDone: queue.StatusDone}},
		{name: "older_than negative", method: "POST", path: "/webhook/purge?older_than=-1h", status: 400, err: "invalid parameter older_than"},
		{name: "older_than garbage", method: "POST", path: "/webhook/purge?older_than=soon", status: 400, err: "invalid parameter older_than"},
		{name: "GET is not allowed", method: "GET", path: "/webhook/purge", status: 405, allow: "POST", err: "not allowed"},
	})
}

func TestAdminUnknownPaths(t *testing.T) {
	t.Parallel()
	runAdminCases(t, []adminCase{
		{name: "an unknown endpoint", method: "GET", path: "/webhook/nope", status: 404, err: "no webhook admin endpoint"},
		{name: "the base", method: "GET", path: "/webhook/", status: 404, err: "no webhook admin endpoint"},
		{name: "too deep", method: "POST", path: "/webhook/jobs/1/replay/now", status: 404, err: "no webhook admin endpoint"},
	})
}

func fixed(s string) func(adminData) string { return func(adminData) string { return s } }

func jobIDs(js []queue.JobSummary) []int64 {
	ids := make([]int64, len(js))
	for i, j := range js {
		ids[i] = j.ID
	}
	return ids
}

// wantError checks a JSON error response whose message contains substr.
func wantError(substr string) func(*testing.T, *adminFixture, adminData, *httptest.ResponseRecorder) {
	return func(t *testing.T, _ *adminFixture, _ adminData, rec *httptest.ResponseRecorder) {
		t.Helper()
		e := decode[struct {
			Error string `json:"error"`
		}](t, rec)
		if !strings.Contains(e.Error, substr) {
			t.Errorf("error = %q, want it to contain %q", e.Error, substr)
		}
	}
}

func wantAllow(allow string) func(*testing.T, *adminFixture, adminData, *httptest.ResponseRecorder) {
	return func(t *testing.T, f *adminFixture, d adminData, rec *httptest.ResponseRecorder) {
		t.Helper()
		if got := rec.Header().Get("Allow"); got != allow {
			t.Errorf("Allow = %q, want %q", got, allow)
		}
		wantError("not allowed")(t, f, d, rec)
	}
}

func TestAdminNoApp(t *testing.T) {
	t.Parallel()
	f := setupAdmin(t)
	f.cfg.Store(nil)
	for _, tt := range []struct{ method, target string }{
		{http.MethodGet, "/webhook/stats"},
		{http.MethodGet, "/webhook/jobs"},
		{http.MethodGet, "/webhook/jobs/1"},
		{http.MethodPost, "/webhook/jobs/1/replay"},
		{http.MethodPost, "/webhook/replay?status=dead"},
		{http.MethodDelete, "/webhook/jobs/1"},
		{http.MethodPost, "/webhook/purge"},
	} {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			rec := f.do(t, tt.method, tt.target)
			if rec.Code != http.StatusServiceUnavailable {
				t.Fatalf("status = %d, want 503; body %s", rec.Code, rec.Body)
			}
			wantError("no webhook app is running")(t, f, adminData{}, rec)
		})
	}
}

func TestAdminListPaging(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		query     string
		limit     int
		wantPages []int // jobs per page
		wantTotal int
	}{
		{name: "all jobs, 3 per page", limit: 3, wantPages: []int{3, 3, 1}, wantTotal: 7},
		{name: "dead only, 2 per page", query: "&status=dead", limit: 2, wantPages: []int{2, 2}, wantTotal: 4},
		{name: "exact multiple of the limit", query: "&source=a", limit: 1, wantPages: []int{1, 1, 1}, wantTotal: 3},
		{name: "one page holds all", limit: 1000, wantPages: []int{7}, wantTotal: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setupAdmin(t)
			for i := range 7 {
				st := queue.StatusPending
				if i%2 == 0 {
					st = queue.StatusDead
				}
				source := "a"
				if i >= 3 {
					source = "b"
				}
				f.addJob(t, jobSpec{source: source, target: "http", status: st})
			}
			var pages []int
			var seen []int64
			cursor := int64(0)
			for range 10 {
				target := fmt.Sprintf("/webhook/jobs?limit=%d%s", tt.limit, tt.query)
				if cursor != 0 {
					target += fmt.Sprintf("&cursor=%d", cursor)
				}
				rec := f.do(t, http.MethodGet, target)
				if rec.Code != http.StatusOK {
					t.Fatalf("GET %s = %d: %s", target, rec.Code, rec.Body)
				}
				page := decode[queue.JobPage](t, rec)
				pages = append(pages, len(page.Jobs))
				seen = append(seen, jobIDs(page.Jobs)...)
				if page.NextCursor == 0 {
					break
				}
				cursor = page.NextCursor
			}
			// A trailing empty page is allowed only when the store cannot
			// know the last page was full; drop it before comparing.
			if len(pages) > 1 && pages[len(pages)-1] == 0 {
				pages = pages[:len(pages)-1]
			}
			if !slices.Equal(pages, tt.wantPages) {
				t.Errorf("page sizes = %v, want %v", pages, tt.wantPages)
			}
			if len(seen) != tt.wantTotal {
				t.Errorf("saw %d jobs, want %d: %v", len(seen), tt.wantTotal, seen)
			}
			if !slices.IsSortedFunc(seen, func(a, b int64) int { return int(b - a) }) || len(slices.Compact(slices.Clone(seen))) != len(seen) {
				t.Errorf("ids not strictly newest first across pages: %v", seen)
			}
		})
	}
}

func TestAdminPurge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		done       int // done jobs finished 48h ago
		recent     int // done jobs finished 1h ago
		query      string
		wantPurged int
		wantLeft   int
	}{
		{name: "old done jobs, a recent one kept", done: 5, recent: 1, wantPurged: 5, wantLeft: 1},
		{name: "older_than reaches the recent ones", done: 3, recent: 2, query: "?older_than=30m", wantPurged: 5, wantLeft: 0},
		{name: "nothing old enough", recent: 3, wantPurged: 0, wantLeft: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setupAdmin(t)
			for range tt.done {
				f.addJob(t, jobSpec{source: "github", target: "http", status: queue.StatusDone, finished: 48 * time.Hour})
			}
			for range tt.recent {
				f.addJob(t, jobSpec{source: "github", target: "http", status: queue.StatusDone, finished: time.Hour})
			}
			dead := f.addJob(t, jobSpec{source: "github", target: "http", status: queue.StatusDead, finished: 72 * time.Hour})
			rec := f.do(t, http.MethodPost, "/webhook/purge"+tt.query)
			if rec.Code != http.StatusOK {
				t.Fatalf("purge = %d: %s", rec.Code, rec.Body)
			}
			if r := decode[adminapi.PurgeResponse](t, rec); r.Purged != tt.wantPurged {
				t.Errorf("purged = %d, want %d", r.Purged, tt.wantPurged)
			}
			page, err := f.store.ListJobs(t.Context(), queue.ListParams{Filter: queue.Filter{Status: queue.StatusDone}})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Jobs) != tt.wantLeft {
				t.Errorf("done jobs left = %d, want %d", len(page.Jobs), tt.wantLeft)
			}
			if j := f.getJob(t, dead); j.Status != queue.StatusDead {
				t.Errorf("purge touched a dead job: %s", j.Status)
			}
		})
	}
}

func TestAdminPurgeWithoutRetention(t *testing.T) {
	t.Parallel()
	f := setupAdmin(t)
	f.cfg.Store(&runningConfig{Store: f.store, Routes: adminRoutes})
	f.addJob(t, jobSpec{source: "github", target: "http", status: queue.StatusDone, finished: time.Hour})
	rec := f.do(t, http.MethodPost, "/webhook/purge")
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("purge with no retention = %d, want 400: %s", rec.Code, rec.Body)
	}
	wantError("invalid parameter older_than: is required")(t, f, adminData{}, rec)
}

// TestAdminStoreFailures covers a store failing under the API: a closed
// store (an app stopping under a request) and a database that answers with
// errors are unavailable (503, as the receiver answers), not a client
// error and not a server bug, and the store's own words are not repeated.
func TestAdminStoreFailures(t *testing.T) {
	closeStore := func(t *testing.T, f *adminFixture) { f.store.Close() }
	// Dropping the tables under the open store makes every statement fail
	// in the database itself, as a lost or broken database would.
	breakDatabase := func(t *testing.T, f *adminFixture) {
		t.Helper()
		db, err := sql.Open("sqlite", f.dbPath)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, table := range []string{"attempts", "jobs", "events"} {
			if _, err := db.Exec("DROP TABLE IF EXISTS " + table); err != nil {
				t.Fatalf("drop %s: %v", table, err)
			}
		}
	}
	tests := []struct {
		name           string
		breakIt        func(*testing.T, *adminFixture)
		method, target string
		want           string
	}{
		{"closed/list", closeStore, http.MethodGet, "/webhook/jobs", "store closed"},
		{"closed/stats", closeStore, http.MethodGet, "/webhook/stats", "read stats: store closed"},
		{"closed/replay dead", closeStore, http.MethodPost, "/webhook/replay?status=dead", "store closed"},
		{"closed/purge", closeStore, http.MethodPost, "/webhook/purge", "purge done jobs (0 purged before the error): store closed"},
		{"broken/stats", breakDatabase, http.MethodGet, "/webhook/stats", "read stats: "},
		{"broken/list", breakDatabase, http.MethodGet, "/webhook/jobs", "no such table"},
		{"broken/show", breakDatabase, http.MethodGet, "/webhook/jobs/1", "no such table"},
		{"broken/replay dead", breakDatabase, http.MethodPost, "/webhook/replay?status=dead", "no such table"},
		{"broken/purge", breakDatabase, http.MethodPost, "/webhook/purge", "purge done jobs (0 purged before the error): "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setupAdmin(t)
			tt.breakIt(t, f)
			rec := f.do(t, tt.method, tt.target)
			if rec.Code != http.StatusServiceUnavailable {
				t.Fatalf("%s on a failing store = %d, want 503: %s", tt.target, rec.Code, rec.Body)
			}
			wantError(tt.want)(t, f, adminData{}, rec)
			var body struct{ Error string }
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			for _, op := range []string{"read stats", "list jobs", "replay dead jobs", "purge jobs"} {
				if strings.Count(body.Error, op+":") > 1 {
					t.Errorf("error %q repeats %q", body.Error, op)
				}
			}
		})
	}
}

// TestAttemptOutcome maps the status a store records in the history,
// also in rows stored before the words changed, to the words of the logs
// and metrics.
func TestAttemptOutcome(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status queue.Status
		want   string
	}{
		{queue.StatusDone, "delivered"},
		{queue.StatusPending, "retry"},
		{queue.StatusDead, "dead"},
		{queue.StatusRunning, "handed_back"},
	}
	for _, tt := range tests {
		t.Run(string(tt.status), func(t *testing.T) {
			if got := attemptOutcome(tt.status); got != tt.want {
				t.Errorf("attemptOutcome(%s) = %q, want %q", tt.status, got, tt.want)
			}
		})
	}
}

func TestAdminModule(t *testing.T) {
	mi, err := caddy.GetModule("admin.api.webhook")
	if err != nil {
		t.Fatalf("module not registered: %v", err)
	}
	router, ok := mi.New().(caddy.AdminRouter)
	if !ok {
		t.Fatalf("%T is not a caddy.AdminRouter", mi.New())
	}
	routes := router.Routes()
	if len(routes) != 1 || routes[0].Pattern != "/webhook/" {
		t.Errorf("routes = %+v, want one at /webhook/", routes)
	}
}

// TestAdminUnroutable covers jobs whose route the running config does not
// have: stats mark them, a bulk replay leaves them dead, and the bulk
// discard deletes them by filter.
func TestAdminUnroutable(t *testing.T) {
	t.Parallel()
	type ids struct{ gonePending, goneDead, routedPending, routedDead int64 }
	setup := func(t *testing.T) (*adminFixture, ids) {
		f := setupAdmin(t)
		return f, ids{
			gonePending:   f.addJob(t, jobSpec{source: "github", target: "gone", status: queue.StatusPending}),
			goneDead:      f.addJob(t, jobSpec{source: "github", target: "gone", status: queue.StatusDead}),
			routedPending: f.addJob(t, jobSpec{source: "github", target: "http", status: queue.StatusPending}),
			routedDead:    f.addJob(t, jobSpec{source: "github", target: "http", status: queue.StatusDead}),
		}
	}
	t.Run("stats mark unroutable routes", func(t *testing.T) {
		f, _ := setup(t)
		st := decode[adminapi.StatsResponse](t, f.do(t, http.MethodGet, "/webhook/stats"))
		for _, c := range st.Counts {
			if want := c.Target == "gone"; c.Unroutable != want {
				t.Errorf("%s/%s/%s unroutable = %v, want %v", c.Source, c.Target, c.Status, c.Unroutable, want)
			}
		}
		if st.Unroutable != 1 {
			t.Errorf("unroutable = %d, want 1 (the pending job)", st.Unroutable)
		}
	})
	t.Run("replay all dead leaves unroutable jobs dead", func(t *testing.T) {
		f, id := setup(t)
		rec := f.do(t, http.MethodPost, "/webhook/replay?status=dead")
		if rec.Code != http.StatusOK {
			t.Fatalf("replay = %d: %s", rec.Code, rec.Body)
		}
		if r := decode[adminapi.ReplayResponse](t, rec); r.Replayed != 1 || r.Unroutable != 1 {
			t.Errorf("replay = %+v, want 1 replayed, 1 unroutable", r)
		}
		if s := f.getJob(t, id.goneDead).Status; s != queue.StatusDead {
			t.Errorf("unroutable dead job is %s after replay", s)
		}
		if s := f.getJob(t, id.routedDead).Status; s != queue.StatusPending {
			t.Errorf("routed dead job is %s after replay", s)
		}
	})
	tests := []struct {
		name       string
		query      string
		wantStatus int
		discarded  int
		gone       func(ids) []int64
		kept       func(ids) []int64
	}{
		{"unroutable, any status", "unroutable=true", http.StatusOK, 2,
			func(i ids) []int64 { return []int64{i.gonePending, i.goneDead} },
			func(i ids) []int64 { return []int64{i.routedPending, i.routedDead} }},
		{"unroutable dead only", "unroutable=true&status=dead", http.StatusOK, 1,
			func(i ids) []int64 { return []int64{i.goneDead} },
			func(i ids) []int64 { return []int64{i.gonePending, i.routedDead} }},
		{"source and target", "source=github&target=http&status=pending", http.StatusOK, 1,
			func(i ids) []int64 { return []int64{i.routedPending} },
			func(i ids) []int64 { return []int64{i.gonePending, i.routedDead} }},
		{"source, unroutable only", "source=github&unroutable=true&status=pending", http.StatusOK, 1,
			func(i ids) []int64 { return []int64{i.gonePending} },
			func(i ids) []int64 { return []int64{i.routedPending} }},
		{"no source is refused", "status=dead", http.StatusBadRequest, 0, nil, nil},
		{"running is refused", "source=github&status=running", http.StatusBadRequest, 0, nil, nil},
		{"unroutable must be a bool", "source=github&unroutable=yes", http.StatusBadRequest, 0, nil, nil},
	}
	for _, tt := range tests {
		t.Run("discard/"+tt.name, func(t *testing.T) {
			f, id := setup(t)
			rec := f.do(t, http.MethodPost, "/webhook/discard?"+tt.query)
			if rec.Code != tt.wantStatus {
				t.Fatalf("discard = %d, want %d: %s", rec.Code, tt.wantStatus, rec.Body)
			}
			if tt.wantStatus != http.StatusOK {
				return
			}
			if r := decode[adminapi.DiscardJobsResponse](t, rec); r.Discarded != tt.discarded {
				t.Errorf("discarded = %d, want %d", r.Discarded, tt.discarded)
			}
			for _, j := range tt.gone(id) {
				if _, err := f.store.GetJob(t.Context(), j); !errors.Is(err, queue.ErrNotFound) {
					t.Errorf("job %d: %v, want it gone", j, err)
				}
			}
			for _, j := range tt.kept(id) {
				f.getJob(t, j)
			}
		})
	}
}

// TestAdminErrorParam: an error about a parameter names it in the param
// field, which clients read instead of the message.
func TestAdminErrorParam(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, method, target string
		wantStatus           int
		wantParam            string
	}{
		{"limit out of range", http.MethodGet, "/webhook/jobs?limit=0", http.StatusBadRequest, "limit"},
		{"delivery id without source", http.MethodGet, "/webhook/events?delivery_id=d-1", http.StatusBadRequest, "delivery_id"},
		{"an unknown parameter", http.MethodPost, "/webhook/replay?status=dead&sorce=x", http.StatusBadRequest, "sorce"},
		{"the id in the path", http.MethodGet, "/webhook/events/x", http.StatusBadRequest, "id"},
		{"an unknown outcome on the tail", http.MethodGet, "/webhook/tail?outcome=nonsense", http.StatusBadRequest, "outcome"},
		{"an unknown source on the list", http.MethodGet, "/webhook/jobs?source=nosuch", http.StatusBadRequest, "source"},
		{"no such job", http.MethodGet, "/webhook/jobs/999999", http.StatusNotFound, ""},
		{"no such endpoint", http.MethodGet, "/webhook/nope", http.StatusNotFound, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setupAdmin(t)
			f.seed(t)
			rec := f.do(t, tt.method, tt.target)
			if rec.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.wantStatus, rec.Body)
			}
			e := decode[adminapi.Error](t, rec)
			if e.Param != tt.wantParam || e.Error == "" {
				t.Errorf("body %+v, want param %q and a message", e, tt.wantParam)
			}
		})
	}
}
