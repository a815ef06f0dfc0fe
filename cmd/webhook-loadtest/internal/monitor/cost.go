package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/google/pprof/profile"

	"github.com/caddywebhook/caddywebhook/queue"
)

// The cost table of a profiled phase (-profile): what one accepted event
// costs in disk bytes, syscalls, commits, WAL pages and CPU by stage, read
// across the same windows as the throughput.

// procIO is /proc/<pid>/io: bytes and syscalls of a process. rchar and
// wchar count every read and write call, sockets included; read_bytes and
// write_bytes what reached the storage layer (the page cache's writeback
// charged to the process).
type procIO struct {
	rchar, wchar, syscr, syscw, readBytes, writeBytes, cancelledWrite int64
}

// parseProcIO reads the text of /proc/<pid>/io.
func parseProcIO(text string) (procIO, error) {
	var pio procIO
	fields := map[string]*int64{
		"rchar": &pio.rchar, "wchar": &pio.wchar, "syscr": &pio.syscr, "syscw": &pio.syscw,
		"read_bytes": &pio.readBytes, "write_bytes": &pio.writeBytes, "cancelled_write_bytes": &pio.cancelledWrite,
	}
	seen := 0
	for line := range strings.Lines(text) {
		name, value, ok := strings.Cut(line, ":")
		p := fields[name]
		if !ok || p == nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
		if err != nil {
			return procIO{}, fmt.Errorf("parse /proc io: %s: %w", name, err)
		}
		*p = n
		seen++
	}
	if seen != len(fields) {
		return procIO{}, fmt.Errorf("parse /proc io: %d of %d fields", seen, len(fields))
	}
	return pio, nil
}

func (a procIO) sub(b procIO) procIO {
	return procIO{a.rchar - b.rchar, a.wchar - b.wchar, a.syscr - b.syscr, a.syscw - b.syscw,
		a.readBytes - b.readBytes, a.writeBytes - b.writeBytes, a.cancelledWrite - b.cancelledWrite}
}

func (a procIO) add(b procIO) procIO {
	return procIO{a.rchar + b.rchar, a.wchar + b.wchar, a.syscr + b.syscr, a.syscw + b.syscw,
		a.readBytes + b.readBytes, a.writeBytes + b.writeBytes, a.cancelledWrite + b.cancelledWrite}
}

// coreTimes is one core's line of /proc/stat, in clock ticks.
type coreTimes struct {
	name                string // cpu0, cpu1, …
	idle, iowait, total int64  // total: user through steal
}

// parseProcStat reads the per-core lines of /proc/stat (not the "cpu"
// line, which sums them).
func parseProcStat(text string) ([]coreTimes, error) {
	var out []coreTimes
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		// user nice system idle iowait irq softirq steal; guest time is
		// already in user.
		var v [8]int64
		for i := range v {
			n, err := strconv.ParseInt(f[i+1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("parse /proc/stat: %s: %w", f[0], err)
			}
			v[i] = n
		}
		ct := coreTimes{name: f[0], idle: v[3], iowait: v[4]}
		for _, n := range v {
			ct.total += n
		}
		out = append(out, ct)
	}
	if len(out) == 0 {
		return nil, errors.New("parse /proc/stat: no per-core line")
	}
	return out, nil
}

// coreIdle sums a core's ticks over the windows.
type coreIdle struct {
	name                string
	idle, iowait, total int64
}

// addIdle adds the ticks between two readings of /proc/stat to sum, core
// by core.
func addIdle(sum []coreIdle, a, b []coreTimes) []coreIdle {
	for i, bt := range b {
		if i >= len(a) || a[i].name != bt.name {
			continue
		}
		for len(sum) <= i {
			sum = append(sum, coreIdle{name: b[len(sum)].name})
		}
		sum[i].idle += bt.idle - a[i].idle
		sum[i].iowait += bt.iowait - a[i].iowait
		sum[i].total += bt.total - a[i].total
	}
	return sum
}

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

// walTail follows a WAL file as SQLite writes it and counts the page
// number of every committed frame it sees. It reads the 24-byte frame
// headers only: a frame belongs to the WAL's current generation when it
// carries the header's salts, and is committed once a later (or its own)
// frame of the same generation has a commit size. When a checkpoint has
// let SQLite start the WAL again (new salts), the tail starts again at
// its first frame; the frames of a generation that began and ended
// between two polls are not seen, so the counts are a sample.
type walTail struct {
	r        io.ReaderAt
	salt     [8]byte
	pageSize int64
	next     int64 // the generation's first frame not yet counted
	pages    map[uint32]int64
	frames   int64
}

