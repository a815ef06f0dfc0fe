package caddywebhook

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/caddywebhook/caddywebhook/queue"
)

// TestWriterStatsVar: /debug/vars' webhook_writers lists the open store
// with the writes it made, and a closed store leaves it.
func TestWriterStatsVar(t *testing.T) {
	h := newHarness(t)
	h.load(t, map[string]any{"workers": 0}, githubReceiver("gh", httpTarget("", "http://127.0.0.1:9/")))
	body := testBody(1)
	if got := h.do(t, http.MethodPost, "/hooks/gh", signed(t, testSecret, "ws-1", "push", body), bytes.NewReader(body)); got.status != http.StatusAccepted {
		t.Fatalf("answer %d %q", got.status, got.body)
	}
	key := "sqlite:" + h.dbPath
	st, ok := writerStats().(map[string]queue.WriterStats)[key]
	if !ok || st.Requests < 1 || st.Commits < 1 {
		t.Fatalf("webhook_writers[%s] = %+v, %v; want the store with its writes", key, st, ok)
	}
	h.stop(t)
	if _, ok := writerStats().(map[string]queue.WriterStats)[key]; ok {
		t.Error("a closed store is still listed")
	}
}
