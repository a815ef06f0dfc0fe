//go:build unix

package exectarget

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"syscall"
)

// runEnv names the environment variable that marks every process of
// one run of an exec target with a token of its own. A descendant that
// leaves the program's process group (setsid, a double fork into a new
// session) escapes the group kill and, once its parent exits, no longer
// descends from anything Caddy knows; it still carries the environment
// it was started with, so after each run the target looks for the token
// in /proc and kills what it finds. The token is random per run, so
// Caddy's other children and other runs' processes never match.
const runEnv = "WEBHOOK_EXEC_RUN"

// runToken returns a fresh token for runEnv.
func runToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// killPasses bounds the walks of /proc: a marked process may fork
// while a walk passes it, so walks repeat until one kills nothing.
const killPasses = 4

// startTime returns the start time of pid, in clock ticks since boot,
// from /proc/<pid>/stat; ok is false where there is no /proc (not Linux)
// or no such process.
func startTime(pid int) (uint64, bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// "pid (comm) state ppid …": comm may hold spaces and parentheses, so
	// the fields are counted after the last ')'. starttime is field 22,
	// the 20th after comm.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	fields := bytes.Fields(stat[i+1:])
	if len(fields) < 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(fields[19]), 10, 64)
	return v, err == nil
}

// killMarked kills every process that started no earlier than since
// (clock ticks since boot, the program's own start) and whose environment
// holds runEnv=token, and returns how many it signalled. The start
// time is read first, from a small file, so that only processes younger
// than the program have their environment read: a walk costs one stat
// read per process on the machine. What it cannot see it leaves alone: a
// process that replaced its environment (env -i, execve with a fresh
// one), one that changed its user (its environ is unreadable), and any
// process where /proc is missing (every Unix but Linux).
func killMarked(token string, since uint64) int {
	marker := []byte(runEnv + "=" + token + "\x00")
	self := os.Getpid()
	killed := 0
	for range killPasses {
		d, err := os.Open("/proc")
		if err != nil {
			return killed
		}
		names, _ := d.Readdirnames(-1)
		d.Close()
		n := 0
		for _, name := range names {
			pid, err := strconv.Atoi(name)
			if err != nil || pid == self {
				continue
			}
			if start, ok := startTime(pid); !ok || start < since {
				continue
			}
			// A zombie's environ reads empty, so the dead are never
			// signalled again and the passes end.
			env, err := os.ReadFile("/proc/" + name + "/environ")
			if err != nil || !bytes.Contains(env, marker) {
				continue
			}
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				n++
			}
		}
		killed += n
		if n == 0 {
			break
		}
	}
	return killed
}
