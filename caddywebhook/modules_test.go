package caddywebhook_test

// The modules that live in the sub-packages, registered for the tests of
// package caddywebhook too: this external test package is linked into the
// same test binary, and the sub-packages, which import caddywebhook, could
// not be imported by its internal tests without a cycle.
import (
	_ "github.com/caddywebhook/caddywebhook/caddywebhook/storage/postgres"
	_ "github.com/caddywebhook/caddywebhook/caddywebhook/storage/sqlite"
	_ "github.com/caddywebhook/caddywebhook/caddywebhook/targets/exec"
	_ "github.com/caddywebhook/caddywebhook/caddywebhook/targets/http"
	_ "github.com/caddywebhook/caddywebhook/caddywebhook/targets/pull"
)
