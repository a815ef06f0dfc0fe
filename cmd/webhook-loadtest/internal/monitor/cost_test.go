package monitor

import (
	"bytes"
	"encoding/binary"
	"maps"
	"strings"
	"testing"

	"github.com/caddywebhook/caddywebhook/queue"
)

// stack builds a sampled stack from function names, leaf first; a name
// may end in @line.
func stack(fns ...string) []frame {
	out := make([]frame, len(fns))
	for i, fn := range fns {
		f := frame{fn: fn}
		if name, line, ok := strings.Cut(fn, "@"); ok {
			f.fn = name
			for _, c := range line {
				f.line = f.line*10 + int64(c-'0')
			}
		}
		out[i] = f
	}
	return out
}

// The stacks are shortened from a CPU profile of the ingest and e2e phases
// (go tool pprof -traces), leaf first.
func TestClassify(t *testing.T) {
	const (
		writerRun = sqliteWriter + "run"
		runTx     = sqliteWriter + "runTx"
		stmtExec  = modSQLite + "(*stmt).Exec"
		serveHTTP = "net/http.(*conn).serve"
		receiver  = modPlugin + "(*Receiver).ServeHTTP"
	)
	tests := []struct {
		name  string
		stack []frame
		want  string
	}{
		{"commit's fsync of the WAL", stack("syscall.Syscall6", "modernc.org/libc.Xfsync", sqliteLib+"_full_fsync",
			sqliteLib+"_unixSync", sqliteLib+"_walFrames", sqliteLib+"_sqlite3WalFrames", sqliteLib+"_pagerWalFrames",
			sqliteLib+"_sqlite3VdbeExec", "modernc.org/sqlite.(*stmt).exec", stmtExec, runTx+"@416", writerRun),
			"commit: fsync"},
		{"checkpoint's fsync is the checkpoint's", stack("syscall.Syscall6", "modernc.org/libc.Xfsync", sqliteLib+"_full_fsync",
			sqliteLib+"_unixSync", sqliteLib+"_walCheckpoint", sqliteLib+"_sqlite3WalCheckpoint", sqliteLib+"_pagerWalFrames",
			runTx+"@416", writerRun),
			"checkpoint (WAL into the database)"},
		{"commit writing frames", stack("syscall.Syscall6", "modernc.org/libc.Xpwrite", sqliteLib+"_unixWrite",
			sqliteLib+"_walWriteOneFrame", sqliteLib+"_sqlite3WalFrames", sqliteLib+"_pagerWalFrames", stmtExec, runTx+"@416", writerRun),
			"commit: WAL frames written"},
		{"an insert, named by its call site", stack(sqliteLib+"_sqlite3BtreeInsert", sqliteLib+"_sqlite3VdbeExec",
			"modernc.org/sqlite.(*conn).step", stmtExec, sqliteWriter+"enqueue@275", sqliteWriter+"exec", runTx+"@390", writerRun),
			"writer SQL: enqueue:275"},
		{"the writer's own Go code", stack("runtime.memmove", "github.com/caddywebhook/caddywebhook/queue/storekit.AppendHeaders",
			sqliteWriter+"enqueue@266", runTx+"@390", writerRun),
			"writer: Go code (encoding, batch loop)"},
		{"GC assist inside the handler", stack("runtime.scanobject", "runtime.gcDrainN", "runtime.gcAssistAlloc",
			"runtime.mallocgc", receiver, serveHTTP),
			"GC"},
		{"background mark worker", stack("runtime.scanobject", "runtime.gcDrain", "runtime.gcBgMarkWorker"), "GC"},
		{"the scheduler looking for work", stack("runtime.futex", "runtime.futexsleep", "runtime.notesleep", "runtime.stopm",
			"runtime.findRunnable", "runtime.schedule", "runtime.park_m", "runtime.mcall"),
			"wake-ups (scheduler, futex)"},
		{"a hand-off that wakes the writer", stack("runtime.futex", "runtime.futexwakeup", "runtime.notewakeup", "runtime.startm",
			"runtime.wakep", "runtime.ready", "runtime.goready", "runtime.chansend", modSQLite+"(*Store).do",
			modSQLite+"(*Store).Enqueue", modPlugin+"(*Receiver).store", receiver, serveHTTP),
			"wake-ups (scheduler, futex)"},
		{"the enqueue hand-off", stack("runtime.chansend", modSQLite+"(*Store).do", modSQLite+"(*Store).Enqueue",
			modPlugin+"(*Receiver).store", receiver, serveHTTP),
			"enqueue hand-off (to the writer)"},
		{"verify", stack("crypto/internal/fips140/sha256.blockAMD64", "crypto/internal/fips140/hmac.(*HMAC).Write",
			"github.com/caddywebhook/caddywebhook/signature.(*githubVerifier).Verify", modPlugin+"(*Receiver).serve", receiver, serveHTTP),
			"signature verify"},
		{"our handler", stack("runtime.mallocgc", "net/http.Header.Clone", modPlugin+"(*Receiver).serve", receiver, serveHTTP),
			"our handler (besides verify, store)"},
		{"the access log", stack("go.uber.org/zap/zapcore.(*ioCore).Write", "github.com/caddyserver/caddy/v2/modules/caddyhttp.(*Server).logRequest", serveHTTP),
			"logging (zap)"},
		{"socket write of an answer", stack("internal/runtime/syscall/linux.Syscall6", "syscall.write", "internal/poll.(*FD).Write",
			"net.(*netFD).Write", "net.(*conn).Write", "bufio.(*Writer).Flush", "net/http.(*response).finishRequest", serveHTTP),
			"socket syscalls (read, write)"},
		{"Caddy routing", stack("github.com/caddyserver/caddy/v2/modules/caddyhttp.prepareRequest",
			"github.com/caddyserver/caddy/v2/modules/caddyhttp.(*Server).ServeHTTP", "net/http.serverHandler.ServeHTTP", serveHTTP),
			"Caddy HTTP (net/http, caddyhttp)"},
		{"a delivery", stack("net/http.(*persistConn).roundTrip", "net/http.(*Transport).roundTrip",
			"github.com/caddywebhook/caddywebhook/caddywebhook/targets/http.(*Target).Deliver", "github.com/caddywebhook/caddywebhook/queue.(*Pool).deliver"),
			"delivery (pool, targets, HTTP client)"},
		{"the postgres batch writer", stack("github.com/jackc/pgx/v5/pgconn.(*PgConn).ExecParams",
			modPostgres+"(*Store).enqueueBatch", modPostgres+"(*batchWriter).write", modPostgres+"(*batchWriter).run"),
			"postgres writer (batch, pgx)"},
		{"the postgres hand-off", stack("runtime.chansend", modPostgres+"(*batcher).enqueue", modPostgres+"(*Store).Enqueue",
			modPlugin+"(*Receiver).store", receiver, serveHTTP),
			"enqueue hand-off (to the writer)"},
		{"nothing known", stack("runtime.morestack", "main.main"), stageOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classify(tt.stack); got != tt.want {
				t.Errorf("classify = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestStatementOf(t *testing.T) {
	tests := []struct {
		name, line, want string
	}{
		{"exec", "\tres, err := w.st.insertEvent.Exec(ev.Source, ev.DeliveryID)", "insertEvent"},
		{"query row", "\terr := queryRow(w.st.finish, row, string(c.Status))", "finish"},
		{"commit", "\tif _, err := w.st.commit.Exec(); err != nil {", "commit"},
		{"no statement", "\terr = each(rows, w.row[:10], func(row []driver.Value) error {", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := statementOf(tt.line); got != tt.want {
				t.Errorf("statementOf = %q, want %q", got, tt.want)
			}
		})
	}
}

// The text of /proc/<pid>/io as Linux 6 writes it.
const procIOText = `rchar: 1948201
wchar: 10311892
syscr: 31901
syscw: 58213
read_bytes: 4096
write_bytes: 10752000
cancelled_write_bytes: 8192
`

func TestParseProcIO(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    procIO
		wantErr bool
	}{
		{name: "every field", text: procIOText,
			want: procIO{rchar: 1948201, wchar: 10311892, syscr: 31901, syscw: 58213, readBytes: 4096, writeBytes: 10752000, cancelledWrite: 8192}},
		{name: "a field missing", text: strings.Replace(procIOText, "syscw: 58213\n", "", 1), wantErr: true},
		{name: "a bad number", text: strings.Replace(procIOText, "58213", "5x", 1), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProcIO(tt.text)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// Two readings of /proc/stat on a 2-core machine, 100 ticks apart on each
// core.
const (
	procStatBefore = `cpu  2000 0 1000 7000 200 0 50 0 0 0
cpu0 1000 0 500 3500 100 0 25 0 0 0
cpu1 1000 0 500 3500 100 0 25 0 0 0
intr 12345
ctxt 999
`
	procStatAfter = `cpu  2130 0 1040 7020 210 0 50 0 0 0
cpu0 1060 0 520 3510 110 0 25 0 0 0
cpu1 1070 0 520 3510 100 0 25 0 0 0
intr 12400
`
)

func TestProcStatIdle(t *testing.T) {
	tests := []struct {
		name    string
		a, b    string
		want    []coreIdle
		wantErr bool
	}{
		{name: "two cores", a: procStatBefore, b: procStatAfter, want: []coreIdle{
			{name: "cpu0", idle: 10, iowait: 10, total: 100},
			{name: "cpu1", idle: 10, iowait: 0, total: 100},
		}},
		{name: "no per-core line", a: "cpu  1 2 3 4 5 6 7 8\n", b: procStatAfter, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := parseProcStat(tt.a)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			b, err := parseProcStat(tt.b)
			if err != nil {
				t.Fatal(err)
			}
			got := addIdle(nil, a, b)
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("core %d: got %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// wal builds the bytes of a WAL file of 512-byte pages: a header with the
// salt, then a frame per page number; a negative number is a commit frame
// of that page.
type wal struct {
	bytes.Buffer
}

const walPage = 512

func (w *wal) header(salt uint32) {
	var h [32]byte
	binary.BigEndian.PutUint32(h[0:], 0x377f0682)
	binary.BigEndian.PutUint32(h[4:], 3007000)
	binary.BigEndian.PutUint32(h[8:], walPage)
	binary.BigEndian.PutUint32(h[16:], salt)
	binary.BigEndian.PutUint32(h[20:], ^salt)
	b := w.Bytes()
	if len(b) >= 32 {
		copy(b, h[:]) // a reset: SQLite rewrites the header in place
		return
	}
	w.Write(h[:])
}

func (w *wal) frames(salt uint32, at int, pages ...int) {
	for i, pg := range pages {
		var f [24 + walPage]byte
		commit := uint32(0)
		if pg < 0 {
			pg, commit = -pg, 100
		}
		binary.BigEndian.PutUint32(f[0:], uint32(pg))
		binary.BigEndian.PutUint32(f[4:], commit)
		binary.BigEndian.PutUint32(f[8:], salt)
		binary.BigEndian.PutUint32(f[12:], ^salt)
		off := 32 + (at+i)*len(f)
		b := w.Bytes()
		if off+len(f) <= len(b) {
			copy(b[off:], f[:])
			continue
		}
		w.Write(f[:])
	}
}

func TestWALTail(t *testing.T) {
	var w wal
	tail := newWALTail(bytes.NewReader(nil))
	poll := func(t *testing.T) {
		t.Helper()
		tail.r = bytes.NewReader(w.Bytes())
		if err := tail.poll(); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name   string
		write  func()
		frames int64
		pages  map[uint32]int64
	}{
		{"empty file", func() {}, 0, map[uint32]int64{}},
		{"one commit and an open transaction", func() {
			w.header(7)
			w.frames(7, 0, 2, 5, -1, 9)
		}, 3, map[uint32]int64{1: 1, 2: 1, 5: 1}},
		{"the open transaction commits", func() {
			w.frames(7, 4, -5)
		}, 5, map[uint32]int64{1: 1, 2: 1, 5: 2, 9: 1}},
		{"a reset: the old generation's frames after the new ones are not read", func() {
			w.header(8)
			w.frames(8, 0, 9, -3)
		}, 7, map[uint32]int64{1: 1, 2: 1, 3: 1, 5: 2, 9: 2}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			s.write()
			poll(t)
			if tail.frames != s.frames || !maps.Equal(tail.pages, s.pages) {
				t.Errorf("frames %d, pages %v; want %d, %v", tail.frames, tail.pages, s.frames, s.pages)
			}
		})
	}
}

// TestParseWriterCounters reads the store's counters out of a /metrics
// page, as the admin API serves it.
func TestParseWriterCounters(t *testing.T) {
	const page = `# HELP caddy_webhook_store_commits_total Write transactions the store committed.
# TYPE caddy_webhook_store_commits_total counter
caddy_webhook_store_commits_total 1234
# TYPE caddy_webhook_store_wal_frames_total counter
caddy_webhook_store_wal_frames_total 1.5e+06
caddy_webhook_store_writes_total 20480
caddy_webhook_stored_events 99
go_goroutines 42
`
	tests := []struct {
		name  string
		text  string
		want  queue.WriterStats
		found bool
	}{
		{"all three", page, queue.WriterStats{Commits: 1234, Requests: 20480, WALPages: 1_500_000}, true},
		{"empty braces", "caddy_webhook_store_commits_total{} 5\ncaddy_webhook_store_writes_total{} 6\ncaddy_webhook_store_wal_frames_total{} 7\n",
			queue.WriterStats{Commits: 5, Requests: 6, WALPages: 7}, true},
		{"a build without them", "go_goroutines 42\ncaddy_webhook_stored_events 3\n", queue.WriterStats{}, false},
		{"one missing", "caddy_webhook_store_commits_total 5\ncaddy_webhook_store_writes_total 6\n", queue.WriterStats{Commits: 5, Requests: 6}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, found, err := parseWriterCounters(tt.text)
			if err != nil || got != tt.want || found != tt.found {
				t.Errorf("parseWriterCounters = %+v, %v, %v; want %+v, %v", got, found, err, tt.want, tt.found)
			}
		})
	}
	if _, _, err := parseWriterCounters("caddy_webhook_store_commits_total many\n"); err == nil {
		t.Error("a value that is no number: no error")
	}
}
