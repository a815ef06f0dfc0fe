package queuetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/caddywebhook/caddywebhook/queue"
)

func testFinish(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "done", "retry", "dead"))
	jobs := map[string]*queue.Job{}
	for _, j := range claim(t, s, "w", 3) {
		jobs[j.Target] = j
	}
	at := now()
	runAt := at.Add(time.Hour)
	rec := finish(t, s,
		done(jobs["done"], at),
		retry(jobs["retry"], runAt, "503 from upstream"),
		dead(jobs["dead"], "400 from upstream"),
	)
	if !slices.Equal(rec, []bool{true, true, true}) {
		t.Fatalf("recorded = %v, want all", rec)
	}
	tests := []struct {
		target string
		status queue.Status
		err    string
		runAt  time.Time
	}{
		{"done", queue.StatusDone, "", time.Time{}},
		{"retry", queue.StatusPending, "503 from upstream", runAt},
		{"dead", queue.StatusDead, "400 from upstream", time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			d := get(t, s, jobs[tt.target].ID)
			if d.Status != tt.status || d.LastError != tt.err || d.Attempts != 1 || d.LeaseOwner != "" || !d.LeaseUntil.IsZero() {
				t.Errorf("job %+v, want %s with error %q, 1 attempt, no lease", d.JobSummary, tt.status, tt.err)
			}
			if tt.status == queue.StatusPending && !d.FinishedAt.IsZero() {
				t.Errorf("retried job finished at %v, want unset", d.FinishedAt)
			}
			if tt.status == queue.StatusDone && !d.FinishedAt.Equal(at) {
				t.Errorf("finished at %v, want %v", d.FinishedAt, at)
			}
			if !tt.runAt.IsZero() && !d.RunAt.Equal(tt.runAt) {
				t.Errorf("run at %v, want %v", d.RunAt, tt.runAt)
			}
			if len(d.History) != 1 || d.History[0].Attempt != 1 || d.History[0].Outcome != tt.status ||
				d.History[0].Error != tt.err || d.History[0].Duration != time.Millisecond || d.History[0].Started.IsZero() {
				t.Errorf("history %+v, want one attempt with outcome %s", d.History, tt.status)
			}
		})
	}
	// Nothing is claimable before the retry is due; the retry is after.
	if got := claimAt(t, s, "w", 10, runAt.Add(-time.Second)); len(got) != 0 {
		t.Errorf("claimed %v before the retry was due", ids(got))
	}
	if got := claimAt(t, s, "w", 10, runAt.Add(24*time.Hour)); len(got) != 1 || got[0].ID != jobs["retry"].ID || got[0].Attempt != 2 {
		t.Errorf("claim when due = %v, want only the retry, attempt 2", ids(got))
	}
}

func testHistory(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "mail"))
	const attempts = queue.MaxHistory + 5
	var id int64
	for i := range attempts {
		j := claimOne(t, s, "w")
		id = j.ID
		if !finish(t, s, retry(j, now(), fmt.Sprint("attempt ", i+1)))[0] {
			t.Fatal("retry not recorded")
		}
	}
	h := get(t, s, id).History
	if len(h) != queue.MaxHistory {
		t.Fatalf("history has %d entries, want %d", len(h), queue.MaxHistory)
	}
	if h[0].Attempt != attempts-queue.MaxHistory+1 || h[len(h)-1].Attempt != attempts || h[len(h)-1].Error != fmt.Sprint("attempt ", attempts) {
		t.Errorf("history runs %d..%d (last error %q), want the newest %d..%d", h[0].Attempt, h[len(h)-1].Attempt, h[len(h)-1].Error, attempts-queue.MaxHistory+1, attempts)
	}
}

// testTruncate proves a store keeps queue.SafeText of an error: cut to
// queue.MaxErrorLen bytes on a rune boundary, and with NUL, control bytes
// and invalid UTF-8 replaced (PostgreSQL's text refuses NUL and invalid
// UTF-8; an exec target's output may hold any of them).
func testTruncate(t *testing.T, s queue.Store) {
	tests := []struct {
		name string
		msg  string
		want string
	}{
		{"ascii", strings.Repeat("x", 3*queue.MaxErrorLen),
			strings.Repeat("x", queue.MaxErrorLen-len(queue.TextCut)) + queue.TextCut},
		{"multibyte at the boundary", "x" + strings.Repeat("é", queue.MaxErrorLen),
			"x" + strings.Repeat("é", (queue.MaxErrorLen-len(queue.TextCut)-1)/2) + queue.TextCut},
		{"NUL, escape and invalid UTF-8", "exit 1: \x00\xff \x1b[2J tail\r\nline two",
			"exit 1: \uFFFD\uFFFD \uFFFD[2J tail\nline two"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enqueue(t, s, event("shop", fmt.Sprint("d", i), "mail"))
			j := claimOne(t, s, "w")
			finish(t, s, dead(j, tt.msg))
			d := get(t, s, j.ID)
			if d.LastError != tt.want {
				t.Errorf("stored error of %d bytes (valid UTF-8: %v) %.40q…, want %d bytes %.40q…",
					len(d.LastError), utf8.ValidString(d.LastError), d.LastError, len(tt.want), tt.want)
			}
			if len(d.History) != 1 || d.History[0].Error != d.LastError {
				t.Errorf("history error is not the truncated error")
			}
		})
	}
}

// testAttemptCode records what the target reported of each attempt, for
// delivered attempts too, and an exit code of 0 apart from none; a
// sub-millisecond duration keeps its nanoseconds.
func testAttemptCode(t *testing.T, s queue.Store) {
	enqueue(t, s, event("shop", "d1", "ok", "busy", "exit0", "exit2", "refused", "stopped"))
	jobs := map[string]*queue.Job{}
	for _, j := range claim(t, s, "w", 6) {
		jobs[j.Target] = j
	}
	at := now()
	coded := func(c queue.Completion, code queue.Code) queue.Completion {
		c.Code = code
		c.Duration = 412345 * time.Nanosecond
		return c
	}
	if rec := finish(t, s,
		coded(done(jobs["ok"], at), queue.CodeOf(200)),
		coded(retry(jobs["busy"], at.Add(time.Hour), "upstream answered 503"), queue.CodeOf(503)),
		coded(done(jobs["exit0"], at), queue.CodeOf(0)),
		coded(dead(jobs["exit2"], "exit status 2"), queue.CodeOf(2)),
		coded(retry(jobs["refused"], at.Add(time.Hour), "connection refused"), queue.Code{}),
	); !slices.Equal(rec, []bool{true, true, true, true, true}) {
		t.Fatalf("recorded = %v, want all", rec)
	}
	// A run a stop cut short reports no code of its own.
	stopped := retry(jobs["stopped"], at, "handed back")
	stopped.HandedBack = true
	if rec := finish(t, s, stopped); !rec[0] {
		t.Fatal("the hand-back was not recorded")
	}
	tests := []struct {
		target string
		code   queue.Code
	}{
		{"ok", queue.CodeOf(200)},
		{"busy", queue.CodeOf(503)},
		{"exit0", queue.CodeOf(0)},
		{"exit2", queue.CodeOf(2)},
		{"refused", queue.Code{}},
		{"stopped", queue.Code{}},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			h := get(t, s, jobs[tt.target].ID).History
			if len(h) != 1 || h[0].Code != tt.code {
				t.Fatalf("history %+v, want one attempt with code %v", h, tt.code)
			}
			if tt.target != "stopped" && h[0].Duration != 412345*time.Nanosecond {
				t.Errorf("duration %v, want 412.345µs as stored", h[0].Duration)
			}
		})
	}
}
