package testutil

import (
	"testing"

	"github.com/caddywebhook/caddywebhook/internal/loopback"
)

// FreeAddr returns a loopback address ("127.0.0.1:port") nothing listens
// on, for a server the test starts later on it, from loopback.FreeAddr:
// its port is outside the range the kernel gives clients, so no other
// test's connection takes it in between, and no other call of the test
// binary is given it again, so a server the test stops and starts again
// finds it free.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	addr, err := loopback.FreeAddr()
	if err != nil {
		tb.Fatalf("free address: %v", err)
	}
	return addr
}
