package consumer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	_ "github.com/caddywebhook/caddywebhook/caddywebhook/storage/sqlite"
	_ "github.com/caddywebhook/caddywebhook/caddywebhook/targets/pull"
	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/sqlite"
	"github.com/caddywebhook/caddywebhook/signature"
)

// These tests run Caddy in this process (caddy.Load from a Caddyfile) on a
// real listener, with a real SQLite file, and talk to the consumer API
// over HTTP, as a consumer in any language would.

// The tokens reach the config as placeholders, as a user's do: Caddy logs
// the config it loads, with any secret written into it in the clear.
const (
	laptopToken = "laptop-token-0123456789abcdef"
	spareToken  = "spare-token-0123456789abcdef"
	otherToken  = "other-token-0123456789abcdef"
	hookSecret  = "test-github-secret"
)

type harness struct {
	base    string // http://127.0.0.1:port
	dbPath  string
	logPath string
}

// setup starts Caddy with a GitHub receiver whose events go to two pull
// targets, laptop and other, each with its own consumer endpoint; extra
// is added to laptop's webhook_consumer block.
func setup(t *testing.T, extra string) *harness {
	t.Helper()
	dir := t.TempDir()
	addr := testutil.FreeAddr(t)
	t.Setenv("CONSUMER_TEST_LAPTOP", laptopToken)
	t.Setenv("CONSUMER_TEST_SPARE", spareToken)
	t.Setenv("CONSUMER_TEST_OTHER", otherToken)
	h := &harness{base: "http://" + addr, dbPath: filepath.Join(dir, "queue.db"), logPath: filepath.Join(dir, "caddy.log")}
	caddyfile := fmt.Sprintf(`{
	admin off
	log {
		output file %[2]s
		level DEBUG
	}
	webhook {
		storage sqlite %[3]s
		lease 5s
		poll_interval 100ms
		max_attempts 3
		backoff 1m 10m
	}
}

http://%[1]s {
	log {
		output file %[2]s
	}
	handle /hook {
		webhook_receiver {
			source github
			scheme github
			secret %[4]s
			to pull {
				name laptop
			}
			to pull {
				name other
			}
			to pull {
				name shaped
				transform {
					body `+"`"+`{"text": "got " + body.id}`+"`"+`
					header X-Shaped `+"`"+`"yes"`+"`"+`
				}
			}
		}
	}
	handle /consume/* {
		webhook_consumer {
			token {env.CONSUMER_TEST_LAPTOP}
			token {env.CONSUMER_TEST_SPARE}
			targets laptop shaped
			%[5]s
		}
	}
	handle /other/* {
		webhook_consumer {
			token {env.CONSUMER_TEST_OTHER}
			targets other
		}
	}
}
`, addr, h.logPath, h.dbPath, hookSecret, extra)
	adapter := caddyconfig.GetAdapter("caddyfile")
	raw, _, err := adapter.Adapt([]byte(caddyfile), nil)
	if err != nil {
		t.Fatalf("adapt: %v", err)
	}
	if err := caddy.Load(raw, true); err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Cleanup(func() {
		if err := caddy.Stop(); err != nil {
			t.Errorf("stop caddy: %v", err)
		}
	})
	return h
}

// sendTyped posts one signed GitHub event of type typ and wants 202.
func (h *harness) sendTyped(t *testing.T, id, typ string) {
	t.Helper()
	body := []byte(`{"id":"` + id + `"}`)
	hdr, err := signature.Sign(signature.SchemeGitHub, hookSecret, body, signature.SignOptions{ID: id, EventType: typ})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, h.base+"/hook", bytes.NewReader(body))
	req.Header = hdr
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("send %s: %d, want 202", id, resp.StatusCode)
	}
}

// send posts one signed GitHub push event and wants 202.
func (h *harness) send(t *testing.T, id string) {
	t.Helper()
	h.sendTyped(t, id, "push")
}

