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

// TestFreeAddrNeverGivesAPortTwice: a port handed out once is not handed
// out again in this process, even after its server has closed it, so a
// server down for a while finds its port unbound when it starts again. On
// a range of two ports, ten calls give both and then the kernel's choices,
// never one of them again.
func TestFreeAddrNeverGivesAPortTwice(t *testing.T) {
	low, high, ok := pickRange()
	if !ok {
		t.Skipf("the ephemeral range starts at %d: too few ports below it", ephemeralStart())
	}
	// Two adjacent ports that are free now, neither given out before.
	first := -1
	for p := low + 1000; p+1 < high && first < 0; p += 7 {
		if given.ports[p] || given.ports[p+1] || !bindable(p) || !bindable(p+1) {
			continue
		}
		first = p
	}
	if first < 0 {
		t.Fatal("no two adjacent free ports below the ephemeral range")
	}
	seen := map[string]int{}
	inRange := 0
	for i := range 10 {
		addr, err := freeAddrIn(first, first+2)
		if err != nil {
			t.Fatal(err)
		}
		if j, dup := seen[addr]; dup {
			t.Fatalf("call %d gave %s, which call %d gave already", i, addr, j)
		}
		seen[addr] = i
		_, portText, _ := net.SplitHostPort(addr)
		if port, _ := strconv.Atoi(portText); port == first || port == first+1 {
			inRange++
		}
	}
	if inRange != 2 {
		t.Errorf("%d of the 10 addresses were in the two-port range; want both ports, once each", inRange)
	}
}

func bindable(port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}
