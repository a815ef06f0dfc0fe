package integration

// Encryption at rest through a real Caddy: what the database holds, what
// the upstream receives, and keys that rotate, go missing and come back.

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/signature"
)

// keyFile writes a new random key to a file of the instance, mode 0600,
// and returns the encryption block's line for it. The key's value is
// registered with the log audit.
func keyFile(t *testing.T, c *caddyInstance, id string) string {
	t.Helper()
	var b [32]byte
	_, _ = rand.Read(b[:])
	v := base64.StdEncoding.EncodeToString(b[:])
	forbidInLogs(kindSecret, v)
	path := filepath.Join(c.dir, "webhook-key-"+id)
	if err := os.WriteFile(path, []byte(v+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return "key " + id + " {file." + path + "}"
}

// encryptionBlock is the webhook option's encryption block with keys, the
// first sealing, and more lines (decrypt_only).
func encryptionBlock(keys ...string) string {
	return "encryption {\n" + strings.Join(keys, "\n") + "\n}"
}

// sealMarker is a marker of one test, in every body it sends: it must
// never be found in the database's bytes or in a log. Its header form
// (headerMarker) goes into a stored header, Content-Type, which Caddy's
// access log records as it records every request header: that one must
// never be found in the database's bytes.
func sealMarker(t *testing.T) string {
	m := "E2E-SEAL-" + strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())
	forbidInLogs(kindBody, m)
	return m
}

// headerMarker is marker's form for a stored header.
func headerMarker(marker string) string { return strings.Replace(marker, "SEAL", "SEAL-HEADER", 1) }

// sealedEvent sends one GitHub push whose body carries marker and whose
// Content-Type carries its header form, and returns its body and
// Content-Type.
func sealedEvent(t *testing.T, c *caddyInstance, marker, id, kind string) ([]byte, string) {
	t.Helper()
	body := fmt.Appendf(nil, `{"id":%q,"kind":%q,"customer":"%s-customer-%s","email":"%s@example.com"}`, id, kind, marker, id, marker)
	h := signGitHub(githubSecret, id, "push", body)
	ct := "application/json; profile=" + headerMarker(marker)
	h.Set("Content-Type", ct)
	if status, resp := post(t, c.URL("/hooks/github"), h, body); status != http.StatusAccepted {
		t.Fatalf("POST %s: %d %s\n%s", id, status, resp, c.logTail())
	}
	return body, ct
}

// wantNoMarker fails when the SQLite database of c, its WAL or a backup
// holds marker or its header form.
func wantNoMarker(t *testing.T, c *caddyInstance, marker, when string) {
	t.Helper()
	db := testutil.SQLiteBytes(t, c.DBPath)
	for _, m := range []string{marker, headerMarker(marker)} {
		if n := bytes.Count(db, []byte(m)); n > 0 {
			t.Errorf("%s: the database file, its WAL and a backup hold %s %d times", when, m, n)
		}
	}
}

// jobShown is what the admin API shows of a job.
type jobShown struct {
	ID          int64  `json:"id"`
	Target      string `json:"target"`
	DeliveryID  string `json:"delivery_id"`
	Status      string `json:"status"`
	LastError   string `json:"last_error"`
	ReadError   string `json:"read_error"`
	PayloadText string `json:"payload_text"`
	Headers     []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"headers"`
}

func showJob(t *testing.T, c *caddyInstance, id int64) jobShown {
	t.Helper()
	status, body := c.adminDo(t, http.MethodGet, "/webhook/jobs/"+strconv.FormatInt(id, 10), nil)
	if status != http.StatusOK {
		t.Fatalf("GET job %d: %d %s", id, status, body)
	}
	var j jobShown
	if err := json.Unmarshal(body, &j); err != nil {
		t.Fatal(err)
	}
	return j
}

// webhookCLI runs `caddy webhook <args>` against c and returns its output.
func webhookCLI(t *testing.T, c *caddyInstance, args ...string) string {
	t.Helper()
	out, err := c.caddyCmd(t, append(append([]string{"webhook"}, args...), "--address", c.AdminAddr)...)
	if err != nil {
		t.Fatalf("caddy webhook %s: %v\n%s\n%s", strings.Join(args, " "), err, out, c.logTail())
	}
	return out
}

// testEncryptionMarker: with encryption on, events whose body and headers
// carry a marker, and an upstream's answer quoting another, leave neither
// in the database file, its WAL or a backup; the upstream receives the
// bytes as sent, with a forwarded signature that verifies; a filter picks
// and a transform reshapes them; and show and the admin API read them
// decrypted.
func testEncryptionMarker(t *testing.T) {
	t.Parallel()
	marker := sealMarker(t)
	reply := "E2E-SEAL-REPLY-" + strconv.Itoa(os.Getpid())
	signed := newUpstream(t, always(http.StatusOK))
	shaped := newUpstream(t, always(http.StatusOK))
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprintf(w, "rejected: %s", reply)
	}))
	t.Cleanup(echo.Close)
	c := newCaddy(t)
	c.start(t, caddyConfig{
		Webhook: encryptionBlock(keyFile(t, c, "2026-12")),
		Site: receiver("/hooks/github", "github", "github", "{env.E2E_GITHUB_SECRET}",
			"ordering_key json customer",
			toHTTP(signed.URL("/signed"), "name signed", "sign {env.E2E_STANDARD_SECRET}"),
			toHTTP(shaped.URL("/shaped"), "name shaped", `filter body.kind == "order"`, "transform {\n\tbody `{\"order\": body.id}`\n}"),
			toHTTP(echo.URL+"/echo", "name echo", "max_attempts 1")),
	})

	sent := map[string][]byte{}
	var ct string
	for i := range 12 {
		id := fmt.Sprintf("seal-%02d", i)
		kind := "other"
		if i%2 == 0 {
			kind = "order"
		}
		sent[id], ct = sealedEvent(t, c, marker, id, kind)
	}
	signed.waitFor(t, "12 answered deliveries", func(ds []delivery) bool { return answered(ds) == 12 })
	shaped.waitFor(t, "6 answered deliveries", func(ds []delivery) bool { return answered(ds) == 6 })
	var jobs []jobRow
	testutil.Eventually(t, func() bool {
		jobs = c.jobs(t, "github")
		n := 0
		for _, j := range jobs {
			if j.Status == "done" || j.Status == "dead" {
				n++
			}
		}
		return n == 30
	}, func() string { return "30 jobs finished; have " + rowsString(jobs) })

	verifier, err := signature.New(signature.Config{Scheme: signature.SchemeStandard, Secrets: []string{standardSecret}})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range signed.deliveries() {
		if !bytes.Equal(d.Body, sent[d.Key]) || d.Header.Get("Content-Type") != ct {
			t.Errorf("signed upstream got %s with Content-Type %q, want the bytes and header as sent", d.Body, d.Header.Get("Content-Type"))
		}
		if _, err := verifier.Verify(signature.Request{Method: http.MethodPost, Header: d.Header, Body: d.Body}); err != nil {
			t.Errorf("forwarded signature of %s does not verify: %v", d.Key, err)
		}
	}
	for _, d := range shaped.deliveries() {
		var got struct{ Order string }
		if err := json.Unmarshal(d.Body, &got); err != nil || !bytes.Contains(sent[got.Order], []byte(`"kind":"order"`)) {
			t.Errorf("shaped upstream got %s, want {\"order\": <id>} of an order only", d.Body)
		}
	}
	for _, j := range jobs {
		if strings.Contains(j.LastError, reply) || j.Status == "dead" && !strings.HasPrefix(j.LastError, "\x02") {
			t.Errorf("job %d's stored last error %q: want it sealed", j.ID, j.LastError)
		}
		if j.Target != "echo" {
			continue
		}
		shown := showJob(t, c, j.ID)
		if shown.PayloadText != string(sent[j.DeliveryID]) || !strings.Contains(shown.LastError, reply) || len(shown.Headers) == 0 || shown.Headers[0].Value != ct {
			t.Errorf("admin API shows job %d as %+v; want the body, the header and the upstream's answer as they were", j.ID, shown)
		}
	}
	out := webhookCLI(t, c, "show", strconv.FormatInt(jobs[0].ID, 10))
	if !strings.Contains(out, marker+"@example.com") {
		t.Errorf("caddy webhook show does not print the decrypted payload:\n%s", out)
	}
	if out := webhookCLI(t, c, "stats"); !strings.Contains(out, "2026-12") {
		t.Errorf("caddy webhook stats does not count the values under 2026-12:\n%s", out)
	}
	// The rule test reads the stored event decrypted, and a resend sends
	// it again as it was received.
	var shapedJob, signedJob jobRow
	for _, j := range jobs {
		switch {
		case j.Target == "shaped" && shapedJob.ID == 0:
			shapedJob = j
		case j.Target == "signed" && signedJob.ID == 0:
			signedJob = j
		}
	}
	if out := webhookCLI(t, c, "rules", "test", "--job", strconv.FormatInt(shapedJob.ID, 10)); !strings.Contains(out, `{"order":"`+shapedJob.DeliveryID+`"}`) {
		t.Errorf("rules test on the encrypted job %d:\n%s", shapedJob.ID, out)
	}
	webhookCLI(t, c, "resend", strconv.FormatInt(signedJob.ID, 10))
	if ds := signed.waitFor(t, "the resent event", func(ds []delivery) bool { return answered(ds) == 13 }); !bytes.Equal(ds[12].Body, sent[signedJob.DeliveryID]) {
		t.Errorf("the resend sent %s, want %s as received", ds[12].Body, sent[signedJob.DeliveryID])
	}
	for _, m := range []string{marker, reply} {
		wantNoMarker(t, c, m, "running")
	}
	c.stop(t)
	for _, m := range []string{marker, reply} {
		wantNoMarker(t, c, m, "stopped")
	}
}

