package httptarget

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"testing"

	"github.com/caddywebhook/caddywebhook/caddywebhook/targets/targettest"
)

// BenchmarkDeliver is one delivery attempt to a local upstream over a
// kept-alive connection: the target's own cost and the HTTP client's,
// with -benchmem its allocations (the e2e load test's GC follows them).
// client=plain is the worker's own HTTP/1.1 exchange that http:// URLs
// use; client=transport is net/http's Transport, which https:// and
// proxied URLs use. workers=32 runs 32 deliveries at once, as the load
// test's pool does: the upstream runs in the same process, so ns/op is
// then what both sides cost the two cores a delivery.
func BenchmarkDeliver(b *testing.B) {
	skipWithoutPlain(b)
	for _, client := range []string{"plain", "transport"} {
		for _, workers := range []int{1, 32} {
			b.Run("client="+client+"/workers="+strconv.Itoa(workers), func(b *testing.B) {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.WriteHeader(http.StatusNoContent)
				}))
				defer srv.Close()
				tgt := &Target{URL: srv.URL + "/hook"}
				if err := targettest.Provision(b, tgt); err != nil {
					b.Fatal(err)
				}
				defer tgt.Cleanup()
				if tgt.plain == nil {
					b.Fatal("an http:// URL on loopback got no plain client")
				}
				if client == "transport" {
					tgt.plain = nil
				}
				ctx := b.Context()
				b.ReportAllocs()
				if workers == 1 {
					job := targettest.Job("http")
					for b.Loop() {
						if err := tgt.Deliver(ctx, job); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				// RunParallel starts parallelism × GOMAXPROCS goroutines.
				b.SetParallelism(max(1, workers/runtime.GOMAXPROCS(0)))
				b.RunParallel(func(pb *testing.PB) {
					job := targettest.Job("http")
					for pb.Next() {
						if err := tgt.Deliver(ctx, job); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
