package monitor

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/caddyproc"
	"github.com/caddywebhook/caddywebhook/queue"
)

// The cost table of a profiled phase (-profile): what one accepted event
// costs in disk bytes, syscalls, commits, WAL pages and CPU by stage, read
// across the same windows as the throughput.

// Names of the store's write counters in Caddy's metrics (the plugin's
// writer_metrics.go), which the cost table divides per event.
const (
	metricCommits   = "caddy_webhook_store_commits_total"
	metricWrites    = "caddy_webhook_store_writes_total"
	metricWALFrames = "caddy_webhook_store_wal_frames_total"
)

// writerCounters reads the store's write counters from an instance's
// admin /metrics: its webhook app's store, the phase's. It reports
// whether all three were there; a Caddy built before the counters were
// metrics has none.
func writerCounters(ctx context.Context, admin caddyproc.Admin) (queue.WriterStats, bool, error) {
	out, err := admin.Call(ctx, http.MethodGet, "/metrics", nil)
	if err != nil {
		return queue.WriterStats{}, false, err
	}
	return parseWriterCounters(string(out))
}

// parseWriterCounters reads the three counters from Prometheus's text
// format.
func parseWriterCounters(text string) (queue.WriterStats, bool, error) {
	var st queue.WriterStats
	dst := map[string]*int64{metricCommits: &st.Commits, metricWrites: &st.Requests, metricWALFrames: &st.WALPages}
	seen := 0
	for line := range strings.Lines(text) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), " ")
		p := dst[strings.TrimSuffix(name, "{}")]
		if !ok || p == nil {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return queue.WriterStats{}, false, fmt.Errorf("read /metrics: %s: %w", name, err)
		}
		*p = int64(v)
		seen++
	}
	return st, seen == len(dst), nil
}

// Probe samples what the cost table needs at a window's edges: the
// instances' /proc/<pid>/io, /proc/stat, and the phase store's write
// counters; on SQLite it follows the WAL file in between.
type Probe struct {
	cs    []*caddyproc.Process
	store bool   // the phase has a store to count
	path  string // the phase's SQLite file, "" on postgres
	start costSample
	end   costSample

	// mu guards the fields below: Begin runs on the goroutine that
	// starts the window, Finish on the one that ran the load.
	mu       sync.Mutex
	finished bool            // Finish ran: a late Begin does nothing
	stopWAL  func() *walTail // SQLite: ends following the WAL
	wal      *walTail        // what it counted in the window
}

// NewProbe is the probe of a window of the instances cs. store says
// whether the phase has a store (static has none); sqlitePath is its
// SQLite file, "" on PostgreSQL.
func NewProbe(cs []*caddyproc.Process, store bool, sqlitePath string) *Probe {
	return &Probe{cs: cs, store: store, path: sqlitePath}
}

