// Package loopback finds a free loopback address for a server that is
// started later on it: a Caddy config, a child process. The tests and the
// load-test command share it.
package loopback

import (
	"fmt"
	"math/rand/v2"
	"net"
)

// Ports FreeAddr picks from. The kernel hands both a listener on port 0
// and every outgoing connection a port of its ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range, 32768-60999 on Linux), so a
// port learnt from a listener on :0 and closed can be taken by any client
// before the server binds it: CI saw "bind: address already in use" that
// way. These lie below that range and above the usual services
// (PostgreSQL's 5432, 8080 and the like).
const (
	PortLow  = 20000
	PortHigh = 32000 // exclusive
)

// FreeAddr returns "127.0.0.1:port" with a port nothing listens on right
// now. The port is random in [PortLow, PortHigh), which the kernel never
// hands out by itself, so only another FreeAddr can pick it again before
// it is bound. Where those ports cannot be bound at all, it falls back to
// one the kernel chooses.
func FreeAddr() (string, error) {
	for range 100 {
		addr := fmt.Sprintf("127.0.0.1:%d", PortLow+rand.IntN(PortHigh-PortLow))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue // taken; pick again
		}
		return addr, ln.Close()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}
