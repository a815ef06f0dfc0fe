package integration

// The log audit: every Caddy the suite runs writes its log (the default
// logger and the access log of its site) to the suite directory, and
// TestE2E/log_audit reads them all at the end for secrets, signature values
// and payload bytes.

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// What a forbidden string is, for the audit's messages.
const (
	kindSecret    = "a secret"
	kindSignature = "a signature"
	kindBody      = "payload bytes"
	// A Caddy built with CADDYWEBHOOK_E2E_RACE=1 reports races on its
	// stderr, which is the log; the audit turns them into failures.
	kindRace = "a data race report"
)

var audit struct {
	mu        sync.Mutex
	logs      []string
	forbidden map[string]string // value → kind
}

// forbidInLogs registers strings of one kind that must never appear in a
// Caddy log.
func forbidInLogs(kind string, values ...string) {
	audit.mu.Lock()
	defer audit.mu.Unlock()
	if audit.forbidden == nil {
		audit.forbidden = map[string]string{bodyMarker: kindBody, "WARNING: DATA RACE": kindRace}
	}
	for _, v := range values {
		if v != "" {
			audit.forbidden[v] = kind
		}
	}
}

// auditLogPath returns a fresh log path in the suite directory and
// registers it for the audit.
func auditLogPath(t *testing.T, name string) string {
	t.Helper()
	audit.mu.Lock()
	defer audit.mu.Unlock()
	path := filepath.Join(suiteDir, fmt.Sprintf("%03d-%s.log", len(audit.logs), name))
	audit.logs = append(audit.logs, path)
	return path
}

// leak is one forbidden string found in a log.
type leak struct {
	file    string
	line    int
	kind    string
	value   string
	context string // the text before the value, to show where it sits
}

// scanLogs returns every occurrence of a forbidden string in the logs at
// paths (missing files are skipped: an instance that never started), and how
// many lines it read.
func scanLogs(paths []string, forbidden map[string]string) (leaks []leak, lines int, err error) {
	needles := make([]string, 0, len(forbidden))
	for v := range forbidden {
		needles = append(needles, v)
	}
	sort.Strings(needles)
	for _, path := range paths {
		f, err := os.Open(path)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, 0, fmt.Errorf("open log: %w", err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		n := 0
		for sc.Scan() {
			n++
			line := sc.Text()
			for _, v := range needles {
				i := strings.Index(line, v)
				if i < 0 {
					continue
				}
				leaks = append(leaks, leak{
					file: filepath.Base(path), line: n, kind: forbidden[v], value: v,
					context: line[max(0, i-60):i],
				})
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, 0, fmt.Errorf("read log %s: %w", path, err)
		}
		lines += n
	}
	return leaks, lines, nil
}

// auditLogs fails t for every forbidden string in the logs of the instances
// that ran before it. A suite that wrote no log lines proves nothing, so it
// is skipped rather than passed.
func auditLogs(t *testing.T) {
	audit.mu.Lock()
	paths := append([]string(nil), audit.logs...)
	forbidden := make(map[string]string, len(audit.forbidden))
	for v, k := range audit.forbidden {
		forbidden[v] = k
	}
	audit.mu.Unlock()

	leaks, lines, err := scanLogs(paths, forbidden)
	if err != nil {
		t.Fatal(err)
	}
	if lines == 0 {
		t.Skip("no Caddy log to audit: run the whole TestE2E")
	}
	t.Logf("audited %d log lines of %d Caddy runs for %d forbidden strings", lines, len(paths), len(forbidden))
	const shown = 15
	for i, l := range leaks {
		if i == shown {
			t.Errorf("… and %d more", len(leaks)-shown)
			break
		}
		t.Errorf("%s:%d: %s (%q) after …%s", l.file, l.line, l.kind, l.value, l.context)
	}
}

// TestLogAuditScan shows that the audit finds what it looks for, so a clean
// TestE2E/log_audit means something.
func TestLogAuditScan(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "caddy.log")
	content := `{"msg":"handled request","webhook":{"outcome":"accepted"}}
{"msg":"handled request","request":{"headers":{"X-Hub-Signature-256":["sha256=abc123"]}}}
{"msg":"oops","body":"{\"note\":\"` + bodyMarker + `-1\"}","secret":"s3cret"}
`
	if err := os.WriteFile(log, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	forbidden := map[string]string{"abc123": kindSignature, "s3cret": kindSecret, bodyMarker: kindBody, "absent": kindSecret}
	leaks, lines, err := scanLogs([]string{log, filepath.Join(dir, "never-started.log")}, forbidden)
	if err != nil {
		t.Fatal(err)
	}
	if lines != 3 {
		t.Errorf("read %d lines, want 3", lines)
	}
	var got []string
	for _, l := range leaks {
		got = append(got, fmt.Sprintf("%d:%s", l.line, l.value))
	}
	want := []string{"2:abc123", "3:" + bodyMarker, "3:s3cret"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("leaks = %v, want %v", got, want)
	}
}
