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
	if spec.status == queue.StatusPending {
		return id
	}

	// Claim every ready job of the route, keep ours and hand back the rest,
	// so earlier pending jobs of the same route stay as they were.
	owner := fmt.Sprintf("test-%d", f.seq)
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
		return id
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
	return id
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

func TestAdminRoutes(t *testing.T) {
	t.Parallel()
	type check func(t *testing.T, f *adminFixture, d adminData, rec *httptest.ResponseRecorder)
	tests := []struct {
		name       string
		method     string
		target     func(d adminData) string
		wantStatus int
		check      check
	}{
		{
			name: "stats/counts per source, target and status", method: http.MethodGet,
			target: fixed("/webhook/stats"), wantStatus: http.StatusOK,
			check: func(t *testing.T, f *adminFixture, d adminData, rec *httptest.ResponseRecorder) {
				st := decode[adminapi.StatsResponse](t, rec)
				got := map[string]int64{}
				for _, c := range st.Counts {
					got[c.Source+"/"+c.Target+"/"+string(c.Status)] = c.Jobs
				}
				want := map[string]int64{
					"github/http/dead": 1, "github/exec/done": 1, "stripe/http/dead": 1,
					"stripe/http/running": 1, "github/http/pending": 1, "slack/http/pending": 1,
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("counts = %v, want %v", got, want)
				}
				if st.Events != 6 {
					t.Errorf("events = %d, want 6", st.Events)
				}
			},
		},
		{
			name: "stats/oldest pending age from the clock", method: http.MethodGet,
			target: fixed("/webhook/stats"), wantStatus: http.StatusOK,
			check: func(t *testing.T, f *adminFixture, d adminData, rec *httptest.ResponseRecorder) {
				// The pending jobs were enqueued at adminT0; ask again 90s later.
				f.now.Store(adminT0.Add(90 * time.Second).UnixNano())
				st := decode[adminapi.StatsResponse](t, f.do(t, http.MethodGet, "/webhook/stats"))
				if st.OldestPending != 90*time.Second || st.OldestPendingText != "1m30s" {
					t.Errorf("oldest pending = %v %q, want 1m30s", st.OldestPending, st.OldestPendingText)
				}
			},
		},
		{
			name: "list/all, newest first", method: http.MethodGet,
			target: fixed("/webhook/jobs"), wantStatus: http.StatusOK,
			check: func(t *testing.T, f *adminFixture, d adminData, rec *httptest.ResponseRecorder) {
				page := decode[queue.JobPage](t, rec)
				want := []int64{d.binary, d.githubHTTPPending, d.stripeHTTPRunning, d.stripeHTTPDead, d.githubExecDone, d.githubHTTPDead}
				if got := jobIDs(page.Jobs); !slices.Equal(got, want) {
					t.Errorf("ids = %v, want %v", got, want)
				}
				if page.NextCursor != 0 {
					t.Errorf("next_cursor = %d on the only page", page.NextCursor)
				}
				if strings.Contains(rec.Body.String(), `"payload"`) {
					t.Errorf("a listing carries payloads: %s", rec.Body)
				}
			},
		},
		{
			name: "list/filtered by status, source and target", method: http.MethodGet,
			target: fixed("/webhook/jobs?status=dead&source=github&target=http"), wantStatus: http.StatusOK,
			check: func(t *testing.T, f *adminFixture, d adminData, rec *httptest.ResponseRecorder) {
				page := decode[queue.JobPage](t, rec)
				if got := jobIDs(page.Jobs); !slices.Equal(got, []int64{d.githubHTTPDead}) {
					t.Errorf("ids = %v, want [%d]", got, d.githubHTTPDead)
				}
				if j := page.Jobs[0]; j.LastError != "upstream answered 400 Bad Request" || j.EventType != "push" {
					t.Errorf("summary = %+v", j)
				}
			},
		},
		{
			name: "list/no match is an empty array, not null", method: http.MethodGet,
			target: fixed("/webhook/jobs?source=slack&status=dead"), wantStatus: http.StatusOK,
			check: func(t *testing.T, f *adminFixture, d adminData, rec *httptest.ResponseRecorder) {
				if got := strings.TrimSpace(rec.Body.String()); got != `{"jobs":[]}` {
					t.Errorf("body = %s", got)
				}
			},
		},
		{
			name: "show/text payload with payload_text, headers and history", method: http.MethodGet,
			target: func(d adminData) string { return fmt.Sprintf("/webhook/jobs/%d", d.githubHTTPDead) }, wantStatus: http.StatusOK,
			check: func(t *testing.T, f *adminFixture, d adminData, rec *httptest.ResponseRecorder) {
				j := decode[adminapi.JobResponse](t, rec)
				if j.ID != d.githubHTTPDead || j.Status != queue.StatusDead || j.Attempts != 1 {
					t.Errorf("job = %+v", j.JobSummary)
				}
				if string(j.Payload) != `{"ref":"refs/heads/main"}` || j.PayloadText != `{"ref":"refs/heads/main"}` {
					t.Errorf("payload = %q, payload_text = %q", j.Payload, j.PayloadText)
				}
				if len(j.History) != 1 || j.History[0].Outcome != adminapi.AttemptDead || j.History[0].Error != "upstream answered 400 Bad Request" ||
					j.History[0].Code != queue.CodeOf(400) || j.History[0].Duration != 420*time.Microsecond {
					t.Errorf("history = %+v", j.History)
				}
				// The raw JSON names the upstream's answer "status".
				if !strings.Contains(rec.Body.String(), `"status":400`) {
					t.Errorf("history JSON lacks the status: %s", rec.Body)
				}
				if len(j.Headers) != 1 || j.Headers[0].Name != "Content-Type" {
					t.Errorf("headers = %+v", j.Headers)
				}
				// The wire form keeps []byte's base64 for machines.
				var raw map[string]any
				_ = json.Unmarshal(rec.Body.Bytes(), &raw)
				if raw["payload"] != base64.StdEncoding.EncodeToString([]byte(`{"ref":"refs/heads/main"}`)) {
					t.Errorf("payload on the wire = %v, want base64", raw["payload"])
				}
			},
		},
		{
			name: "show/binary payload has no payload_text", method: http.MethodGet,
			target: func(d adminData) string { return fmt.Sprintf("/webhook/jobs/%d", d.binary) }, wantStatus: http.StatusOK,
			check: func(t *testing.T, f *adminFixture, d adminData, rec *httptest.ResponseRecorder) {
				j := decode[adminapi.JobResponse](t, rec)
				if !slices.Equal(j.Payload, []byte{0xff, 0xfe, 0x00, 0x01}) {
					t.Errorf("payload = %x", j.Payload)
				}
				if strings.Contains(rec.Body.String(), "payload_text") {
					t.Errorf("payload_text present for a non-UTF-8 payload: %s", rec.Body)
				}
			},
		},
		{
			name: "show/not found", method: http.MethodGet,
			target: fixed("/webhook/jobs/999999"), wantStatus: http.StatusNotFound,
			check: wantError("job 999999 not found"),
		},
		{
			name: "replay one/dead job becomes pending with a fresh budget", method: http.MethodPost,
			target: func(d adminData) string { return fmt.Sprintf("/webhook/jobs/%d/replay", d.githubHTTPDead) }, wantStatus: http.StatusOK,
			check: func(t *testing.T, f *adminFixture, d adminData, rec *httptest.ResponseRecorder) {
				if r := decode[adminapi.ReplayResponse](t, rec); r.ID != d.githubHTTPDead || r.Replayed != 1 {
					t.Errorf("response = %+v", r)
				}
				// The attempts keep counting; the replay is counted.
				if j := f.getJob(t, d.githubHTTPDead); j.Status != queue.StatusPending || j.Attempts != 1 || j.Replays != 1 {
					t.Errorf("after replay: status %s, attempts %d, replays %d; want pending, 1, 1", j.Status, j.Attempts, j.Replays)
				}
			},
		},
		{
			name: "replay one/pending job is not dead", method: http.MethodPost,
			target: func(d adminData) string { return fmt.Sprintf("/webhook/jobs/%d/replay", d.githubHTTPPending) }, wantStatus: http.StatusConflict,
			check: wantError("is not dead"),
		},
		{
			name: "replay one/running job is not dead", method: http.MethodPost,
			target: func(d adminData) string { return fmt.Sprintf("/webhook/jobs/%d/replay", d.stripeHTTPRunning) }, wantStatus: http.StatusConflict,
			check: wantError("is not dead"),
		},
		{
			name: "replay one/not found", method: http.MethodPost,
			target: fixed("/webhook/jobs/999999/replay"), wantStatus: http.StatusNotFound,
			check: wantError("job 999999 not found"),
		},
		{
			name: "replay all dead/of one source only", method: http.MethodPost,
			target: fixed("/webhook/replay?status=dead&source=stripe"), wantStatus: http.StatusOK,
			check: func(t *testing.T, f *adminFixture, d adminData, rec *httptest.ResponseRecorder) {
				if r := decode[adminapi.ReplayResponse](t, rec); r.Replayed != 1 || r.ID != 0 {
					t.Errorf("response = %+v, want replayed 1", r)
				}
				if j := f.getJob(t, d.stripeHTTPDead); j.Status != queue.StatusPending {
					t.Errorf("stripe dead job: %s, want pending", j.Status)
				}
				if j := f.getJob(t, d.githubHTTPDead); j.Status != queue.StatusDead {
					t.Errorf("github dead job: %s, want still dead", j.Status)
				}
			},
		},
		{
			name: "replay all dead/every source", method: http.MethodPost,
			target: fixed("/webhook/replay?status=dead"), wantStatus: http.StatusOK,
			check: func(t *testing.T, f *adminFixture, d adminData, rec *httptest.ResponseRecorder) {
				if r := decode[adminapi.ReplayResponse](t, rec); r.Replayed != 2 {
					t.Errorf("replayed = %d, want 2", r.Replayed)
				}
			},
		},
		{
			name: "replay all dead/by target with nothing dead", method: http.MethodPost,
			target: fixed("/webhook/replay?status=dead&target=exec"), wantStatus: http.StatusOK,
			check: func(t *testing.T, f *adminFixture, d adminData, rec *httptest.ResponseRecorder) {
				if r := decode[adminapi.ReplayResponse](t, rec); r.Replayed != 0 {
					t.Errorf("replayed = %d, want 0", r.Replayed)
				}
			},
		},
		{
			name: "discard/done job and its event", method: http.MethodDelete,
			target: func(d adminData) string { return fmt.Sprintf("/webhook/jobs/%d", d.githubExecDone) }, wantStatus: http.StatusOK,
			check: func(t *testing.T, f *adminFixture, d adminData, rec *httptest.ResponseRecorder) {
				if r := decode[adminapi.DiscardResponse](t, rec); r.ID != d.githubExecDone || !r.Discarded {
					t.Errorf("response = %+v", r)
				}
				if _, err := f.store.GetJob(t.Context(), d.githubExecDone); !errors.Is(err, queue.ErrNotFound) {
					t.Errorf("after discard: get job err = %v, want ErrNotFound", err)
				}
				if rec := f.do(t, http.MethodGet, fmt.Sprintf("/webhook/jobs/%d", d.githubExecDone)); rec.Code != http.StatusNotFound {
					t.Errorf("GET after discard = %d, want 404", rec.Code)
				}
			},
		},
		{
			name: "discard/running job refused", method: http.MethodDelete,
			target: func(d adminData) string { return fmt.Sprintf("/webhook/jobs/%d", d.stripeHTTPRunning) }, wantStatus: http.StatusConflict,
			check: func(t *testing.T, f *adminFixture, d adminData, rec *httptest.ResponseRecorder) {
				wantError("is running")(t, f, d, rec)
				if j := f.getJob(t, d.stripeHTTPRunning); j.Status != queue.StatusRunning {
					t.Errorf("running job now %s", j.Status)
				}
			},
		},
		{
			name: "discard/not found", method: http.MethodDelete,
			target: fixed("/webhook/jobs/999999"), wantStatus: http.StatusNotFound,
			check: wantError("job 999999 not found"),
		},
		{
			name: "purge/done jobs older than the app's retention", method: http.MethodPost,
			target: fixed("/webhook/purge"), wantStatus: http.StatusOK,
			check: func(t *testing.T, f *adminFixture, d adminData, rec *httptest.ResponseRecorder) {
				r := decode[adminapi.PurgeResponse](t, rec)
				if r.Purged != 1 || !r.Cutoff.Equal(adminT0.Add(-24*time.Hour)) || r.OlderThan != "24h0m0s" {
					t.Errorf("response = %+v, want 1 purged before %s", r, adminT0.Add(-24*time.Hour))
				}
				if _, err := f.store.GetJob(t.Context(), d.githubExecDone); !errors.Is(err, queue.ErrNotFound) {
					t.Errorf("old done job still there: %v", err)
				}
				if j := f.getJob(t, d.githubHTTPDead); j.Status != queue.StatusDead {
					t.Errorf("dead job touched by purge: %s", j.Status)
				}
			},
		},
		{
			name: "purge/older_than longer than every done job", method: http.MethodPost,
			target: fixed("/webhook/purge?older_than=3d"), wantStatus: http.StatusOK,
			check: func(t *testing.T, f *adminFixture, d adminData, rec *httptest.ResponseRecorder) {
				if r := decode[adminapi.PurgeResponse](t, rec); r.Purged != 0 || r.OlderThan != "72h0m0s" {
					t.Errorf("response = %+v, want 0 purged, older than 72h", r)
				}
			},
		},

		// Bad parameters: 400 naming the parameter.
		{name: "bad param/limit 0", method: http.MethodGet, target: fixed("/webhook/jobs?limit=0"), wantStatus: http.StatusBadRequest, check: wantError("invalid parameter limit")},
		{name: "bad param/limit 1001", method: http.MethodGet, target: fixed("/webhook/jobs?limit=1001"), wantStatus: http.StatusBadRequest, check: wantError("invalid parameter limit")},
		{name: "bad param/limit not a number", method: http.MethodGet, target: fixed("/webhook/jobs?limit=ten"), wantStatus: http.StatusBadRequest, check: wantError("invalid parameter limit")},
		{name: "bad param/status unknown", method: http.MethodGet, target: fixed("/webhook/jobs?status=zombie"), wantStatus: http.StatusBadRequest, check: wantError("invalid parameter status")},
		{name: "bad param/cursor negative", method: http.MethodGet, target: fixed("/webhook/jobs?cursor=-5"), wantStatus: http.StatusBadRequest, check: wantError("invalid parameter cursor")},
		{name: "bad param/unknown filter on list", method: http.MethodGet, target: fixed("/webhook/jobs?sorce=github"), wantStatus: http.StatusBadRequest, check: wantError("invalid parameter sorce")},
		{name: "bad param/id not a number", method: http.MethodGet, target: fixed("/webhook/jobs/abc"), wantStatus: http.StatusBadRequest, check: wantError("invalid parameter id")},
		{name: "bad param/id zero", method: http.MethodPost, target: fixed("/webhook/jobs/0/replay"), wantStatus: http.StatusBadRequest, check: wantError("invalid parameter id")},
		{name: "bad param/query on stats", method: http.MethodGet, target: fixed("/webhook/stats?x=1"), wantStatus: http.StatusBadRequest, check: wantError("invalid parameter x")},
		{name: "bad param/replay status done", method: http.MethodPost, target: fixed("/webhook/replay?status=done"), wantStatus: http.StatusBadRequest, check: wantError("invalid parameter status: must be dead")},
		{name: "bad param/replay without status", method: http.MethodPost, target: fixed("/webhook/replay?source=github"), wantStatus: http.StatusBadRequest, check: wantError("invalid parameter status")},
		{
			// A typo must not widen a bulk replay to every source.
			name: "bad param/replay with misspelt source replays nothing", method: http.MethodPost,
			target: fixed("/webhook/replay?status=dead&sorce=stripe"), wantStatus: http.StatusBadRequest,
			check: func(t *testing.T, f *adminFixture, d adminData, rec *httptest.ResponseRecorder) {
				wantError("invalid parameter sorce")(t, f, d, rec)
				if j := f.getJob(t, d.githubHTTPDead); j.Status != queue.StatusDead {
					t.Errorf("dead job replayed by a refused request: %s", j.Status)
				}
			},
		},
		{name: "bad param/purge older_than negative", method: http.MethodPost, target: fixed("/webhook/purge?older_than=-1h"), wantStatus: http.StatusBadRequest, check: wantError("invalid parameter older_than")},
		{name: "bad param/purge older_than garbage", method: http.MethodPost, target: fixed("/webhook/purge?older_than=soon"), wantStatus: http.StatusBadRequest, check: wantError("invalid parameter older_than")},

		// Wrong method: 405 with Allow.
		{name: "method/GET on purge", method: http.MethodGet, target: fixed("/webhook/purge"), wantStatus: http.StatusMethodNotAllowed, check: wantAllow("POST")},
		{name: "method/POST on stats", method: http.MethodPost, target: fixed("/webhook/stats"), wantStatus: http.StatusMethodNotAllowed, check: wantAllow("GET, HEAD")},
		{name: "method/PUT on a job", method: http.MethodPut, target: fixed("/webhook/jobs/1"), wantStatus: http.StatusMethodNotAllowed, check: wantAllow("GET, HEAD, DELETE")},
		{name: "method/GET on replay of one", method: http.MethodGet, target: fixed("/webhook/jobs/1/replay"), wantStatus: http.StatusMethodNotAllowed, check: wantAllow("POST")},
		{name: "method/DELETE on jobs", method: http.MethodDelete, target: fixed("/webhook/jobs"), wantStatus: http.StatusMethodNotAllowed, check: wantAllow("GET, HEAD")},

		// Unknown paths.
		{name: "path/unknown endpoint", method: http.MethodGet, target: fixed("/webhook/nope"), wantStatus: http.StatusNotFound, check: wantError("no webhook admin endpoint")},
		{name: "path/base", method: http.MethodGet, target: fixed("/webhook/"), wantStatus: http.StatusNotFound, check: wantError("no webhook admin endpoint")},
		{name: "path/too deep", method: http.MethodPost, target: fixed("/webhook/jobs/1/replay/now"), wantStatus: http.StatusNotFound, check: wantError("no webhook admin endpoint")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setupAdmin(t)
			d := f.seed(t)
			rec := f.do(t, tt.method, tt.target(d))
			if rec.Code != tt.wantStatus {
				t.Fatalf("%s %s = %d, want %d; body %s", tt.method, tt.target(d), rec.Code, tt.wantStatus, rec.Body)
			}
			tt.check(t, f, d, rec)
		})
	}
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
