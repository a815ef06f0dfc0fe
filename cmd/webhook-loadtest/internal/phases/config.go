package phases

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/caddywebhook/caddywebhook/internal/caddyproc"
	"github.com/caddywebhook/caddywebhook/queue"
)

// Names in the configs the load test writes.
const (
	source = "lt" // the receiver's source
	// sourceFiltered is the rules phase's second receiver, whose target
	// has the filter (phaseConfig.pairFilter).
	sourceFiltered = "lt-filtered"
	targetName     = "out" // its one target
	// orphanTarget is a target no config of the run has: the orphans
	// phase's seeded jobs are for it, so no worker may take them.
	orphanTarget = "gone"
	secret       = "load-test-secret-not-for-production"
	// consumerToken is the token of the listen phase's webhook_consumer.
	consumerToken = "load-test-consumer-token-not-for-production"

	pathStatic = "/static" // Caddy's ceiling: respond 200, nothing else
	pathHook   = "/hook"   // the webhook_receiver
	// pathHookFiltered is the rules phase's receiver with a filter.
	pathHookFiltered = "/hook-filtered"
	pathNoop         = "/noop"    // the no-op upstream: respond 200 on the same Caddy
	pathPull         = "/consume" // the webhook_consumer of the listen phase
	statusNoop       = http.StatusOK
)

// phaseConfig is what changes between the configs of the phases.
type phaseConfig struct {
	db       string // queue database file (sqlite)
	schema   string // queue schema (postgres); set: the backend is postgres
	workers  int    // 0: receive only
	upstream string // the target's URL
	maxBatch int    // storage.max_batch, 0 to leave it out
	rate     string // the target's rate, "" for none
	// pairFilter, when set, adds a second receiver on pathHookFiltered,
	// source sourceFiltered, whose target has this filter: the rules
	// phase's paired half.
	pairFilter string
	pull       bool   // the target is a pull target, consumed on pathPull
	sealed     bool   // the webhook app's encryption block is on (sealed.go)
	sync       string // storage.synchronous (sqlite)
	logLevel   string // Caddy's default log level
	adminAddr  string
	httpAddr   string
}

// target is the receiver's one target.
func (pc phaseConfig) target() map[string]any {
	t := map[string]any{
		"name":    targetName,
		"deliver": map[string]any{"kind": "http", "url": pc.upstream},
	}
	if pc.pull {
		t["deliver"] = map[string]any{"kind": "pull"}
	}
	if pc.rate != "" {
		t["rate"] = pc.rate
	}
	return t
}

// storageJSON is the webhook app's storage block of pc. The Postgres DSN
// is a placeholder for the variable startCaddies sets, so no config holds the
// password; synchronous is SQLite's alone.
func (pc phaseConfig) storageJSON() map[string]any {
	var storage map[string]any
	if pc.schema != "" {
		storage = map[string]any{"backend": "postgres", "dsn": "{env." + caddyDSNEnv + "}", "schema": pc.schema}
	} else {
		storage = map[string]any{"backend": "sqlite", "path": pc.db, "synchronous": pc.sync}
	}
	if pc.maxBatch > 0 {
		storage["max_batch"] = pc.maxBatch
	}
	return storage
}

// caddyJSON returns the whole Caddy config of one phase: a static route,
// the no-op upstream route, and the webhook receiver (GitHub scheme, one
// http target) on one server; the webhook app with the phase's database and
// workers; the admin API on loopback.
func caddyJSON(pc phaseConfig) ([]byte, error) {
	storage := pc.storageJSON()
	route := func(path string, handler map[string]any) map[string]any {
		return map[string]any{
			"match":  []any{map[string]any{"path": []string{path}}},
			"handle": []any{handler},
		}
	}
	receiver := func(src string, target map[string]any) map[string]any {
		return map[string]any{
			"handler": "webhook_receiver",
			"source":  src,
			"scheme":  "github",
			"secrets": []string{secret},
			"targets": []any{target},
		}
	}
	routes := []any{
		route(pathStatic, map[string]any{"handler": "static_response", "status_code": http.StatusOK}),
		route(pathNoop, map[string]any{"handler": "static_response", "status_code": statusNoop}),
		route(pathHook, receiver(source, pc.target())),
	}
	if pc.pairFilter != "" {
		t := pc.target()
		t["filter"] = pc.pairFilter
		routes = append(routes, route(pathHookFiltered, receiver(sourceFiltered, t)))
	}
	if pc.pull {
		routes = append(routes, route(pathPull+"/*", map[string]any{
			"handler": "webhook_consumer",
			"tokens":  []string{consumerToken},
			"targets": []string{targetName},
		}))
	}
	cfg := map[string]any{
		"admin": map[string]any{
			"listen": pc.adminAddr,
			"config": map[string]any{"persist": false},
		},
		"logging": map[string]any{
			"logs": map[string]any{"default": map[string]any{"level": pc.logLevel}},
		},
		"apps": map[string]any{
			"http": map[string]any{
				"servers": map[string]any{
					"loadtest": map[string]any{
						"listen":          []string{pc.httpAddr},
						"automatic_https": map[string]any{"disable": true},
						"routes":          routes,
					},
				},
			},
			"webhook": map[string]any{
				"storage": storage,
				"workers": pc.workers,
			},
		},
	}
	if pc.sealed {
		cfg["apps"].(map[string]any)["webhook"].(map[string]any)["encryption"] = encryptionJSON()
	}
	return json.MarshalIndent(cfg, "", "\t")
}

// caddyDSNEnv carries the DSN into the Caddy processes, whose configs name
// it by the placeholder {env.WEBHOOK_LOADTEST_PG_DSN}: the password is then
// in no config file in the work directory and in no answer of the admin
// API.
const caddyDSNEnv = "WEBHOOK_LOADTEST_PG_DSN"

// stats reads GET /webhook/stats of an instance.
func stats(ctx context.Context, admin caddyproc.Admin) (queue.Stats, error) {
	var st queue.Stats
	out, err := admin.Call(ctx, http.MethodGet, "/webhook/stats", nil)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return st, fmt.Errorf("decode /webhook/stats: %w", err)
	}
	return st, nil
}