// answered counts the deliveries an upstream answered.
func answered(ds []delivery) int {
	n := 0
	for _, d := range ds {
		if d.Status != 0 {
			n++
		}
	}
	return n
}

// testEncryptionRotation: a queue that ran without encryption ends fully
// encrypted after encryption is turned on and a rekey runs, nothing plain
// left in the file or its WAL; a rotation to a second key, the first one
// removed and a restart leave every stored event showing and replaying;
// an event under a removed key fails by its name, and replays once the
// key is back.
func testEncryptionRotation(t *testing.T) {
	t.Parallel()
	marker := sealMarker(t)
	up := newUpstream(t, always(http.StatusBadRequest))
	c := newCaddy(t)
	k1, k2 := keyFile(t, c, "2026-06"), keyFile(t, c, "2026-12")
	cfg := func(webhook string) caddyConfig {
		return caddyConfig{
			Webhook: "max_attempts 1\n" + webhook,
			Site:    githubSite(up.URL("/github")),
		}
	}
	// No encryption: events dead with the upstream's refusal.
	c.start(t, cfg(""))
	sent := map[string][]byte{}
	for i := range 6 {
		id := fmt.Sprintf("plain-%d", i)
		sent[id], _ = sealedEvent(t, c, marker, id, "order")
	}
	for id := range sent {
		c.waitJobs(t, "github", id, "dead")
	}

	// Encryption on, then a rekey of what was stored plain.
	c.reload(t, cfg(encryptionBlock(k1)))
	sent["sealed-1"], _ = sealedEvent(t, c, marker, "sealed-1", "order")
	c.waitJobs(t, "github", "sealed-1", "dead")
	if out := webhookCLI(t, c, "stats"); !strings.Contains(out, "plain events: 6") {
		t.Errorf("stats before the rekey:\n%s\nwant 6 plain events", out)
	}
	out := webhookCLI(t, c, "rekey")
	if !strings.Contains(out, "rekey done") || !strings.Contains(out, "vacuumed") {
		t.Errorf("caddy webhook rekey:\n%s\nwant it done, the file vacuumed", out)
	}
	wantNoMarker(t, c, marker, "after the first rekey")
	if out := webhookCLI(t, c, "rekey"); !strings.Contains(out, "nothing to do") {
		t.Errorf("a second rekey:\n%s\nwant nothing to do", out)
	}

	// Rotation: 2026-12 first, a rekey, 2026-06 removed, a restart.
	c.reload(t, cfg(encryptionBlock(k2, k1)))
	webhookCLI(t, c, "rekey")
	if out := webhookCLI(t, c, "stats"); strings.Contains(out, "2026-06") || !strings.Contains(out, "2026-12") {
		t.Errorf("stats after the rotation:\n%s\nwant every value under 2026-12", out)
	}
	c.stop(t)
	c.start(t, cfg(encryptionBlock(k2)))
	up.setScript(always(http.StatusOK))
	for id, body := range sent {
		js := c.jobsFor(t, "github", id)
		if len(js) != 1 {
			t.Fatalf("jobs of %s: %s", id, rowsString(js))
		}
		if shown := showJob(t, c, js[0].ID); shown.PayloadText != string(body) || !strings.Contains(shown.LastError, "upstream answered 400") {
			t.Errorf("after the restart, job of %s shows %+v", id, shown)
		}
	}
	webhookCLI(t, c, "replay", "--all-dead")
	for id, body := range sent {
		c.waitJobs(t, "github", id, "done")
		if ds := up.forKey(id); len(ds) != 2 || !bytes.Equal(ds[1].Body, body) {
			t.Errorf("replayed %s: upstream got %s, want the body as sent", id, summarize(ds))
		}
	}
	wantNoMarker(t, c, marker, "after the rotation")

	// 2026-06 first again for one event, held by a pause, then removed.
	c.reload(t, cfg(encryptionBlock(k1, k2)))
	webhookCLI(t, c, "pause", "--source", "github")
	late, _ := sealedEvent(t, c, marker, "late-1", "order")
	c.reload(t, cfg(encryptionBlock(k2)))
	if n := countLog(t, c, "not list", `"key_id":"2026-06"`); n == 0 {
		t.Errorf("the load did not warn of the values under 2026-06\n%s", c.logTail())
	}
	webhookCLI(t, c, "resume", "--source", "github")
	js := c.waitJobs(t, "github", "late-1", "dead")
	shown := showJob(t, c, js[0].ID)
	if !strings.Contains(shown.LastError, "key 2026-06") || !strings.Contains(shown.ReadError, "2026-06") || shown.PayloadText != "" {
		t.Errorf("the job under the removed key shows %+v; want its error and read error to name 2026-06, no payload", shown)
	}
	if ds := up.forKey("late-1"); len(ds) != 0 {
		t.Errorf("the upstream got %s for the unreadable event, want nothing", summarize(ds))
	}
	// A search by content cannot see into it: it says so, by key, and
	// neither lists nor replays it.
	out = webhookCLI(t, c, "events", "--source", "github", "--where", "true")
	if !strings.Contains(out, "could not read 1 event, which was not searched") || !strings.Contains(out, "2026-06") || strings.Contains(out, "late-1") {
		t.Errorf("events --where under a removed key printed:\n%s\nwant the unread event counted, its key named, and not listed", out)
	}
	out = webhookCLI(t, c, "replay", "--where", "true", "--source", "github", "--status", "any", "--dry-run")
	if !strings.Contains(out, "could not read 1 event") || strings.Contains(out, "late-1") {
		t.Errorf("replay --where --dry-run under a removed key printed:\n%s\nwant the unread event counted and not among the matches", out)
	}
	c.reload(t, cfg(encryptionBlock(k2, k1)))
	webhookCLI(t, c, "replay", strconv.FormatInt(js[0].ID, 10))
	c.waitJobs(t, "github", "late-1", "done")
	if ds := up.forKey("late-1"); len(ds) != 1 || !bytes.Equal(ds[0].Body, late) {
		t.Errorf("after the key came back the upstream got %s, want the body as sent", summarize(ds))
	}
}

