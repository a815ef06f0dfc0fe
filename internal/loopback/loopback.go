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

// FreeAddr returns "127.0.0.1:port" with a port nothing listens on right
// now. The port is random among those below the ephemeral range (see
// pickRange), which the kernel never hands out by itself, so only another
// FreeAddr can pick it again before it is bound. Where there are too few
// of those, or they cannot be bound, it falls back to a port the kernel
// chooses.
func FreeAddr() (string, error) {
	if low, high, ok := pickRange(); ok {
		for range 100 {
			addr := fmt.Sprintf("127.0.0.1:%d", low+rand.IntN(high-low))
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				continue // taken; pick again
			}
			return addr, ln.Close()
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}
