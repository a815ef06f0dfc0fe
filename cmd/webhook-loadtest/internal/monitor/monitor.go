// Package monitor watches the processes of a load-test phase and says
// what its events cost: the Caddy instances' memory and CPU time across a
// window, the PostgreSQL server's counters, and with -profile the cost
// table, per accepted event, of disk bytes, syscalls, commits, WAL frames
// and CPU by stage.
package monitor

import (
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/caddyproc"
)

// Monitor samples the memory of the Caddy instances during a phase and
// their CPU time across the window: CPU summed over the instances, memory
// the largest instance's.
type Monitor struct {
	cs       []*caddyproc.Process
	quit     chan struct{}
	done     chan struct{}
	startRSS int64 // the largest instance's
	peak     int64 // sampled VmRSS, the largest instance's
	mu       sync.Mutex
	cpu0     time.Duration
	cpuOK    bool // cpu0 was read
	self0    time.Duration
	t0       time.Time
	took     time.Duration // the window, as it ran
	cores    float64       // Caddy's, summed over the instances
	selfCore float64       // this process's: the load generator and upstream
	hwmOK    bool

	srv      *ServerWatch // nil with sqlite
	srv0     ServerSample
	srvDelta ServerSample // across the window
	srvOK    bool         // both samples were read
}

// Window is what a Monitor measured in one phase's round.
type Window struct {
	StartRSS, EndRSS, PeakRSS int64 // bytes, the largest instance's
	CPUSeconds                float64
	SelfSeconds               float64       // the load test's own (generator, upstream)
	Took                      time.Duration // the window, as it ran
	// Server is the PostgreSQL server's counters across the window, when
	// ServerOK: both ends were read.
	Server   ServerSample
	ServerOK bool
}

// monitorEvery is the memory sampling interval, a fallback for kernels
// that do not let us reset VmHWM.
const monitorEvery = 100 * time.Millisecond

// Start starts sampling the instances' memory, and srv's counters at the
// window's edges when srv is not nil.
func Start(cs []*caddyproc.Process, srv *ServerWatch) *Monitor {
	m := &Monitor{cs: cs, srv: srv, quit: make(chan struct{}), done: make(chan struct{}), hwmOK: true}
	for _, c := range cs {
		m.hwmOK = c.ResetPeak() == nil && m.hwmOK
		rss, _, _ := c.Memory()
		m.startRSS = max(m.startRSS, rss)
	}
	m.peak = m.startRSS
	go func() {
		defer close(m.done)
		t := time.NewTicker(monitorEvery)
		defer t.Stop()
		for {
			select {
			case <-m.quit:
				return
			case <-t.C:
				for _, c := range cs {
					if rss, _, err := c.Memory(); err == nil {
						m.mu.Lock()
						m.peak = max(m.peak, rss)
						m.mu.Unlock()
					}
				}
			}
		}
	}()
	return m
}

// serverSampleTimeout bounds a read of the server's counters, or of the
// store's, at a window's edge, so a server that stalls cannot hang the
// run; the window's figures from it are then left out.
const serverSampleTimeout = 5 * time.Second

// cpuTime is the instances' CPU time, summed.
func (m *Monitor) cpuTime() (time.Duration, error) {
	var sum time.Duration
	for _, c := range m.cs {
		t, err := c.CPUTime()
		if err != nil {
			return 0, err
		}
		sum += t
	}
	return sum, nil
}

// WindowStart marks the start of the measured window.
func (m *Monitor) WindowStart() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.t0 = time.Now()
	var err error
	m.cpu0, err = m.cpuTime()
	m.cpuOK = err == nil
	m.self0 = selfCPU()
	if m.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), serverSampleTimeout)
		defer cancel()
		m.srv0, err = m.srv.sample(ctx)
		m.srvOK = err == nil
	}
}

// WindowEnd marks its end; without a start it does nothing.
func (m *Monitor) WindowEnd() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.t0.IsZero() {
		return
	}
	m.took = time.Since(m.t0)
	if cpu, err := m.cpuTime(); err == nil && m.cpuOK {
		m.cores = (cpu - m.cpu0).Seconds() / m.took.Seconds()
	}
	m.selfCore = (selfCPU() - m.self0).Seconds() / m.took.Seconds()
	if m.srv != nil && m.srvOK {
		ctx, cancel := context.WithTimeout(context.Background(), serverSampleTimeout)
		defer cancel()
		s1, err := m.srv.sample(ctx)
		m.srvOK = err == nil
		m.srvDelta = ServerSample{CPU: s1.CPU - m.srv0.CPU, CPUOK: s1.CPUOK && m.srv0.CPUOK, XID: s1.XID - m.srv0.XID, LSN: s1.LSN - m.srv0.LSN}
	}
}

// selfCPU is the CPU time this process has used, user and system.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Stop ends sampling and returns the round's memory and CPU figures.
func (m *Monitor) Stop() Window {
	close(m.quit)
	<-m.done
	var rss, hwm int64
	for _, c := range m.cs {
		r, h, _ := c.Memory()
		rss, hwm = max(rss, r), max(hwm, h)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	w := Window{
		StartRSS:    m.startRSS,
		EndRSS:      rss,
		PeakRSS:     max(m.peak, rss),
		CPUSeconds:  m.cores * m.took.Seconds(),
		SelfSeconds: m.selfCore * m.took.Seconds(),
		Took:        m.took,
	}
	if m.hwmOK {
		w.PeakRSS = max(w.PeakRSS, hwm)
	}
	if m.srv != nil && m.srvOK && m.took > 0 {
		w.Server, w.ServerOK = m.srvDelta, true
	}
	return w
}
