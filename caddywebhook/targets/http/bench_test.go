package httptarget

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddywebhook/caddywebhook/caddywebhook/targets/targettest"
)

// BenchmarkDeliver is one delivery attempt to a local upstream over a
// kept-alive connection: the target's own cost and the HTTP client's,
// with -benchmem its allocations (the e2e load test's GC follows them).
func BenchmarkDeliver(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	tgt := &Target{URL: srv.URL + "/hook"}
	if err := targettest.Provision(b, tgt); err != nil {
		b.Fatal(err)
	}
	defer tgt.Cleanup()
	job := targettest.Job("http")
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		if err := tgt.Deliver(ctx, job); err != nil {
			b.Fatal(err)
		}
	}
}