func newWALTail(r io.ReaderAt) *walTail { return &walTail{r: r, pages: map[uint32]int64{}} }

// poll counts the frames committed since the last poll.
func (t *walTail) poll() error {
	const hdr, fhdr = 32, 24
	var h [hdr]byte
	if n, _ := t.r.ReadAt(h[:], 0); n < hdr {
		return nil // empty: truncated by a checkpoint, nothing written since
	}
	if magic := binary.BigEndian.Uint32(h[:]); magic&^1 != 0x377f0682 {
		return fmt.Errorf("read wal: bad magic %#x", magic)
	}
	ps := int64(binary.BigEndian.Uint32(h[8:]))
	if ps == 1 {
		ps = 65536
	}
	if ps < 512 || ps&(ps-1) != 0 {
		return fmt.Errorf("read wal: bad page size %d", ps)
	}
	if !bytes.Equal(h[16:24], t.salt[:]) || ps != t.pageSize {
		copy(t.salt[:], h[16:24])
		t.pageSize, t.next = ps, 0
	}
	var fh [fhdr]byte
	var pending []uint32
	for i := t.next; ; i++ {
		if n, _ := t.r.ReadAt(fh[:], hdr+i*(fhdr+ps)); n < fhdr || !bytes.Equal(fh[8:16], t.salt[:]) {
			return nil
		}
		pending = append(pending, binary.BigEndian.Uint32(fh[:]))
		if binary.BigEndian.Uint32(fh[4:]) == 0 {
			continue
		}
		for _, pg := range pending {
			t.pages[pg]++
		}
		t.frames += int64(len(pending))
		pending, t.next = pending[:0], i+1
	}
}

// walEvery is how often the tail reads the WAL during a profiled window.
const walEvery = 50 * time.Millisecond

// followWAL polls the phase's WAL file until stop is called, which
// returns the tail.
func followWAL(path string) (stop func() *walTail) {
	f, err := os.Open(path + "-wal")
	if err != nil {
		return func() *walTail { return nil }
	}
	t := newWALTail(f)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(walEvery)
		defer tick.Stop()
		for {
			if t.poll() != nil {
				return
			}
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	return func() *walTail {
		close(quit)
		<-done
		t.poll()
		f.Close()
		return t
	}
}

// writerVars reads the store write counters of a Caddy instance from its
// expvars (the webhook_writers variable of /debug/vars) and sums those of
// the stores whose key ends in suffix: "sqlite:" + the phase's path, or
// "/" + the phase's schema.
func (c *caddyProc) writerVars(ctx context.Context, suffix string) (queue.WriterStats, bool, error) {
	out, err := c.adminDo(ctx, http.MethodGet, "/debug/vars", nil)
	if err != nil {
		return queue.WriterStats{}, false, err
	}
	var vars struct {
		Writers map[string]queue.WriterStats `json:"webhook_writers"`
	}
	if err := json.Unmarshal(out, &vars); err != nil {
		return queue.WriterStats{}, false, fmt.Errorf("decode /debug/vars: %w", err)
	}
	var sum queue.WriterStats
	found := false
	for k, st := range vars.Writers {
		if strings.HasSuffix(k, suffix) {
			sum.Commits += st.Commits
			sum.Requests += st.Requests
			sum.WALPages += st.WALPages
			found = true
		}
	}
	return sum, found, nil
}

// costProbe samples what the cost table needs at a window's edges: the
// instances' /proc/<pid>/io, /proc/stat, and the phase store's write
// counters.
type costProbe struct {
	cs     []*caddyProc
	suffix string // the phase's store key ends in it; "" for no store
	path   string // the phase's SQLite file, "" on postgres
	start  costSample
	end    costSample

	// mu guards the fields below: begin runs on the goroutine that
	// starts the window, finish on the one that ran the load.
	mu       sync.Mutex
	finished bool            // finish ran: a late begin does nothing
	stopWAL  func() *walTail // SQLite: ends following the WAL
	wal      *walTail        // what it counted in the window
}

// begin reads the window's first sample and starts following the WAL,
// unless the load already ended (it failed before its window).
func (p *costProbe) begin(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return
	}
	p.start = p.sample(ctx)
	if p.path != "" {
		p.stopWAL = followWAL(p.path)
	}
}