// Begin reads the window's first sample and starts following the WAL,
// unless the load already ended (it failed before its window).
func (p *Probe) Begin(ctx context.Context) {
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

// Finish reads the window's last sample.
func (p *Probe) Finish(ctx context.Context) {
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

// sample reads the counters. The store's are read first, through a
// /metrics scrape, the slowest of the reads; the /proc figures then
// bracket the same window as the CPU time.
func (p *Probe) sample(ctx context.Context) costSample {
	var s costSample
	if p.store {
		ctx, cancel := context.WithTimeout(ctx, serverSampleTimeout)
		s.writersOK = true
		for _, c := range p.cs {
			st, found, err := writerCounters(ctx, c.Admin())
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
		text, err := c.IO()
		if err != nil {
			s.ioOK = false
			continue
		}
		pio, err := parseProcIO(text)
		s.ioOK = s.ioOK && err == nil
		s.io = s.io.add(pio)
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		s.cores, _ = parseProcStat(string(b))
	}
	return s
}

// Cost sums a profiled phase's cost figures over its rounds. Each part
// counts the events of its own windows: rate × the window it read.
type Cost struct {
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

// Add adds a round's readings at the round's accepted rate: the probe's,
// the round's CPU profiles (one per instance, each at the instance's
// share of the rate, over a window) and, on SQLite, the WAL file's
// frames. What cannot be read is returned to be logged and left out; the
// throughput does not depend on it.
func (pc *Cost) Add(ctx context.Context, p *Probe, rate float64, window time.Duration, profiles []string) []error {
	var errs []error
	if !p.start.at.IsZero() {
		pc.addWindow(p, rate)
	}
	for _, path := range profiles {
		c, err := readProfileCost(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		pc.addProfile(c, rate/float64(len(p.cs)), window)
	}
	if p.path != "" {
		by, n, err := walByTree(ctx, p.path, p.wal)
		if err != nil {
			errs = append(errs, err)
		}
		pc.addWAL(by, n)
		if p.wal != nil && p.wal.pageSize > 0 {
			pc.pageSize = p.wal.pageSize
		}
	}
	return errs
}

// addWindow adds one round's probe readings, at the round's accepted rate.
func (pc *Cost) addWindow(p *Probe, rate float64) {
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
func (pc *Cost) addProfile(c profileCost, rate float64, window time.Duration) {
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

func (pc *Cost) addWAL(by map[string]int64, n int64) {
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

// Missing names the sources of the table that gave nothing in any
// window, whose rows the table leaves out: "/proc io", "/proc/stat",
// "store counters", "WAL frames" (SQLite only) and "CPU profile".
func (pc *Cost) Missing(sqlite bool) []string {
	var out []string
	for _, m := range []struct {
		name string
		none bool
	}{
		{"/proc io", pc.ioEvents <= 0 || pc.io.syscw <= 0},
		{"/proc/stat", len(pc.cores) == 0},
		{"store counters", pc.writers.Commits <= 0 || sqlite && pc.writers.WALPages <= 0},
		{"WAL frames", sqlite && pc.walFrames <= 0},
		{"CPU profile", pc.profiles == 0 || pc.prof.totalCount <= 0},
	} {
		if m.none {
			out = append(out, m.name)
		}
	}
	return out
}

// Write prints the cost table of the phase name, which accepted rate
// events a second in its windows; on PostgreSQL server has the server's
// counters over them.
func (pc *Cost) Write(w io.Writer, name string, sqlite bool, rate float64, server ServerFigures) {
	per := func(v int64, events float64) float64 { return float64(v) / events }
	fmt.Fprintf(w, "%s: cost per accepted event\n", name)
	if pc.ioEvents > 0 {
		fmt.Fprintf(w, "  disk, /proc/<caddy>/io over the windows (%.0f events): write_bytes %s, read_bytes %s, write syscalls (syscw) %.2f, read syscalls (syscr) %.2f; wchar %s, rchar %s (syscalls and chars count the sockets too)\n",
			pc.ioEvents, bytesSize(per(pc.io.writeBytes, pc.ioEvents)), bytesSize(per(pc.io.readBytes, pc.ioEvents)),
			per(pc.io.syscw, pc.ioEvents), per(pc.io.syscr, pc.ioEvents), bytesSize(per(pc.io.wchar, pc.ioEvents)), bytesSize(per(pc.io.rchar, pc.ioEvents)))
	}
	if pc.writersEvents > 0 && pc.writers.Commits > 0 {
		c := float64(pc.writers.Commits)
		fmt.Fprintf(w, "  commits, the store's counters (/metrics caddy_webhook_store_*): %d in the windows, %.1f events/commit, %.1f writes/commit",
			pc.writers.Commits, pc.writersEvents/c, float64(pc.writers.Requests)/c)
		if sqlite {
			fmt.Fprintf(w, "; WAL frames %.2f/event, %.1f/commit (SQLITE_DBSTATUS_CACHE_WRITE: pages the writer sent to the WAL)",
				per(pc.writers.WALPages, pc.writersEvents), float64(pc.writers.WALPages)/c)
			if pc.pageSize > 0 {
				// A frame is its page and a 24-byte header.
				fmt.Fprintf(w, " = %s of WAL/event", bytesSize(per(pc.writers.WALPages*(pc.pageSize+24), pc.writersEvents)))
			}
		}
		fmt.Fprintln(w)
	}
	if !sqlite && server.Window > 0 && rate > 0 {
		events := rate * server.Window.Seconds()
		fmt.Fprintf(w, "  server (server-wide, other users included): %.3f write xacts/event, WAL %s/event (pg_current_wal_lsn)",
			float64(server.Xacts)/events, bytesSize(float64(server.WALBytes)/events))
		if c := server.Cores(); c >= 0 {
			fmt.Fprintf(w, ", CPU %.1f µs/event (the postgres processes)", c*1e6/rate)
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
