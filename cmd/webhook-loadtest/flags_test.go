package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/phases"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		check   func(o options) bool
		wantErr string
	}{
		{"defaults", nil, func(o options) bool {
			return o.Duration == 10*time.Second && o.Rounds == 3 && o.Conns == 32 && o.BodySize == 512 && o.Backlog == 1_000_000 && len(o.Phases) == len(phases.All)
		}, ""},
		{"smoke shrinks the defaults", []string{"-smoke"}, func(o options) bool {
			return o.smoke && o.Duration == time.Second && o.Rounds == 1 && o.Conns == 8 && o.Backlog == 20_000
		}, ""},
		{"smoke keeps explicit values", []string{"-smoke", "-c", "4", "-backlog", "500"}, func(o options) bool {
			return o.Conns == 4 && o.Backlog == 500 && o.Duration == time.Second
		}, ""},
		{"phases", []string{"-phases", "e2e, static"}, func(o options) bool {
			return len(o.Phases) == 2 && o.Phases[0] == "e2e" && o.Phases[1] == "static"
		}, ""},
		{"profile keeps the work directory", []string{"-profile", "ingest"}, func(o options) bool { return o.Keep }, ""},
		{"unknown phase", []string{"-phases", "ingest,warp"}, nil, `unknown phase "warp"`},
		{"tiny body", []string{"-body", "10"}, nil, "-body 10"},
		{"rounds too short", []string{"-d", "1s", "-rounds", "20"}, nil, "at least 100ms a round"},
		{"stray argument", []string{"now"}, nil, "unexpected arguments"},
		{"against", []string{"-caddy", "/b/new", "-against", "/b/old", "-pairs", "5"}, func(o options) bool {
			return o.against == "/b/old" && o.Caddy == "/b/new" && o.pairs == 5
		}, ""},
		{"against needs caddy", []string{"-against", "/b/old"}, nil, "-against needs -caddy"},
		{"against itself", []string{"-caddy", "/b/x", "-against", "/b/x"}, nil, "is -caddy itself"},
		{"no pairs", []string{"-caddy", "/b/new", "-against", "/b/old", "-pairs", "0"}, nil, "-pairs 0"},
		{"pairs alone", []string{"-pairs", "2"}, nil, "-pairs applies to -against only"},
		{"against with dir", []string{"-caddy", "/b/new", "-against", "/b/old", "-dir", "/tmp/x"}, nil, "-dir does not apply"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseFlags(tt.args, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(o) {
				t.Errorf("options %+v", o)
			}
		})
	}
}
func TestParseFlagsStorage(t *testing.T) {
	const dsn = "postgres://lt:flag-secret@127.0.0.1:54329/db?sslmode=disable"
	tests := []struct {
		name    string
		env     string // CADDYWEBHOOK_TEST_POSTGRES_DSN
		args    []string
		check   func(o options) bool
		wantErr string
	}{
		{"sqlite is the default", dsn, nil, func(o options) bool {
			return o.Storage == "sqlite" && o.Instances == 1 && o.DSN == ""
		}, ""},
		{"postgres with -dsn", "", []string{"-storage", "postgres", "-dsn", dsn}, func(o options) bool {
			return o.DSN == dsn && o.DSNDesc == "lt@127.0.0.1:54329/db" && o.SchemaPrefix == "lt_" && o.Redact != nil
		}, ""},
		{"postgres takes the DSN from the environment", dsn, []string{"-storage", "postgres"}, func(o options) bool {
			return o.DSN == dsn
		}, ""},
		{"-dsn wins over the environment", "postgres://other@h/x", []string{"-storage", "postgres", "-dsn", dsn}, func(o options) bool {
			return o.DSN == dsn
		}, ""},
		{"instances on postgres", dsn, []string{"-storage", "postgres", "-instances", "3", "-schema-prefix", "mine_"}, func(o options) bool {
			return o.Instances == 3 && o.SchemaPrefix == "mine_"
		}, ""},
		{"postgres without a DSN", "", []string{"-storage", "postgres"}, nil, `eval "$(.ci/start-postgres)"`},
		{"unknown storage", "", []string{"-storage", "mysql"}, nil, `-storage "mysql"`},
		{"instances on sqlite", "", []string{"-instances", "2"}, nil, "only on postgres"},
		{"fewer connections than instances", dsn, []string{"-storage", "postgres", "-instances", "4", "-c", "3"}, nil, "at least one connection per instance"},
		{"no instances", dsn, []string{"-storage", "postgres", "-instances", "0"}, nil, "-instances 0"},
		{"-dsn with sqlite", "", []string{"-dsn", dsn}, nil, "-dsn applies to -storage postgres only"},
		{"-schema-prefix with sqlite", "", []string{"-schema-prefix", "x_"}, nil, "-schema-prefix applies"},
		{"-synchronous with postgres", dsn, []string{"-storage", "postgres", "-synchronous", "normal"}, nil, "-synchronous applies to sqlite only"},
		{"upper-case schema prefix", dsn, []string{"-storage", "postgres", "-schema-prefix", "LT_"}, nil, "-schema-prefix"},
		{"pg_ schema prefix", dsn, []string{"-storage", "postgres", "-schema-prefix", "pg_x"}, nil, "-schema-prefix"},
		{"a DSN that does not parse", "", []string{"-storage", "postgres", "-dsn", "postgres://lt:flag-secret@h:port/db"}, nil, "does not parse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(dsnEnv, tt.env)
			o, err := parseFlags(tt.args, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "flag-secret") {
					t.Errorf("err = %v shows the password", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(o) {
				t.Errorf("options: storage %q, instances %d, prefix %q, desc %q", o.Storage, o.Instances, o.SchemaPrefix, o.DSNDesc)
			}
		})
	}
}