// finish reads the window's last sample.
func (p *costProbe) finish(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finished = true
	if p.start.at.IsZero() {
		return // the window never started
	}
	if p.stopWAL != nil {
		p.wal = p.stopWAL()
	}
	p.end = p.sample(ctx)
}

// costSample is one reading; a part that could not be read is left out
// of the round's figures.
type costSample struct {
	at        time.Time
	io        procIO // summed over the instances
	ioOK      bool
	cores     []coreTimes
	writers   queue.WriterStats // summed over the instances
	writersOK bool
}

// sample reads the counters. The store's are read first, as they wait for
// the writer to finish its batch; the /proc figures then bracket the
// same window as the CPU time.
func (p *costProbe) sample(ctx context.Context) costSample {
	var s costSample
	if p.suffix != "" {
		ctx, cancel := context.WithTimeout(ctx, serverSampleTimeout)
		s.writersOK = true
		for _, c := range p.cs {
			st, found, err := c.writerVars(ctx, p.suffix)
			s.writersOK = s.writersOK && err == nil && found
			s.writers.Commits += st.Commits
			s.writers.Requests += st.Requests
			s.writers.WALPages += st.WALPages
		}
		cancel()
	}
	s.at = time.Now()
	s.ioOK = true
	for _, c := range p.cs {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(c.cmd.Process.Pid) + "/io")
		if err != nil {
			s.ioOK = false
			continue
		}
		pio, err := parseProcIO(string(b))
		s.ioOK = s.ioOK && err == nil
		s.io = s.io.add(pio)
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		s.cores, _ = parseProcStat(string(b))
	}
	return s
}

// phaseCost sums a profiled phase's cost figures over its rounds. Each
// part counts the events of its own windows: rate × the window it read.
type phaseCost struct {
	io       procIO
	ioEvents float64

	cores []coreIdle

	writers       queue.WriterStats
	writersEvents float64

	walByTree  map[string]int64 // frames of the WAL samples, by table or index
	walFrames  int64
	walSamples int
	pageSize   int64 // the WAL's, once read

	prof       profileCost
	profEvents float64
	profiles   int
}

// addWindow adds one round's probe readings, at the round's accepted rate.
func (pc *phaseCost) addWindow(p *costProbe, rate float64) {
	took := p.end.at.Sub(p.start.at).Seconds()
	events := rate * took
	if p.start.ioOK && p.end.ioOK {
		pc.io = pc.io.add(p.end.io.sub(p.start.io))
		pc.ioEvents += events
	}
	pc.cores = addIdle(pc.cores, p.start.cores, p.end.cores)
	if p.start.writersOK && p.end.writersOK {
		d := queue.WriterStats{
			Commits:  p.end.writers.Commits - p.start.writers.Commits,
			Requests: p.end.writers.Requests - p.start.writers.Requests,
			WALPages: p.end.writers.WALPages - p.start.writers.WALPages,
		}
		// A write connection renewed in the window starts its page count
		// again: such a window says nothing.
		if d.Commits >= 0 && d.Requests >= 0 && d.WALPages >= 0 {
			pc.writers.Commits += d.Commits
			pc.writers.Requests += d.Requests
			pc.writers.WALPages += d.WALPages
			pc.writersEvents += events
		}
	}
}

// addProfile adds one round's CPU profile, at the round's accepted rate.
// A profile lasts whole seconds, at least one, so it may outlast a shorter
// window: its events are those of the part that overlaps the window.
func (pc *phaseCost) addProfile(c profileCost, rate float64, window time.Duration) {
	if pc.prof.cpuNanos == nil {
		pc.prof = profileCost{cpuNanos: map[string]int64{}, samples: map[string]int64{}, sites: map[string]frame{}}
	}
	for k, v := range c.cpuNanos {
		pc.prof.cpuNanos[k] += v
	}
	for k, v := range c.samples {
		pc.prof.samples[k] += v
	}
	for k, v := range c.sites {
		pc.prof.sites[k] = v
	}
	pc.prof.totalNanos += c.totalNanos
	pc.prof.totalCount += c.totalCount
	pc.prof.wallNanos += c.wallNanos
	pc.profEvents += rate * float64(min(c.wallNanos, window.Nanoseconds())) / 1e9
	pc.profiles++
}

