package integration

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// Secrets of testSecretEcho, each one an upstream or a program repeats.
const (
	echoBearerToken = "e2e-echoed-bearer-0123456789"
	echoBasicUser   = "deployer"
	echoBasicPass   = "e2e-echoed-basic-pw-9876543210"
	echoExecSecret  = "e2e-echoed-exec-env-5555555555"
)

// testSecretEcho: upstreams that answer with the credential they were
// sent, without the "Bearer " around it ("invalid token <token>"), or the
// password decoded out of a static Basic header, and a program that
// prints its environment's secret. None of those values may reach a
// job's last error, the admin API, a job.dead notice or a log line: each
// is redacted by the one redactor the config load builds from every
// configured secret.
func testSecretEcho(t *testing.T) {
	t.Parallel()
	forbidInLogs(kindSecret, echoBearerToken, echoBasicPass, echoExecSecret)
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case "/bearer":
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, "invalid token %s", strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		case "/basic":
			_, pw, _ := r.BasicAuth()
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, "wrong password %q for this hook", pw)
		}
	}))
	t.Cleanup(echo.Close)
	ops := newUpstream(t, always(http.StatusNoContent))
	basic := base64.StdEncoding.EncodeToString([]byte(echoBasicUser + ":" + echoBasicPass))
	c := newCaddy(t)
	c.start(t, caddyConfig{
		Webhook: "backoff 100ms 200ms\n" +
			"notify http " + ops.URL("/notify") + " {\n" +
			"window 200ms\n" +
			"}",
		Site: receiver("/hooks/github", "github", "github", "{env.E2E_GITHUB_SECRET}",
			"to http "+echo.URL+"/bearer {\n\tname bearer\n\theader Authorization \"Bearer "+echoBearerToken+"\"\n}",
			"to http "+echo.URL+"/basic {\n\tname basic\n\theader Authorization \"Basic "+basic+"\"\n}",
			"to exec /bin/sh -c \"echo deploying with $DEPLOY_TOKEN; exit 65\" {\n\tname exec\n\tenv DEPLOY_TOKEN "+echoExecSecret+"\n\tpermanent_exit_codes 65\n}",
		),
	})
	sendGitHub(t, c, "echo-1", "push")
	js := c.waitJobs(t, "github", "echo-1", "dead")
	if len(js) != 3 {
		t.Fatalf("%d dead jobs, want 3: %s", len(js), rowsString(js))
	}
	secrets := []string{echoBearerToken, echoBasicPass, echoExecSecret}
	leaks := func(where, text string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s holds the secret %q: %q", where, s, text)
			}
		}
	}
	for _, j := range js {
		leaks("last_error of "+j.Target, j.LastError)
		if !strings.Contains(j.LastError, "[redacted]") {
			t.Errorf("last_error of %s = %q, want the echoed secret [redacted]", j.Target, j.LastError)
		}
	}
	for _, j := range js {
		_, body := c.adminDo(t, http.MethodGet, fmt.Sprintf("/webhook/jobs/%d", j.ID), nil)
		leaks("the admin API's job", string(body))
	}
	_, list := c.adminDo(t, http.MethodGet, "/webhook/jobs?status=dead", nil)
	leaks("the admin API's list", string(list))
	var notices []delivery
	testutil.Eventually(t, func() bool {
		notices = ops.deliveries()
		n := 0
		for _, d := range notices {
			n += strings.Count(string(d.Body), `"job.dead"`)
		}
		return n >= 1 && len(c.jobs(t, "_notify")) > 0
	}, func() string { return "job.dead notices" })
	for _, d := range notices {
		leaks("a notice", string(d.Body))
	}
	leaks("the log", string(readLog(t, c)))
}
