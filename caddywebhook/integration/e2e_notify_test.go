package integration

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/signature"
)

// testNotifyDead: a job whose upstream refuses it goes dead, and the
// notify target receives one signed job.dead notice for its route.
func testNotifyDead(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, always(http.StatusBadRequest))
	ops := newUpstream(t, always(http.StatusNoContent))
	c := newCaddy(t)
	c.start(t, caddyConfig{
		Webhook: "backoff 100ms 200ms\n" +
			"notify http " + ops.URL("/notify") + " {\n" +
			"window 200ms\n" +
			"sign {env.E2E_STANDARD_SECRET}\n" +
			"}",
		Site: githubSite(up.URL("/github")),
	})
	sendGitHub(t, c, "notify-1", "push")
	js := c.waitJobs(t, "github", "notify-1", "dead")

	got := ops.waitFor(t, "a notice", func(ds []delivery) bool { return len(ds) > 0 && ds[0].Status != 0 })
	d := got[0]
	var notice struct {
		Type      string  `json:"type"`
		Source    string  `json:"source"`
		Target    string  `json:"target"`
		Count     int     `json:"count"`
		JobIDs    []int64 `json:"job_ids"`
		LastError string  `json:"last_error"`
	}
	if err := json.Unmarshal(d.Body, &notice); err != nil {
		t.Fatalf("notice body %q: %v", d.Body, err)
	}
	if notice.Type != "job.dead" || notice.Source != "github" || notice.Target != "http" || notice.Count != 1 ||
		len(notice.JobIDs) != 1 || notice.JobIDs[0] != js[0].ID {
		t.Errorf("notice = %+v, want job.dead of github/http, count 1, job %d", notice, js[0].ID)
	}
	verifier, err := signature.New(signature.Config{Scheme: signature.SchemeStandard, Secrets: []string{standardSecret}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := verifier.Verify(signature.Request{Method: http.MethodPost, Header: d.Header, Body: d.Body}); err != nil {
		t.Errorf("notice signature does not verify: %v", err)
	}
	// The notice is a job of the queue like any other, and delivered.
	var notices []jobRow
	testutil.Eventually(t, func() bool {
		notices = c.jobs(t, "_notify")
		return len(notices) == 1 && notices[0].Status == "done" && notices[0].EventType == "job.dead"
	}, func() string { return "one delivered job.dead notice in the queue; have " + rowsString(notices) })
}
