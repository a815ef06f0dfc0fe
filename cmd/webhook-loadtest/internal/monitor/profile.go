package monitor

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/google/pprof/profile"
)

// A CPU profile of a window, its samples summed by the stage of the
// request's path they belong to.

// frame is one function on a sampled stack, with the line it was at.
type frame struct {
	fn   string
	file string
	line int64
}

const (
	modPlugin   = "github.com/caddywebhook/caddywebhook/caddywebhook."
	modSQLite   = "github.com/caddywebhook/caddywebhook/queue/sqlite."
	modPostgres = "github.com/caddywebhook/caddywebhook/queue/postgres."
	sqliteLib   = "modernc.org/sqlite/lib."
	// sqliteWriter is the prefix of the SQLite writer's methods: the
	// row of a sample under one of them is named by its statement.
	sqliteWriter = modSQLite + "(*writer)."
)

// Stage names of the cost table.
const (
	stageWriter = "writer" // placeholder: writerStage names the row
	stageOther  = "other"
)

// stageRules are the cost table's stages, in the order they are tried: a
// sample belongs to the first stage with a frame anywhere on its stack
// whose function starts with one of the prefixes. The runtime's own work
// comes first, as it runs under any goroutine; then the storage engine
// from the disk up; then the request's path from the store out to Caddy.
var stageRules = []struct {
	stage  string
	prefix []string
}{
	{"GC", []string{"runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep", "runtime.bgscavenge",
		"runtime.gcStart", "runtime.gcMarkDone", "runtime.gcMarkTermination", "runtime.markroot", "runtime.wbBufFlush"}},
	{"wake-ups (scheduler, futex)", []string{"runtime.schedule", "runtime.findRunnable", "runtime.park_m",
		"runtime.gopark", "runtime.goready", "runtime.ready", "runtime.wakep", "runtime.startm", "runtime.stopm",
		"runtime.mPark", "runtime.notesleep", "runtime.notewakeup", "runtime.futex", "runtime.sysmon",
		"runtime.goschedImpl", "runtime.gosched_m", "runtime.osyield", "runtime.usleep"}},
	{"checkpoint (WAL into the database)", []string{sqliteLib + "_sqlite3WalCheckpoint", sqliteLib + "_walCheckpoint"}},
	{"commit: fsync", []string{sqliteLib + "_unixSync", sqliteLib + "_full_fsync", "modernc.org/libc.Xfsync",
		"modernc.org/libc.Xfdatasync", "syscall.Fsync", "syscall.Fdatasync", "golang.org/x/sys/unix.Fsync",
		"golang.org/x/sys/unix.Fdatasync"}},
	{"commit: WAL frames written", []string{sqliteLib + "_sqlite3WalFrames", sqliteLib + "_pagerWalFrames"}},
	{stageWriter, []string{sqliteWriter}},
	{"postgres writer (batch, pgx)", []string{modPostgres + "(*batchWriter)", modPostgres + "(*Store).enqueueBatch",
		modPostgres + "(*Store).enqueueOne", "github.com/jackc/pgx"}},
	{"delivery (pool, targets, HTTP client)", []string{"github.com/caddywebhook/caddywebhook/queue.",
		"github.com/caddywebhook/caddywebhook/caddywebhook/targets/", "net/http.(*Transport)", "net/http.(*persistConn)", "net/http.(*Client)"}},
	{"socket syscalls (read, write)", []string{"net.(*conn).Read", "net.(*conn).Write", "net.(*netFD).",
		"internal/poll.(*FD).Read", "internal/poll.(*FD).Write"}},
	{"enqueue hand-off (to the writer)", []string{modSQLite + "(*Store).Enqueue", modSQLite + "(*Store).do",
		modPostgres + "(*batcher).enqueue", modPostgres + "(*Store).Enqueue"}},
	{"signature verify", []string{"github.com/caddywebhook/caddywebhook/signature.", "crypto/hmac.", "crypto/sha256.",
		"crypto/internal/fips140/hmac.", "crypto/internal/fips140/sha256.", "crypto/subtle."}},
	{"logging (zap)", []string{"go.uber.org/zap"}},
	{"our handler (besides verify, store)", []string{modPlugin}},
	{"Caddy HTTP (net/http, caddyhttp)", []string{"net/http.", "github.com/caddyserver/caddy/v2", "net.", "internal/poll.", "bufio.", "net/textproto."}},
}

