package monitor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/queuedb"
)

// ServerWatch samples what the PostgreSQL server does during a window:
// its CPU time, when it runs on this machine, and two exact counters, the
// next transaction id (every write transaction takes one, whoever runs
// it) and the WAL position.
type ServerWatch struct {
	pool  *pgxpool.Pool
	local bool // the server is on loopback, so its processes are ours to read
}

// ServerSample is the server's counters at one moment.
type ServerSample struct {
	CPU   time.Duration // the postgres processes' CPU time, reaped ones included
	CPUOK bool
	XID   int64 // the next transaction id
	LSN   int64 // the WAL position, in bytes
}

// OpenServerWatch connects to the server of dsn to read its counters.
func OpenServerWatch(ctx context.Context, dsn string) (*ServerWatch, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, errors.New("connect to postgres: the DSN does not parse")
	}
	pool, err := queuedb.Connect(ctx, dsn, "", 1, true)
	if err != nil {
		return nil, err
	}
	h := cfg.Host
	local := h == "localhost" || strings.HasPrefix(h, "127.") || h == "::1" || strings.HasPrefix(h, "/")
	return &ServerWatch{pool: pool, local: local}, nil
}

// Close closes its connection.
func (w *ServerWatch) Close() { w.pool.Close() }

// sample reads the counters. The server's CPU time is the sum over every
// process named postgres on this machine (the postmaster's reaped
// children included, so backends that ended count too): on a shared
// machine it includes other users of a server there.
func (w *ServerWatch) sample(ctx context.Context) (ServerSample, error) {
	var s ServerSample
	if err := w.pool.QueryRow(ctx,
		`SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint, (pg_current_wal_lsn() - '0/0')::bigint`).Scan(&s.XID, &s.LSN); err != nil {
		return s, fmt.Errorf("read server counters: %w", err)
	}
	if w.local {
		s.CPU, s.CPUOK = processCPU("postgres")
	}
	return s, nil
}

// processCPU sums the CPU time (user, system, and that of reaped
// children) of the processes whose command name is comm.
func processCPU(comm string) (time.Duration, bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	var ticks int64
	found := false
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // ended meanwhile
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open || s[open+1:end] != comm {
			continue
		}
		// After the name: state is field 3; utime, stime, cutime, cstime
		// are fields 14 to 17.
		f := strings.Fields(s[end+1:])
		if len(f) < 15 {
			continue
		}
		for _, v := range f[11:15] {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				continue
			}
			ticks += n
		}
		found = true
	}
	// USER_HZ is 100 on every Linux the load test runs on.
	return time.Duration(ticks) * 10 * time.Millisecond, found
}

// ServerFigures sum the server's counters over a phase's windows.
type ServerFigures struct {
	Window     time.Duration // windows with both samples read
	CPUWindow  time.Duration // those with the CPU time read too
	CPUSeconds float64
	Xacts      int64 // transaction ids taken: write transactions
	WALBytes   int64
}

// Add adds one window's counters.
func (f *ServerFigures) Add(d ServerSample, took time.Duration) {
	f.Window += took
	f.Xacts += d.XID
	f.WALBytes += d.LSN
	if d.CPUOK {
		f.CPUWindow += took
		f.CPUSeconds += d.CPU.Seconds()
	}
}

// Cores is the server's CPU use in cores, -1 when it was not read.
func (f ServerFigures) Cores() float64 {
	if f.CPUWindow <= 0 {
		return -1
	}
	return f.CPUSeconds / f.CPUWindow.Seconds()
}

// XactRate is the write transactions per second, across the server.
func (f ServerFigures) XactRate() float64 {
	if f.Window <= 0 {
		return 0
	}
	return float64(f.Xacts) / f.Window.Seconds()
}

// WALRate is the WAL written per second, in MiB.
func (f ServerFigures) WALRate() float64 {
	if f.Window <= 0 {
		return 0
	}
	return float64(f.WALBytes) / (1 << 20) / f.Window.Seconds()
}
