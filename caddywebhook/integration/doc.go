// Package integration holds the separate-process suites of the plugin: a
// real Caddy built from ./cmd/caddy runs as its own process on loopback
// ports, with its own data directory, SQLite file (or Postgres schema) and
// log, and the tests reach it only as a sender, an operator and an upstream
// would, over HTTP, the admin API and the CLI. The package has no code of
// its own: everything is in its _test.go files.
//
//   - TestE2E (e2e_test.go): delivery, signatures, duplicates, retries,
//     dead letters, replay, exec targets, reload and stop, the demo
//     Caddyfile and a JSON config; then an audit of every log line.
//   - TestReliability (reliability_test.go): load, kill -9, graceful stop,
//     reload storms, upstream chaos, a full disk, hostile requests and two
//     processes on one database; docs/RELIABILITY.md has its figures.
//   - TestDashboard (dashboard_browser_test.go): the webhook_dashboard
//     page in headless Chromium behind basic_auth: counts, filters, a job,
//     replay without a reload, resend, a refused cross-origin POST and a
//     <script> payload shown as text. It needs Chromium and skips without
//     one, except with CI=true; it saves screenshots.
//   - TestPostgresTwoInstances (postgres_e2e_test.go): two processes on one
//     PostgreSQL queue; it needs CADDYWEBHOOK_TEST_POSTGRES_DSN (see
//     .ci/start-postgres) and skips without it, except with CI=true.
//   - TestPostgresChaos (postgres_chaos_test.go): three processes on one
//     PostgreSQL queue, each through a proxy of the test's, under load:
//     one's answers from the database held past its lease, one stopped
//     past its lease, one cut off from the database (503 within
//     store_timeout, 202 at once after the heal) and killed; no event lost,
//     none in flight twice at once. It needs the same server.
//
// The harness (e2e_harness_test.go) builds Caddy once per test binary, on
// the first test that needs it, without -race (CADDYWEBHOOK_E2E_RACE=1
// adds it; CADDYWEBHOOK_E2E_CADDY=/path/to/caddy uses a binary built
// elsewhere). Every suite is skipped with -short. Run one suite, or one
// scenario, with -run:
//
//	go test -race ./caddywebhook/integration/ -run TestE2E -v
//	go test ./caddywebhook/integration/ -run 'TestReliability/kill9' -v
//
// The plugin's unit tests, quick and in-process, are in ./caddywebhook.
package integration