// classify names the stage of a sampled stack, leaf first.
func classify(stack []frame) string {
	for _, r := range stageRules {
		for _, f := range stack {
			if !hasAnyPrefix(f.fn, r.prefix) {
				continue
			}
			if r.stage == stageWriter {
				return writerStage(stack)
			}
			return r.stage
		}
	}
	return stageOther
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// writerStage names a sample of the SQLite writer: the statement it runs,
// as the innermost writer method's call site (resolved to the statement's
// name by the report, which reads that line), or the writer's own Go code
// when no SQLite frame is under it.
func writerStage(stack []frame) string {
	for i, f := range stack {
		if !strings.HasPrefix(f.fn, sqliteWriter) {
			continue
		}
		for _, g := range stack[:i] {
			if strings.HasPrefix(g.fn, "modernc.org/sqlite") || strings.HasPrefix(g.fn, "database/sql") {
				return fmt.Sprintf("writer SQL: %s:%d", strings.TrimPrefix(f.fn, sqliteWriter), f.line)
			}
		}
		return "writer: Go code (encoding, batch loop)"
	}
	return stageOther
}

// stmtRE finds the prepared statement a line of the writer runs:
// w.st.insertEvent.Exec(…), queryRow(w.st.eventID, …).
var stmtRE = regexp.MustCompile(`\bst\.(\w+)\b`)

// statementOf is the prepared statement named on a source line, "" if none.
func statementOf(line string) string {
	if m := stmtRE.FindStringSubmatch(line); m != nil {
		return m[1]
	}
	return ""
}

// profileCost is a CPU profile's samples by stage.
type profileCost struct {
	cpuNanos   map[string]int64
	samples    map[string]int64
	sites      map[string]frame // writer SQL rows: their call site
	totalNanos int64
	totalCount int64
	wallNanos  int64 // the profile's duration
}

// readProfileCost parses a CPU profile (as /debug/pprof/profile serves
// it) and sums its samples by stage.
func readProfileCost(path string) (profileCost, error) {
	f, err := os.Open(path)
	if err != nil {
		return profileCost{}, fmt.Errorf("read profile: %w", err)
	}
	defer f.Close()
	p, err := profile.Parse(bufio.NewReader(f))
	if err != nil {
		return profileCost{}, fmt.Errorf("read profile %s: %w", path, err)
	}
	cpu := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			cpu = i
		}
	}
	if cpu < 0 {
		return profileCost{}, fmt.Errorf("read profile %s: no cpu sample type", path)
	}
	pc := profileCost{cpuNanos: map[string]int64{}, samples: map[string]int64{}, sites: map[string]frame{}, wallNanos: p.DurationNanos}
	var stack []frame
	for _, s := range p.Sample {
		stack = stack[:0]
		for _, loc := range s.Location {
			// Line[0] is the innermost of the functions inlined here.
			for _, ln := range loc.Line {
				if ln.Function != nil {
					stack = append(stack, frame{fn: ln.Function.Name, file: ln.Function.Filename, line: ln.Line})
				}
			}
		}
		st := classify(stack)
		if strings.HasPrefix(st, "writer SQL: ") {
			for _, f := range stack {
				if strings.HasPrefix(f.fn, sqliteWriter) {
					pc.sites[st] = f
					break
				}
			}
		}
		pc.cpuNanos[st] += s.Value[cpu]
		pc.samples[st] += s.Value[0]
		pc.totalNanos += s.Value[cpu]
		pc.totalCount += s.Value[0]
	}
	return pc, nil
}

// siteNames names the writer's SQL rows by the statement their call site
// runs, reading the line from the source the profile names (the binary
// was built from this tree); a line it cannot read keeps its site.
type siteNames map[string][]string

func (s siteNames) name(stage string, f frame) string {
	lines, ok := s[f.file]
	if !ok {
		if b, err := os.ReadFile(f.file); err == nil {
			lines = strings.Split(string(b), "\n")
		}
		s[f.file] = lines
	}
	site := fmt.Sprintf("%s:%d", filepath.Base(f.file), f.line)
	if f.line < 1 || int(f.line) > len(lines) {
		return stage
	}
	if st := statementOf(lines[f.line-1]); st != "" {
		return fmt.Sprintf("writer SQL: %s (%s)", st, site)
	}
	// A line that names no statement steps the rows of one run before it.
	return fmt.Sprintf("writer SQL: %s, rows at %s", strings.TrimPrefix(f.fn, sqliteWriter), site)
}
