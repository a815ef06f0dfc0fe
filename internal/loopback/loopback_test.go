package loopback

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
)

// TestFreeAddr: the address is bindable, and its port lies below the
// kernel's ephemeral range, where no outgoing connection can take it.
func TestFreeAddr(t *testing.T) {
	low := 32768
	if raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		fmt.Sscan(string(raw), &low)
	}
	seen := map[string]bool{}
	for range 20 {
		addr, err := FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		seen[addr] = true
		_, portText, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(portText)
		if port < PortLow || port >= PortHigh || port >= low {
			t.Errorf("port %d: want in [%d, %d) and below the ephemeral range from %d", port, PortLow, PortHigh, low)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen on %s: %v", addr, err)
		}
		ln.Close()
	}
	if len(seen) < 10 {
		t.Errorf("20 calls gave %d addresses; want them spread", len(seen))
	}
}
