//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package httptarget

import "net"

// plainSupported is false where the plain client cannot check an idle
// connection before it reuses it: every upstream goes through net/http's
// Transport.
const plainSupported = false

type peeker struct{}

func newPeeker(net.Conn) *peeker { return nil }

func (*peeker) closed() bool { return true }
