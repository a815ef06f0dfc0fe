package caddyproc

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// What Linux's /proc says of the process: the load test's monitor and the
// suites' memory checks read it.

// procPath is the process's file under /proc.
func (p *Process) procPath(name string) string {
	return "/proc/" + strconv.Itoa(p.Pid()) + "/" + name
}

// Memory reads the process's resident set size and its peak (VmRSS and
// VmHWM), in bytes.
func (p *Process) Memory() (rss, peak int64, err error) {
	b, err := os.ReadFile(p.procPath("status"))
	if err != nil {
		return 0, 0, fmt.Errorf("read caddy memory: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		name, value, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("read caddy memory: %s: %w", name, err)
		}
		if name == "VmRSS" {
			rss = kb << 10
		} else {
			peak = kb << 10
		}
	}
	return rss, peak, nil
}

// ResetPeak resets the kernel's VmHWM of the process to its current RSS
// (writing 5 to clear_refs), so the next Memory reports the peak since.
// It fails without permission to write the file.
func (p *Process) ResetPeak() error {
	return os.WriteFile(p.procPath("clear_refs"), []byte("5"), 0)
}

// CPUTime is the CPU time the process has used, user and system.
func (p *Process) CPUTime() (time.Duration, error) {
	b, err := os.ReadFile(p.procPath("stat"))
	if err != nil {
		return 0, fmt.Errorf("read caddy cpu time: %w", err)
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: state is field 3, utime 14, stime 15.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("read caddy cpu time: malformed stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, errors.New("read caddy cpu time: malformed stat")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("read caddy cpu time: %w", err)
	}
	// USER_HZ is 100 on every Linux the load test runs on.
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// IO reads the text of /proc/<pid>/io: the bytes and syscalls of the
// process.
func (p *Process) IO() (string, error) {
	b, err := os.ReadFile(p.procPath("io"))
	return string(b), err
}
