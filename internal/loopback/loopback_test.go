package loopback

import (
	"net"
	"strconv"
	"testing"
)

// TestFreeAddr: the address is bindable, and its port lies below the
// kernel's ephemeral range, where no outgoing connection can take it.
func TestFreeAddr(t *testing.T) {
	low, high, ok := pickRange()
	if !ok {
		t.Skipf("the ephemeral range starts at %d: too few ports below it, FreeAddr lets the kernel choose", ephemeralStart())
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
		if port < low || port >= high || port >= ephemeralStart() {
			t.Errorf("port %d: want in [%d, %d), below the ephemeral range from %d", port, low, high, ephemeralStart())
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
