package caddywebhook

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// adminDo calls the admin API of the running app in-process, as the
// dashboard does, decodes its answer into v and returns the status.
func adminDo(t *testing.T, method, path string, v any) int {
	t.Helper()
	w := httptest.NewRecorder()
	serveAdmin(w, httptest.NewRequest(method, path, nil), strings.SplitN(path, "?", 2)[0])
	if err := json.Unmarshal(w.Body.Bytes(), v); err != nil {
		t.Fatalf("%s %s: %d %s: %v", method, path, w.Code, w.Body, err)
	}
	return w.Code
}

// testKey returns a key's base64 value, derived from name, and puts it in
// the environment variable env for a config to name.
func testKey(t *testing.T, env, name string) string {
	t.Helper()
	sum := sha256.Sum256([]byte("caddywebhook test key " + name))
	v := base64.StdEncoding.EncodeToString(sum[:])
	t.Setenv(env, v)
	return v
}

// encryption is the app's encryption setting for keys given as
// id=ENV pairs, the first sealing.
func encryption(pairs ...string) map[string]any {
	var keys []map[string]any
	for _, p := range pairs {
		id, env, _ := strings.Cut(p, "=")
		keys = append(keys, map[string]any{"id": id, "key": "{env." + env + "}"})
	}
	return map[string]any{"keys": keys}
}

// TestEncryptionConfigErrors loads configs whose keys are wrong: each
// error names the key's id (when the id is one), and none quotes a value.
func TestEncryptionConfigErrors(t *testing.T) {
	good := testKey(t, "CADDYWEBHOOK_TEST_KEY", "good")
	short := base64.StdEncoding.EncodeToString([]byte("sixteen bytes!!!"))
	t.Setenv("CADDYWEBHOOK_TEST_SHORT_KEY", short)
	t.Setenv("CADDYWEBHOOK_TEST_BAD_KEY", "canary-not-base64-key!!")
	tests := []struct {
		name   string
		enc    map[string]any
		want   []string
		values []string // must not appear in the error
	}{
		{"no key", map[string]any{"keys": []any{}}, []string{"webhook: encryption: no key"}, nil},
		{"wrong length", encryption("2026-12=CADDYWEBHOOK_TEST_SHORT_KEY"), []string{"key 2026-12", "16 bytes, want 32"}, []string{short}},
		{"not base64", encryption("2026-12=CADDYWEBHOOK_TEST_BAD_KEY"), []string{"key 2026-12", "not standard base64"}, []string{"canary-not-base64"}},
		{"id twice", encryption("a=CADDYWEBHOOK_TEST_KEY", "a=CADDYWEBHOOK_TEST_KEY"), []string{"key a", "listed twice"}, []string{good}},
		{"unset placeholder", encryption("2026-12=CADDYWEBHOOK_UNSET_VARIABLE"), []string{"encryption: key 2026-12", "{env.CADDYWEBHOOK_UNSET_VARIABLE} is empty or unset"}, nil},
		{"written out", map[string]any{"keys": []any{map[string]any{"id": "2026-12", "key": good}}}, []string{"key 2026-12", "placeholder"}, []string{good}},
		// A key pasted where its id belongs: the id is not quoted.
		{"key as id", map[string]any{"keys": []any{map[string]any{"id": good, "key": "{env.CADDYWEBHOOK_TEST_KEY}"}}}, []string{"key 1", "key id"}, []string{good, good[:20]}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			err := h.loadErr(t, map[string]any{"encryption": tt.enc})
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			for _, v := range tt.values {
				if strings.Contains(err.Error(), v) {
					t.Errorf("error %q quotes a key's value", err)
				}
			}
		})
	}
}

// TestEncryptionReloadRefused reloads to keys that lack the one the
// store's ordering-key secret is under: the reload fails naming it, and
// the running config keeps serving with its keys, sealing under them.
func TestEncryptionReloadRefused(t *testing.T) {
	testKey(t, "CADDYWEBHOOK_TEST_K1", "k1")
	testKey(t, "CADDYWEBHOOK_TEST_K2", "k2")
	h := newHarness(t)
	up := newUpstream(t)
	app := func(enc map[string]any) map[string]any {
		return map[string]any{"workers": 1, "encryption": enc}
	}
	h.load(t, app(encryption("k1=CADDYWEBHOOK_TEST_K1")), githubReceiver("s", httpTarget("up", up.url)))
	if got := h.post(t, "s", "d1", "push", testBody(1)); got != http.StatusAccepted {
		t.Fatalf("POST = %d", got)
	}
	if r := up.next(t); !bytes.Equal(r.body, testBody(1)) {
		t.Fatalf("upstream got %q, want the body as sent", r.body)
	}

	err := h.loadErr(t, app(encryption("k2=CADDYWEBHOOK_TEST_K2")), githubReceiver("s", httpTarget("up", up.url)))
	if !strings.Contains(err.Error(), "k1") || !strings.Contains(err.Error(), "encryption") {
		t.Fatalf("reload without k1 = %v, want an error naming k1", err)
	}
	// The running config still receives, delivers and seals under k1.
	if got := h.post(t, "s", "d2", "push", testBody(2)); got != http.StatusAccepted {
		t.Fatalf("POST after the refused reload = %d", got)
	}
	if r := up.next(t); !bytes.Equal(r.body, testBody(2)) {
		t.Fatalf("upstream got %q after the refused reload", r.body)
	}
	st, err := h.store(t).Stats(t.Context(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Keys) != 1 || st.Keys[0].KeyID != "k1" || st.Keys[0].Values != 3 || !st.Keys[0].Listed {
		t.Errorf("Stats.Keys = %+v, want 3 values (two events, the secret) under k1, listed", st.Keys)
	}

	// With k2 first and k1 kept, the reload goes through and the rekey
	// moves everything under k2.
	h.load(t, app(encryption("k2=CADDYWEBHOOK_TEST_K2", "k1=CADDYWEBHOOK_TEST_K1")), githubReceiver("s", httpTarget("up", up.url)))
	var resp adminapi.RekeyResponse
	if code := adminDo(t, http.MethodPost, "/webhook/rekey", &resp); code != http.StatusAccepted {
		t.Fatalf("POST /webhook/rekey = %d", code)
	}
	testutil.Eventually(t, func() bool {
		return adminDo(t, http.MethodGet, "/webhook/rekey", &resp) == http.StatusOK && !resp.Running
	}, func() string { return "the rekey to end" })
	if resp.Error != "" || resp.Progress.Resealed != 3 || resp.Progress.Remaining != 0 {
		t.Errorf("rekey = %+v, want the 3 values moved under k2", resp)
	}
	logs := h.logs(t)
	found := false
	for _, l := range logs {
		found = found || l["msg"] == "rekey done"
		if bytes.Contains([]byte(l["msg"].(string)), []byte(testBodyMarker)) {
			t.Errorf("a log line holds the body: %v", l)
		}
	}
	if !found {
		t.Error("no log line says the rekey is done")
	}
	for _, v := range []string{"CADDYWEBHOOK_TEST_K1", "CADDYWEBHOOK_TEST_K2"} {
		if key := []byte(os.Getenv(v)); bytes.Contains(h.rawLogs(t), key) {
			t.Errorf("the log holds the value of %s", v)
		}
	}
}