// walByTree maps the tail's pages to the table or index each belongs to,
// from SQLite's dbstat table read on a read-only connection of our own.
// Pages dbstat does not list (the free list, pages freed since) count as
// "(free or gone)".
func walByTree(ctx context.Context, path string, t *walTail) (map[string]int64, int64, error) {
	if t == nil || t.frames == 0 {
		return nil, 0, nil
	}
	db, err := sql.Open("sqlite", sqliteURI(path, true))
	if err != nil {
		return nil, 0, fmt.Errorf("open %s: %w", path, err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT pageno, name FROM dbstat`)
	if err != nil {
		return nil, 0, fmt.Errorf("read dbstat: %w", err)
	}
	defer rows.Close()
	owner := map[uint32]string{}
	for rows.Next() {
		var pg int64
		var name string
		if err := rows.Scan(&pg, &name); err != nil {
			return nil, 0, fmt.Errorf("read dbstat: %w", err)
		}
		owner[uint32(pg)] = name
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("read dbstat: %w", err)
	}
	by := map[string]int64{}
	for pg, n := range t.pages {
		name := owner[pg]
		if name == "" {
			name = "(free or gone)"
		}
		by[name] += n
	}
	return by, t.frames, nil
}

func (pc *phaseCost) addWAL(by map[string]int64, n int64) {
	if n == 0 {
		return
	}
	if pc.walByTree == nil {
		pc.walByTree = map[string]int64{}
	}
	for k, v := range by {
		pc.walByTree[k] += v
	}
	pc.walFrames += n
	pc.walSamples++
}

// costProbe returns the probe of a phase that -profile asks for, nil for
// the others.
func (r *runner) costProbe(phase string) *costProbe {
	if !slices.Contains(r.o.profile, phase) {
		return nil
	}
	p := &costProbe{cs: r.caddies}
	switch {
	case r.db == "":
	case r.o.storage == "postgres":
		p.suffix = "/" + schemaFor(r.o.schemaPrefix, r.db)
	default:
		path, err := filepath.Abs(filepath.Join(r.dir, r.db))
		if err == nil {
			p.path = path
			p.suffix = "sqlite:" + path
		}
	}
	return p
}

// addCost adds a round's readings to the phase's cost: the probe's, the
// round's CPU profiles and, on SQLite, the WAL file's frames. What cannot
// be read is logged and left out; the throughput does not depend on it.
func (r *runner) addCost(ctx context.Context, pr *phaseResult, p *costProbe, rate float64, window time.Duration) {
	if pr.cost == nil {
		pr.cost = new(phaseCost)
	}
	if !p.start.at.IsZero() {
		pr.cost.addWindow(p, rate)
	}
	for _, path := range pr.roundProfiles {
		c, err := readProfileCost(path)
		if err != nil {
			r.logf("%s: cost table: %v", pr.name, err)
			continue
		}
		pr.cost.addProfile(c, rate/float64(len(r.caddies)), window)
	}
	pr.roundProfiles = nil
	if p.path != "" {
		by, n, err := walByTree(ctx, p.path, p.wal)
		if err != nil {
			r.logf("%s: cost table: %v", pr.name, err)
		}
		pr.cost.addWAL(by, n)
		if p.wal != nil && p.wal.pageSize > 0 {
			pr.cost.pageSize = p.wal.pageSize
		}
	}
}

// writeCost prints the phase's cost table.
func (pr *phaseResult) writeCost(w io.Writer, o options) {
	pc := pr.cost
	per := func(v int64, events float64) float64 { return float64(v) / events }
	fmt.Fprintf(w, "%s: cost per accepted event\n", pr.name)
	if pc.ioEvents > 0 {
		fmt.Fprintf(w, "  disk, /proc/<caddy>/io over the windows (%.0f events): write_bytes %s, read_bytes %s, write syscalls (syscw) %.2f, read syscalls (syscr) %.2f; wchar %s, rchar %s (syscalls and chars count the sockets too)\n",
			pc.ioEvents, bytesSize(per(pc.io.writeBytes, pc.ioEvents)), bytesSize(per(pc.io.readBytes, pc.ioEvents)),
			per(pc.io.syscw, pc.ioEvents), per(pc.io.syscr, pc.ioEvents), bytesSize(per(pc.io.wchar, pc.ioEvents)), bytesSize(per(pc.io.rchar, pc.ioEvents)))
	}
	if pc.writersEvents > 0 && pc.writers.Commits > 0 {
		c := float64(pc.writers.Commits)
		fmt.Fprintf(w, "  commits, the store's counters (/debug/vars webhook_writers): %d in the windows, %.1f events/commit, %.1f writes/commit",
			pc.writers.Commits, pc.writersEvents/c, float64(pc.writers.Requests)/c)
		if o.storage == "sqlite" {
			fmt.Fprintf(w, "; WAL frames %.2f/event, %.1f/commit (SQLITE_DBSTATUS_CACHE_WRITE: pages the writer sent to the WAL)",
				per(pc.writers.WALPages, pc.writersEvents), float64(pc.writers.WALPages)/c)
			if pc.pageSize > 0 {
				// A frame is its page and a 24-byte header.
				fmt.Fprintf(w, " = %s of WAL/event", bytesSize(per(pc.writers.WALPages*(pc.pageSize+24), pc.writersEvents)))
			}
		}
		fmt.Fprintln(w)
	}
	if o.storage == "postgres" && pr.server.window > 0 && pr.rate > 0 {
		events := pr.rate * pr.server.window.Seconds()
		fmt.Fprintf(w, "  server (server-wide, other users included): %.3f write xacts/event, WAL %s/event (pg_current_wal_lsn)",
			float64(pr.server.xacts)/events, bytesSize(float64(pr.server.walBytes)/events))
		if c := pr.server.cores(); c >= 0 {
			fmt.Fprintf(w, ", CPU %.1f µs/event (the postgres processes)", c*1e6/pr.rate)
		}
		fmt.Fprintln(w)
	}
	if pc.walFrames > 0 {
		fmt.Fprintf(w, "  WAL frames by table and index: %d committed frames read from the -wal file every %s in %d window(s) (a sample: a WAL generation that began and ended between two reads is missed), pages mapped through dbstat:\n",
			pc.walFrames, walEvery, pc.walSamples)
		names := slices.Collect(maps.Keys(pc.walByTree))
		slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(pc.walByTree[b], pc.walByTree[a]), cmp.Compare(a, b)) })
		var perEvent float64
		if pc.writersEvents > 0 {
			perEvent = per(pc.writers.WALPages, pc.writersEvents)
		}
		row := func(name string, frames int64) {
			share := float64(frames) / float64(pc.walFrames)
			fmt.Fprintf(w, "    %-32s %5.1f %%", name, 100*share)
			if perEvent > 0 {
				fmt.Fprintf(w, "  %.2f frames/event", share*perEvent)
			}
			fmt.Fprintln(w)
		}
		var rest int64
		var restNames []string
		for _, n := range names {
			if f := pc.walByTree[n]; 200*f >= pc.walFrames {
				row(n, f)
			} else {
				rest += f
				restNames = append(restNames, n)
			}
		}
		if rest > 0 {
			row("under 0.5 % each: "+strings.Join(restNames, ", "), rest)
		}
	}
	if len(pc.cores) > 0 {
		fmt.Fprint(w, "  idle per core, /proc/stat over the windows (the whole machine):")
		for _, c := range pc.cores {
			if c.total > 0 {
				fmt.Fprintf(w, " %s %.0f %% (iowait %.0f %%)", c.name, 100*float64(c.idle)/float64(c.total), 100*float64(c.iowait)/float64(c.total))
			}
		}
		fmt.Fprintln(w)
	}
	if pc.profiles == 0 || pc.prof.totalCount == 0 || pc.profEvents <= 0 {
		return
	}
	p := pc.prof
	wall := float64(p.wallNanos) / 1e9
	fmt.Fprintf(w, "  CPU profile: %.2f s on-CPU (%d samples) in %.2f s of profile (%d, one per window and instance): %.2f cores busy per instance; %.0f events in the profiles\n",
		float64(p.totalNanos)/1e9, p.totalCount, wall, pc.profiles, float64(p.totalNanos)/float64(p.wallNanos), pc.profEvents)
	stages := slices.Collect(maps.Keys(p.cpuNanos))
	slices.SortFunc(stages, func(a, b string) int { return cmp.Or(cmp.Compare(p.cpuNanos[b], p.cpuNanos[a]), cmp.Compare(a, b)) })
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  stage\tµs/event\t% samples\t")
	sites := siteNames{}
	for _, st := range stages {
		name := st
		if f, ok := p.sites[st]; ok {
			name = sites.name(st, f)
		}
		fmt.Fprintf(tw, "  %s\t%.2f\t%.1f\t\n", name, float64(p.cpuNanos[st])/1e3/pc.profEvents, 100*float64(p.samples[st])/float64(p.totalCount))
	}
	fmt.Fprintf(tw, "  total\t%.2f\t100.0\t\n", float64(p.totalNanos)/1e3/pc.profEvents)
	tw.Flush()
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

// bytesSize writes a byte count as B, KiB or MiB.
func bytesSize(b float64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}
