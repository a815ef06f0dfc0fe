// Package loopback finds a free loopback address for a server that is
// started later on it: a Caddy config, a child process. The tests and the
// load-test command share it.
package loopback

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
)

// The kernel hands both a listener on port 0 and every outgoing
// connection a port of its ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range, 32768-60999 by default on
// Linux), so a port learnt from a listener on :0 and closed can be taken by
// any client before the server binds it: CI saw "bind: address already in
// use" that way. FreeAddr picks below that range instead, from PortLow,
// above the usual services (PostgreSQL's 5432, 8080 and the like), up to
// PortHigh or the range's start, whichever is lower.
const (
	PortLow  = 20000
	PortHigh = 32000 // exclusive
	// minPorts is the fewest ports worth picking from; below it (a range
	// that starts under PortLow+minPorts), FreeAddr lets the kernel choose.
	minPorts = 1000
)

// ephemeralStart is where the kernel's ephemeral range begins, or
// PortHigh where it cannot be read.
var ephemeralStart = sync.OnceValue(func() int {
	start := PortHigh
	if raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var low, high int
		if n, _ := fmt.Sscan(string(raw), &low, &high); n == 2 && low > 0 {
			start = low
		}
	}
	return start
})

// pickRange is the ports [low, high) FreeAddr picks from; ok is false when
// the ephemeral range leaves too few below it.
func pickRange() (low, high int, ok bool) {
	high = min(PortHigh, ephemeralStart())
	return PortLow, high, high-PortLow >= minPorts
}

// given holds the ports FreeAddr has handed out in this process. A server
// that stops and later starts again on its address (a test's local app
// taken down for a while) leaves its port unbound in between, where any
// other FreeAddr of the same process, a parallel test's, could pick it
// and bind it first; so no port is handed out twice.
var given = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreeAddr returns "127.0.0.1:port" with a port nothing listens on right
// now and that no earlier call of this process returned. The port is
// random among those below the ephemeral range (see pickRange), which the
// kernel never hands out by itself, so only another process's FreeAddr can
// pick it before it is bound. Where there are too few of those, or they
// cannot be bound, it falls back to a port the kernel chooses.
func FreeAddr() (string, error) {
	low, high, ok := pickRange()
	if !ok {
		low, high = 0, 0
	}
	return freeAddrIn(low, high)
}

// freeAddrIn picks from [low, high), then lets the kernel choose; an
// empty range goes straight to the kernel.
func freeAddrIn(low, high int) (string, error) {
	given.Lock()
	defer given.Unlock()
	for tries := 0; tries < 100 && high > low; tries++ {
		port := low + rand.IntN(high-low)
		if given.ports[port] {
			continue
		}
		if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			return give(ln)
		}
		// Taken; pick again.
	}
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("find a free port: %w", err)
		}
		if given.ports[ln.Addr().(*net.TCPAddr).Port] {
			// The kernel's pick is one already given, whose server is
			// down for now: hold it while asking again, so the kernel
			// moves on.
			defer ln.Close()
			continue
		}
		return give(ln)
	}
	return "", fmt.Errorf("find a free port: every one the kernel offered was given out before")
}

// give records ln's port as handed out, closes ln and returns its address.
// The caller holds given's lock.
func give(ln net.Listener) (string, error) {
	addr := ln.Addr().(*net.TCPAddr)
	given.ports[addr.Port] = true
	return fmt.Sprintf("127.0.0.1:%d", addr.Port), ln.Close()
}
