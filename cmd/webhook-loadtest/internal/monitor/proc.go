package monitor

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// What /proc says of the processes and the machine in a window: a Caddy
// instance's bytes and syscalls, and each core's idle time.

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
