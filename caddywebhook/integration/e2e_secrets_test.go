package integration

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Secrets of this scenario only, sent where Caddy's access log records
// request parts: Meta's verify token in the query, Asana's issued secret
// in a request header and echoed in a response header.
const (
	logMetaToken    = "e2e-meta-token-in-the-query-5f3a"
	logAsanaSecret  = "e2e0asana0header0secret0c9d8e7"
	logAsanaOld     = "e2e0asana0configured0secret0aa"
	logMetaAppToken = "e2e-meta-app-secret-b17c"
)

// testSecretsOutOfAccessLog runs the handshakes that carry a secret in the
// request line or headers through a Caddy whose access log has no filter
// at all, a plain `log`: the receiver keeps their lines out of it, logs
// its own line without them instead, and the other requests keep theirs.
func testSecretsOutOfAccessLog(t *testing.T) {
	t.Parallel()
	forbidInLogs(kindSecret, logMetaToken, logAsanaSecret, logAsanaOld, logMetaAppToken)
	up := newUpstream(t, always(http.StatusOK))
	c := newCaddy(t)
	issued := filepath.Join(c.dir, "asana.secret")
	site := "\twebhook_receiver /hooks/meta {\n\t\tsource meta\n\t\tscheme meta\n\t\tsecret " + logMetaAppToken +
		"\n\t\tverify_token " + logMetaToken + "\n\t\tto http " + up.URL("/meta") + "\n\t}\n" +
		"\twebhook_receiver /hooks/asana {\n\t\tsource asana\n\t\tscheme asana\n\t\tsecret " + logAsanaOld +
		"\n\t\tissued_secret_file " + issued + "\n\t\tto http " + up.URL("/asana") + "\n\t}\n"
	text := c.Caddyfile(caddyConfig{Site: site})
	if !strings.Contains(text, siteLog) {
		t.Fatal("the harness's Caddyfile has no site log to replace")
	}
	c.run(t, c.writeCaddyfile(t, strings.Replace(text, siteLog, "\tlog", 1)))

	send := func(method, path string, h http.Header) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, c.URL(path), nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	// Meta's verification GET (https://developers.facebook.com/docs/graph-api/webhooks/getting-started/)
	// and Asana's handshake (https://developers.asana.com/reference/createwebhook),
	// right and wrong; a wrong token is a near miss of the right one, as
	// secret as it.
	cases := []struct {
		name, method, path string
		header             http.Header
		status             int
	}{
		{"meta verification", "GET", "/hooks/meta?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=" + logMetaToken, nil, 200},
		{"meta verification, token name encoded", "GET", "/hooks/meta?hub.mode=subscribe&hub.challenge=7&hub%2Everify_token=" + logMetaToken, nil, 200},
		{"meta verification, wrong token", "GET", "/hooks/meta?hub.mode=subscribe&hub.challenge=7&hub.verify_token=" + logMetaToken + "x", nil, 401},
		{"asana handshake, issued secret", "POST", "/hooks/asana", http.Header{"X-Hook-Secret": {logAsanaSecret}}, 200},
		{"asana handshake, configured secret", "POST", "/hooks/asana", http.Header{"X-Hook-Secret": {logAsanaOld}}, 200},
	}
	for _, tc := range cases {
		if resp := send(tc.method, tc.path, tc.header); resp.StatusCode != tc.status {
			t.Errorf("%s: %d, want %d\n%s", tc.name, resp.StatusCode, tc.status, c.logTail())
		}
	}
	// An ordinary request keeps its access line.
	if resp := send("GET", "/hooks/meta?hub.mode=other", nil); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET that is no handshake: %d, want 405", resp.StatusCode)
	}
	if es := c.waitAccessLog(t, "/hooks/meta?hub.mode=other", 1); es[0].Status != http.StatusMethodNotAllowed {
		t.Errorf("access line of the ordinary request: %+v", es[0])
	}
	c.stop(t)

	raw, err := os.ReadFile(c.logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{logMetaToken, logAsanaSecret, logAsanaOld} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("the log holds the secret %q", secret)
		}
	}
	if n := bytes.Count(raw, []byte(`"request carrying a secret kept out of the access log"`)); n != len(cases) {
		t.Errorf("%d receiver lines stand in for the %d access lines dropped\n%s", n, len(cases), c.logTail())
	}
}
