//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package httptarget

import (
	"net"
	"syscall"
)

// plainSupported says this system can tell a kept-alive connection that
// the upstream closed from one still open without reading from it
// (peeker), which the plain client needs.
const plainSupported = true

// peeker looks at one connection's socket without consuming anything. It
// is made once per connection, so a check allocates nothing.
type peeker struct {
	raw  syscall.RawConn
	open bool
	buf  [1]byte
	peek func(fd uintptr) bool
}

func newPeeker(conn net.Conn) *peeker {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	p := &peeker{raw: raw}
	p.peek = func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// Nothing to read yet is the one answer of an open, quiet
		// connection; 0 bytes is the upstream's close, more is bytes no
		// request asked for, and an error (ECONNRESET) a reset.
		p.open = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		return true
	}
	return p
}

// closed reports whether an idle connection can no longer carry a
// request: the upstream closed or reset it, or sent bytes that no request
// asked for. A connection that cannot be looked at counts as closed.
func (p *peeker) closed() bool {
	if p == nil {
		return true
	}
	p.open = false
	if err := p.raw.Read(p.peek); err != nil {
		return true
	}
	return !p.open
}
