package phases

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/loadgen"
	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/monitor"
)

// Results are what a run measured and checked, phase by phase, and the
// circumstances the report states.
type Results struct {
	Options   Options
	Started   time.Time
	LoadAvg   string // /proc/loadavg before the run
	Dir       string // the work directory
	Seeds     []string
	Notes     []string // single measurements (replay, stats timings) printed under the table
	Phases    []*Phase // in the order they first ran
	GoVersion string

	ServerVersion string // PostgreSQL's, with -storage postgres

	byName map[string]*Phase
}

// NewResults starts the results of a run with o.
func NewResults(o Options) *Results {
	la, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(la))
	if len(f) > 3 {
		f = f[:3]
	}
	return &Results{
		Options:   o,
		Started:   time.Now().UTC(),
		LoadAvg:   strings.Join(f, " "),
		byName:    make(map[string]*Phase),
		GoVersion: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// Phase returns the named phase's result, created on first use.
func (res *Results) Phase(name string) *Phase {
	if pr := res.byName[name]; pr != nil {
		return pr
	}
	pr := &Phase{Name: name, BacklogEnd: -1}
	res.Phases = append(res.Phases, pr)
	res.byName[name] = pr
	return pr
}

// Get returns the named phase's result, nil if the phase never started.
func (res *Results) Get(name string) *Phase { return res.byName[name] }

// Ran returns the named phase if it ran to its end, else nil.
func (res *Results) Ran(name string) *Phase {
	pr := res.byName[name]
	if pr == nil || !pr.Finished {
		return nil
	}
	return pr
}

// FailedChecks lists every failed count check, prefixed with its phase.
func (res *Results) FailedChecks() []string {
	var out []string
	for _, pr := range res.Phases {
		for _, f := range pr.Failed {
			out = append(out, pr.Name+": "+f)
		}
	}
	return out
}

// Phase is what one phase measured and checked over its rounds. A phase
// that runs as two (backlog: backlog-ingest and backlog-e2e) has a Phase
// of each.
type Phase struct {
	Name string

	// Summed over the rounds; finish derives the figures below.
	Load            *loadgen.Result // every round's requests; accepted ids are not kept
	Delivered       int64
	DeliveredWindow time.Duration
	slopes          []float64 // per round
	cpuSeconds      float64   // Caddy's CPU time in the windows
	selfSeconds     float64   // the load test's own (generator, upstream)
	cpuWindow       time.Duration
	Server          monitor.ServerFigures // postgres: the server's share

	Rate float64 // answers with the wanted status per second, in the windows
	// A paired phase: the rates of its two halves, the first (plain) and
	// the second (with a trace context in ingest-traced and e2e-traced, to
	// the filtered receiver in rules); Rate is the second's.
	FirstRate, SecondRate float64
	P50, P99              time.Duration
	DeliveredRate         float64
	BacklogEnd            int64   // pending+running at the end, from GET /webhook/stats; -1 if not read
	BacklogSlope          float64 // growth of the round's own backlog, jobs/s, mean of the rounds
	Ref                   float64 // reference delivered/s of a slow phase
	ceiling               float64 // slow phases: requests a plain Go client got answered, summed over rounds (rate × window)
	ceilingWindow         time.Duration
	held                  time.Duration // slow phases: the upstream's hold time summed over the deliveries in the windows
	heldCount             int64

	StartRSS, EndRSS, PeakRSS int64
	Cores                     float64       // Caddy's CPU use in the windows, in cores
	SelfCores                 float64       // the load test's own
	Profile, Trace            string        // files captured in the window
	roundProfiles             []string      // the CPU profiles of the round running, for the cost table
	Cost                      *monitor.Cost // -profile: the cost per event

	Finished bool     // the phase ran to its end
	Counts   []string // what the checks counted, for the report
	Failed   []string // count checks that failed
}

// addLoad adds one round's traffic to the phase's.
func (pr *Phase) addLoad(res *loadgen.Result) {
	if pr.Load == nil {
		pr.Load = &loadgen.Result{}
	}
	pr.Load.Add(res)
}

// addWindow adds what the monitor measured in one round's window.
func (pr *Phase) addWindow(w monitor.Window) {
	if pr.StartRSS == 0 {
		pr.StartRSS = w.StartRSS
	}
	pr.EndRSS = w.EndRSS
	pr.PeakRSS = max(pr.PeakRSS, w.PeakRSS)
	pr.cpuSeconds += w.CPUSeconds
	pr.selfSeconds += w.SelfSeconds
	pr.cpuWindow += w.Took
	if w.ServerOK {
		pr.Server.Add(w.Server, w.Took)
	}
}

// finish derives the phase's figures from its rounds.
func (pr *Phase) finish() {
	pr.Finished = true
	if pr.Load != nil {
		slices.Sort(pr.Load.Lat)
		pr.Rate = pr.Load.OKRate()
		if first, second := pr.Load.PairRates(); second > 0 {
			pr.FirstRate, pr.SecondRate, pr.Rate = first, second, second
		}
		pr.P50 = loadgen.Percentile(pr.Load.Lat, 0.50)
		pr.P99 = loadgen.Percentile(pr.Load.Lat, 0.99)
	}
	if pr.DeliveredWindow > 0 {
		pr.DeliveredRate = float64(pr.Delivered) / pr.DeliveredWindow.Seconds()
	}
	if pr.cpuWindow > 0 {
		pr.Cores = pr.cpuSeconds / pr.cpuWindow.Seconds()
		pr.SelfCores = pr.selfSeconds / pr.cpuWindow.Seconds()
	}
	if len(pr.slopes) > 0 {
		var sum float64
		for _, v := range pr.slopes {
			sum += v
		}
		pr.BacklogSlope = sum / float64(len(pr.slopes))
	}
}

// check records a failed count check with its message when ok is false.
func (pr *Phase) check(ok bool, format string, args ...any) {
	if !ok {
		pr.Failed = append(pr.Failed, fmt.Sprintf(format, args...))
	}
}

// CeilingRate is what a plain Go client with one sender per worker got
// from the slow upstream, per second, 0 if not measured.
func (pr *Phase) CeilingRate() float64 {
	if pr.ceilingWindow <= 0 {
		return 0
	}
	return pr.ceiling / pr.ceilingWindow.Seconds()
}

// MeanHeld is how long the upstream held a delivery on average in the
// windows, 0 if none.
func (pr *Phase) MeanHeld() time.Duration {
	if pr.heldCount == 0 {
		return 0
	}
	return pr.held / time.Duration(pr.heldCount)
}

// MiB writes a byte count in MiB to one place.
func MiB(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// CPUPerEvent is Caddy's CPU time per accepted event in the windows, in
// microseconds; 0 when it was not measured.
func (pr *Phase) CPUPerEvent() float64 {
	if pr.Rate <= 0 || pr.Cores <= 0 {
		return 0
	}
	return pr.Cores / pr.Rate * 1e6
}