// testEncryptionPostgres: the same on PostgreSQL, where what an operator
// reads without the keys is what SELECT returns: no table holds the
// marker, and the upstream receives the bytes as sent.
func testEncryptionPostgres(t *testing.T) {
	t.Parallel()
	db := newPgTestDB(t)
	marker := sealMarker(t)
	up := newUpstream(t, sequence(http.StatusInternalServerError, http.StatusOK))
	c := newCaddy(t)
	text := c.Caddyfile(caddyConfig{
		Webhook: "backoff 100ms 200ms\n" + encryptionBlock(keyFile(t, c, "pg-1")),
		Site:    receiver("/hooks/github", "github", "github", "{env.E2E_GITHUB_SECRET}", "ordering_key json customer", toHTTP(up.URL("/github"))),
	})
	sqliteLine := "storage sqlite " + c.DBPath + "\n"
	text = strings.Replace(text, sqliteLine, "storage postgres {env."+testutil.DSNEnv+"} {\n\t\t\tschema "+db.schema+"\n\t\t}\n", 1)
	c.run(t, c.writeCaddyfile(t, text))
	sent := map[string][]byte{}
	for i := range 5 {
		id := fmt.Sprintf("pg-seal-%d", i)
		sent[id], _ = sealedEvent(t, c, marker, id, "order")
	}
	up.waitFor(t, "every event delivered after one failure", func(ds []delivery) bool {
		ok := 0
		for _, d := range ds {
			if d.Status == http.StatusOK {
				ok++
			}
		}
		return ok == len(sent)
	})
	for _, d := range up.deliveries() {
		if !bytes.Equal(d.Body, sent[d.Key]) {
			t.Errorf("upstream got %s, want the bytes as sent", d.Body)
		}
	}
	dump := testutil.PostgresBytes(t, db.dsn, db.schema)
	for _, m := range []string{marker, headerMarker(marker)} {
		if n := bytes.Count(dump, []byte(m)); n > 0 {
			t.Errorf("SELECT of the schema's tables shows %s %d times", m, n)
		}
	}
	if out := webhookCLI(t, c, "stats"); !strings.Contains(out, "pg-1") {
		t.Errorf("caddy webhook stats does not count the values under pg-1:\n%s", out)
	}
}