// call POSTs body to path with token and returns the status and body.
func (h *harness) call(t *testing.T, method, path, token, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, h.base+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// api calls path, wants 200 and decodes the answer into v.
func (h *harness) api(t *testing.T, path string, req, v any) {
	t.Helper()
	body, _ := json.Marshal(req)
	status, b := h.call(t, http.MethodPost, "/consume/"+path, laptopToken, string(body))
	if status != http.StatusOK {
		t.Fatalf("%s: %d %s, want 200", path, status, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: decode %s: %v", path, b, err)
	}
}

func (h *harness) claim(t *testing.T, req ClaimRequest) ClaimResponse {
	t.Helper()
	var resp ClaimResponse
	h.api(t, "claim", req, &resp)
	return resp
}

func (h *harness) ack(t *testing.T, results ...Ack) AckResponse {
	t.Helper()
	var resp AckResponse
	h.api(t, "ack", AckRequest{Results: results}, &resp)
	return resp
}

// job reads a job from the database file, through a second store: the
// tests check what is on disk, not what the API says.
func (h *harness) job(t *testing.T, id int64) queue.JobDetail {
	t.Helper()
	s, err := sqlite.Open(t.Context(), sqlite.Config{Path: h.dbPath})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d, err := s.GetJob(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestUnauthorized(t *testing.T) {
	h := setup(t, "")
	h.send(t, "d1")
	// A real claim, so that the ids and fences the forged requests name
	// exist.
	got := h.claim(t, ClaimRequest{Target: "laptop"})
	if len(got.Jobs) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(got.Jobs))
	}
	j := got.Jobs[0]
	ack := fmt.Sprintf(`{"results":[{"id":%d,"fence":%d,"outcome":"done"}]}`, j.ID, j.Fence)
	extend := fmt.Sprintf(`{"leases":[{"id":%d,"fence":%d}]}`, j.ID, j.Fence)
	requests := []struct {
		name, method, path, body string
	}{
		{"claim", http.MethodPost, "/consume/claim", `{"target":"laptop"}`},
		{"claim of an unknown target", http.MethodPost, "/consume/claim", `{"target":"nope"}`},
		{"extend", http.MethodPost, "/consume/extend", extend},
		{"ack", http.MethodPost, "/consume/ack", ack},
		{"unknown endpoint", http.MethodPost, "/consume/nope", `{}`},
		{"GET", http.MethodGet, "/consume/claim", ``},
		{"bad JSON", http.MethodPost, "/consume/claim", `{`},
	}
	tokens := []struct {
		name, header string
	}{
		{"no token", ""},
		{"wrong token", "Bearer " + strings.Repeat("x", len(laptopToken))},
		{"other target's token", "Bearer " + otherToken},
		{"token as basic auth", "Basic " + laptopToken},
		{"token prefix", "Bearer " + laptopToken[:len(laptopToken)-1]},
	}
	var want []byte
	for _, tok := range tokens {
		for _, rq := range requests {
			t.Run(tok.name+"/"+rq.name, func(t *testing.T) {
				req, _ := http.NewRequest(rq.method, h.base+rq.path, strings.NewReader(rq.body))
				if tok.header != "" {
					req.Header.Set("Authorization", tok.header)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("%d %s, want 401", resp.StatusCode, b)
				}
				// One answer for all: nothing tells a target, a path or a
				// job from another.
				if want == nil {
					want = b
				}
				if !bytes.Equal(b, want) || resp.Header.Get("WWW-Authenticate") == "" {
					t.Errorf("answer %q (WWW-Authenticate %q), want %q like every other refusal", b, resp.Header.Get("WWW-Authenticate"), want)
				}
			})
		}
	}
	// The forged answers changed nothing: the job still runs in its claim.
	if d := h.job(t, j.ID); d.Status != queue.StatusRunning || d.Attempts != 1 {
		t.Errorf("job after the forged requests: %s, %d attempts; want running, 1", d.Status, d.Attempts)
	}
	// No log line holds a token, though the access log logs each request.
	logs, err := os.ReadFile(h.logPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(logs, []byte("/consume/claim")) {
		t.Fatalf("the access log has no line for the requests; the check below would prove nothing:\n%s", logs)
	}
	for _, tok := range []string{laptopToken, otherToken, laptopToken[:len(laptopToken)-1], strings.Repeat("x", len(laptopToken))} {
		if bytes.Contains(logs, []byte(tok)) {
			t.Errorf("a log line holds the token %q", tok)
		}
	}
}

func TestOtherTarget(t *testing.T) {
	h := setup(t, "")
	h.send(t, "d1")
	// laptop's consumer may not claim other's jobs, and an answer it gives
	// for one of them changes nothing.
	status, b := h.call(t, http.MethodPost, "/consume/claim", laptopToken, `{"target":"other"}`)
	if status != http.StatusForbidden || !strings.Contains(string(b), `"param":"target"`) {
		t.Errorf("claim of other with laptop's token: %d %s, want 403 naming target", status, b)
	}
	status, b = h.call(t, http.MethodPost, "/other/claim", otherToken, `{"target":"other"}`)
	var got ClaimResponse
	if status != http.StatusOK || json.Unmarshal(b, &got) != nil || len(got.Jobs) != 1 {
		t.Fatalf("claim of other: %d %s, want one job", status, b)
	}
	j := got.Jobs[0]
	res := h.ack(t, Ack{ID: j.ID, Fence: j.Fence, Outcome: "done"})
	if res.Results[0].Recorded {
		t.Errorf("laptop's consumer answered for other's job: %+v", res.Results[0])
	}
	var ext ExtendResponse
	h.api(t, "extend", ExtendRequest{Leases: []queue.Claimed{{ID: j.ID, Fence: j.Fence}}}, &ext)
	if len(ext.Lost) != 1 || ext.Lost[0] != j.ID {
		t.Errorf("laptop's consumer extending other's job: lost %v, want the job", ext.Lost)
	}
	if d := h.job(t, j.ID); d.Status != queue.StatusRunning {
		t.Errorf("other's job is %s, want running still", d.Status)
	}
}

func TestClaimAndAck(t *testing.T) {
	h := setup(t, "")
	for i := range 6 {
		h.send(t, fmt.Sprint("d", i))
	}
	got := h.claim(t, ClaimRequest{Target: "laptop", Max: 6})
	if len(got.Jobs) != 6 || got.LeaseMS != 5000 {
		t.Fatalf("claimed %d jobs, lease %dms; want 6, 5000ms", len(got.Jobs), got.LeaseMS)
	}
	for _, j := range got.Jobs {
		// The pool never touched them: this is the first attempt.
		if j.Attempt != 1 || j.Fence == 0 || j.Source != "github" || j.Target != "laptop" || j.EventType != "push" ||
			!strings.HasPrefix(j.DeliveryID, "d") || string(j.Payload) != `{"id":"`+j.DeliveryID+`"}` || j.LeaseUntil.IsZero() {
			t.Errorf("claimed %+v, want attempt 1 of a github push with its payload", j)
		}
	}
	if again := h.claim(t, ClaimRequest{Target: "laptop"}); len(again.Jobs) != 0 {
		t.Fatalf("second claim took %d jobs whose leases hold", len(again.Jobs))
	}
	j := got.Jobs
	res := h.ack(t,
		Ack{ID: j[0].ID, Fence: j[0].Fence, Outcome: "delivered", Duration: "15ms"},
		Ack{ID: j[1].ID, Fence: j[1].Fence, Outcome: "retry", Error: "local app answered 503", RetryAfter: "2h"},
		Ack{ID: j[2].ID, Fence: j[2].Fence, Outcome: "dead", Error: "local app answered 400"},
		Ack{ID: j[3].ID, Fence: j[3].Fence, Outcome: "handback"},                    // the older spelling of handed_back
		Ack{ID: j[4].ID, Fence: j[4].Fence + 1, Outcome: "done"},                    // a stale claim
		Ack{ID: j[5].ID, Fence: j[5].Fence, Outcome: "handed_back", Duration: "3s"}, // cut short by the consumer's stop
	)
	type want struct {
		recorded bool
		status   queue.Status // in the answer
		stored   queue.Status
		attempts int
		history  int
		err      string
	}
	wants := []want{
		{true, queue.StatusDone, queue.StatusDone, 1, 1, ""},
		{true, queue.StatusPending, queue.StatusPending, 1, 1, "local app answered 503"},
		{true, queue.StatusDead, queue.StatusDead, 1, 1, "local app answered 400"},
		{true, queue.StatusPending, queue.StatusPending, 0, 0, ""}, // uncharged; it never reached the app: no history
		{false, "", queue.StatusRunning, 1, 0, ""},
		{true, queue.StatusPending, queue.StatusPending, 0, 1, ""}, // uncharged; the app may have seen it: in history
	}
	names := []string{"delivered", "retry after", "dead", "handback", "stale fence", "handed back after 3s"}
	for i, w := range wants {
		t.Run(names[i], func(t *testing.T) {
			r := res.Results[i]
			if r.ID != j[i].ID || r.Recorded != w.recorded || r.Status != w.status {
				t.Errorf("answer %+v, want recorded %v, status %q", r, w.recorded, w.status)
			}
			d := h.job(t, j[i].ID)
			if d.Status != w.stored || d.Attempts != w.attempts || len(d.History) != w.history || d.LastError != w.err {
				t.Errorf("stored %s, %d attempts, %d in history, error %q; want %s, %d, %d, %q",
					d.Status, d.Attempts, len(d.History), d.LastError, w.stored, w.attempts, w.history, w.err)
			}
			if i == 0 && d.History[0].Duration != 15*time.Millisecond {
				t.Errorf("history %+v, want the duration the consumer reported", d.History)
			}
			if i == 5 && (d.History[0].Duration != 3*time.Second || d.History[0].Outcome != queue.StatusRunning || d.History[0].Attempt != 1) {
				t.Errorf("history %+v, want attempt 1 handed back after the 3s the consumer reported", d.History)
			}
			// retry_after asked for 2h: more than the 1m backoff, capped
			// by max_retry_after's default of 1h.
			if i == 1 && (d.RunAt.Before(time.Now().Add(59*time.Minute)) || d.RunAt.After(time.Now().Add(61*time.Minute))) {
				t.Errorf("retried at %s, want in 1h: the retry_after asked, capped", d.RunAt)
			}
		})
	}
	// The handed-back jobs are claimable at once, with the same attempt.
	back := h.claim(t, ClaimRequest{Target: "laptop"})
	gotBack := map[int64]int{}
	for _, b := range back.Jobs {
		gotBack[b.ID] = b.Attempt
	}
	if len(back.Jobs) != 2 || gotBack[j[3].ID] != 1 || gotBack[j[5].ID] != 1 {
		t.Errorf("claim after hand-back = %+v, want jobs %d and %d, attempt 1", back.Jobs, j[3].ID, j[5].ID)
	}
}

func TestRetryBudget(t *testing.T) {
	h := setup(t, "")
	h.send(t, "d1")
	// max_attempts 3: the third retry answer parks the job. Each attempt
	// is claimed through a second store with a clock past the backoff's
	// wait, and answered through the API.
	s, err := sqlite.Open(t.Context(), sqlite.Config{Path: h.dbPath})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for attempt := 1; attempt <= 3; attempt++ {
		jobs, err := s.Claim(t.Context(), queue.ClaimParams{
			Owner: "pull:laptop", Limit: 1, Lease: time.Minute, Now: time.Now().Add(time.Duration(attempt) * time.Hour),
			Routes: []queue.Route{{Source: "github", Target: "laptop"}},
		})
		if err != nil || len(jobs) != 1 || jobs[0].Attempt != attempt {
			t.Fatalf("claim attempt %d: %v %+v", attempt, err, jobs)
		}
		res := h.ack(t, Ack{ID: jobs[0].ID, Fence: jobs[0].Fence, Outcome: "retry", Error: "boom"})
		wantStatus := queue.StatusPending
		if attempt == 3 {
			wantStatus = queue.StatusDead
		}
		if !res.Results[0].Recorded || res.Results[0].Status != wantStatus {
			t.Fatalf("attempt %d answered %+v, want %s", attempt, res.Results[0], wantStatus)
		}
	}
}

func TestExtend(t *testing.T) {
	h := setup(t, "")
	h.send(t, "d1")
	j := h.claim(t, ClaimRequest{Target: "laptop"}).Jobs[0]
	var ext ExtendResponse
	h.api(t, "extend", ExtendRequest{Leases: []queue.Claimed{{ID: j.ID, Fence: j.Fence}, {ID: j.ID + 100, Fence: 1}, {ID: j.ID, Fence: j.Fence + 1}}}, &ext)
	if len(ext.Lost) != 2 || ext.Lost[0] != j.ID+100 || ext.Lost[1] != j.ID {
		t.Errorf("lost %v, want the unknown job and the stale fence", ext.Lost)
	}
	if d := h.job(t, j.ID); !d.LeaseUntil.After(j.LeaseUntil) {
		t.Errorf("lease until %s, want later than the claim's %s", d.LeaseUntil, j.LeaseUntil)
	}
}

func TestBadRequests(t *testing.T) {
	h := setup(t, "max_body 2KiB")
	h.send(t, "d1")
	j := h.claim(t, ClaimRequest{Target: "laptop"}).Jobs[0]
	tests := []struct {
		name, path, body string
		status           int
		param            string
	}{
		{"unknown field", "claim", `{"target":"laptop","maxx":3}`, 400, "maxx"},
		{"wrong type", "claim", `{"target":"laptop","max":"3"}`, 400, "max"},
		{"not JSON", "claim", `{"target":`, 400, ""},
		{"empty body", "claim", ``, 400, ""},
		{"two objects", "claim", `{"target":"laptop"}{}`, 400, ""},
		{"no target", "claim", `{}`, 400, "target"},
		{"negative max", "claim", `{"target":"laptop","max":-1}`, 400, "max"},
		{"bad wait", "claim", `{"target":"laptop","wait":"soon"}`, 400, "wait"},
		{"negative wait", "claim", `{"target":"laptop","wait":"-1s"}`, 400, "wait"},
		{"unknown target", "claim", `{"target":"desk"}`, 403, "target"},
		{"extend unknown field", "extend", `{"leases":[{"id":1,"fence":1,"owner":"x"}]}`, 400, "owner"},
		{"extend wrong type", "extend", `{"leases":{"id":1}}`, 400, "leases"},
		{"ack bad outcome", "ack", fmt.Sprintf(`{"results":[{"id":%d,"fence":%d,"outcome":"ok"}]}`, j.ID, j.Fence), 400, "results[0].outcome"},
		{"ack bad retry_after", "ack", fmt.Sprintf(`{"results":[{"id":%d,"fence":%d,"outcome":"retry","retry_after":"x"}]}`, j.ID, j.Fence), 400, "results[0].retry_after"},
		{"ack retry_after on done", "ack", fmt.Sprintf(`{"results":[{"id":%d,"fence":%d,"outcome":"done","retry_after":"1s"}]}`, j.ID, j.Fence), 400, "results[0].retry_after"},
		{"ack unknown field", "ack", `{"results":[],"extra":1}`, 400, "extra"},
		{"body too large", "ack", `{"results":[{"error":"` + strings.Repeat("x", 4096) + `"}]}`, 413, ""},
		{"unknown endpoint", "nope", `{}`, 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, b := h.call(t, http.MethodPost, "/consume/"+tt.path, laptopToken, tt.body)
			var e adminapi.Error
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatalf("answer %q is not an error object: %v", b, err)
			}
			if status != tt.status || e.Param != tt.param || e.Error == "" {
				t.Errorf("%d %s, want %d with param %q", status, b, tt.status, tt.param)
			}
		})
	}
	if d := h.job(t, j.ID); d.Status != queue.StatusRunning || len(d.History) != 0 {
		t.Errorf("after the bad requests the job is %s with %d attempts recorded, want running, none", d.Status, len(d.History))
	}
}

func TestLongPoll(t *testing.T) {
	h := setup(t, "max_claim 2\n\t\t\tmax_waiting 1\n\t\t\tmax_wait 3s")
	t.Run("nothing comes", func(t *testing.T) {
		start := time.Now()
		got := h.claim(t, ClaimRequest{Target: "laptop", Wait: "300ms"})
		if len(got.Jobs) != 0 || time.Since(start) < 300*time.Millisecond {
			t.Errorf("claim returned %d jobs after %s, want none after the 300ms wait", len(got.Jobs), time.Since(start))
		}
	})
	t.Run("wait capped by max_wait", func(t *testing.T) {
		start := time.Now()
		got := h.claim(t, ClaimRequest{Target: "laptop", Wait: "1h"})
		if took := time.Since(start); len(got.Jobs) != 0 || took < 3*time.Second || took > 30*time.Second {
			t.Errorf("claim returned %d jobs after %s, want none after max_wait's 3s", len(got.Jobs), took)
		}
	})
	t.Run("an event wakes the wait; max_waiting holds per token", func(t *testing.T) {
		type result struct {
			status int
			resp   ClaimResponse
			took   time.Duration
		}
		// Two waiting claims of one token at once: max_waiting 1 lets one
		// wait and refuses the other at once.
		results := make(chan result, 2)
		started := time.Now()
		for range 2 {
			go func() {
				body := `{"target":"laptop","wait":"3s","max":10}`
				req, _ := http.NewRequest(http.MethodPost, h.base+"/consume/claim", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+laptopToken)
				var r result
				if resp, err := http.DefaultClient.Do(req); err == nil {
					r.status = resp.StatusCode
					_ = json.NewDecoder(resp.Body).Decode(&r.resp)
					resp.Body.Close()
				}
				r.took = time.Since(started)
				results <- r
			}()
		}
		if r := <-results; r.status != http.StatusTooManyRequests || r.took >= time.Second {
			t.Fatalf("of two waiting claims, the first answer is %d after %s, want 429 at once", r.status, r.took)
		}
		// A claim that does not wait is never refused, and the spare
		// token has a budget of its own.
		if status, b := h.call(t, http.MethodPost, "/consume/claim", laptopToken, `{"target":"laptop"}`); status != http.StatusOK {
			t.Errorf("claim without a wait: %d %s, want 200", status, b)
		}
		if status, b := h.call(t, http.MethodPost, "/consume/claim", spareToken, `{"target":"laptop","wait":"10ms"}`); status != http.StatusOK {
			t.Errorf("the spare token's waiting claim: %d %s, want 200", status, b)
		}
		for i := range 3 {
			h.send(t, fmt.Sprint("w", i))
		}
		r := <-results
		// max 10 asked, max_claim 2 given.
		if r.status != http.StatusOK || len(r.resp.Jobs) == 0 || len(r.resp.Jobs) > 2 || r.took >= 3*time.Second {
			t.Errorf("the waiting claim: %d with %d jobs after %s, want 1 or 2 jobs before its 3s wait ended", r.status, len(r.resp.Jobs), r.took)
		}
	})
}

// TestManyConsumers: consumers claiming at once never get the same job.
func TestManyConsumers(t *testing.T) {
	h := setup(t, "")
	const n = 40
	for i := range n {
		h.send(t, fmt.Sprint("d", i))
	}
	var mu sync.Mutex
	seen := make(map[int64]int)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				body := `{"target":"laptop","max":3}`
				req, _ := http.NewRequest(http.MethodPost, h.base+"/consume/claim", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+laptopToken)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				var got ClaimResponse
				err = json.NewDecoder(resp.Body).Decode(&got)
				resp.Body.Close()
				if err != nil || len(got.Jobs) == 0 {
					return
				}
				mu.Lock()
				for _, j := range got.Jobs {
					seen[j.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Errorf("claimed %d distinct jobs, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("job %d claimed %d times while its lease held", id, c)
		}
	}
}

// TestClaimTransformed: a pull target with a transform is still a pull
// target (the pool leaves its jobs alone: the consumer's claim is the
// first attempt), and its consumer is handed the transformed request, the
// stored event staying the sender's bytes.
func TestClaimTransformed(t *testing.T) {
	h := setup(t, "")
	h.send(t, "s1")
	got := h.claim(t, ClaimRequest{Target: "shaped", Max: 5})
	if len(got.Jobs) != 1 {
		t.Fatalf("claimed %d jobs of the transformed pull target, want 1", len(got.Jobs))
	}
	j := got.Jobs[0]
	if j.Attempt != 1 {
		t.Errorf("attempt %d, want 1: the pool must not deliver a transformed pull target's jobs", j.Attempt)
	}
	if string(j.Payload) != `{"text":"got s1"}` {
		t.Errorf("payload %s, want the transformed body", j.Payload)
	}
	shaped := false
	for _, hd := range j.Headers {
		if strings.EqualFold(hd.Name, "X-Shaped") && hd.Value == "yes" {
			shaped = true
		}
	}
	if !shaped {
		t.Errorf("headers %+v, want the transform's X-Shaped", j.Headers)
	}
	if d := h.job(t, j.ID); string(d.Payload) != `{"id":"s1"}` {
		t.Errorf("stored payload %s, want the sender's bytes", d.Payload)
	}
}
