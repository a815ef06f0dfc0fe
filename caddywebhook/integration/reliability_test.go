package integration

// The reliability suite: a real Caddy with the plugin, built once by the
// end-to-end harness (e2e_harness_test.go), under load, crashed, reloaded,
// stopped, starved of disk and attacked, with a recording upstream checking
// every delivery. The promise it checks: a 202 is never lost, and nothing
// unauthenticated is ever stored. docs/RELIABILITY.md has the figures.
//
// Run it all, or one scenario:
//
//	go test -race -run 'TestReliability' ./caddywebhook/integration/ -v
//	go test -run 'TestReliability/kill9' ./caddywebhook/integration/ -v
//
// TestReliabilityLogAudit, which follows, audits the logs of every Caddy
// the run started.

import "testing"

func TestReliability(t *testing.T) {
	if testing.Short() {
		t.Skip("the reliability suite builds and runs Caddy; skipped with -short")
	}
	// Each scenario runs its own Caddy, ports, database and upstream, so
	// they run in parallel (as many at once as -parallel allows).
	t.Run("kill9", testKill9)
	t.Run("graceful_stop", testGracefulStop)
	t.Run("reload_storm", testReloadStorm)
	t.Run("upstream_chaos", testUpstreamChaos)
	t.Run("full_disk", testFullDisk)
	t.Run("disk_low", testDiskLow)
	t.Run("hostile_requests", testHostileRequests)
	t.Run("declared_bodies", testDeclaredBodies)
	t.Run("early_refusal", testEarlyRefusal)
	t.Run("sender_share", testSenderShare)
	t.Run("shared_database", testSharedDatabase)
	t.Run("sigstop", testSigstop)
	t.Run("reload_long_jobs", testReloadLongJobs)
	t.Run("pause_resume", testPauseUnderLoad)
	t.Run("circuit_breaker", testCircuitBreaker)
	t.Run("fifo_kill9", testFIFOKill)
}

// TestReliabilityLogAudit runs after TestReliability (and TestE2E) has
// finished with every Caddy it started: their logs must hold no secret, no
// signature value and no payload bytes, though every payload carries a
// marker and every secret and (a sample of the) signatures are registered.
func TestReliabilityLogAudit(t *testing.T) {
	if testing.Short() {
		t.Skip("nothing to audit with -short")
	}
	auditLogs(t)
}
