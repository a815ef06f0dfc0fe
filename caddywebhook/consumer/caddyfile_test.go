package consumer

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// adapt turns a Caddyfile into JSON with Caddy's own adapter.
func adapt(t *testing.T, caddyfile string) (string, error) {
	t.Helper()
	raw, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
	return string(raw), err
}

func TestCaddyfile(t *testing.T) {
	const site = `:8080 {
	webhook_receiver /hook {
		source github
		scheme github
		secret {env.GITHUB_SECRET}
		to pull {
			name laptop
			events push
			max_attempts 5
		}
	}
	handle /consume/* {
		webhook_consumer {
			token {env.LAPTOP_TOKEN}
			token {file./run/secrets/ci}
			targets laptop ci
			max_claim 50
			max_wait 20s
			max_waiting 2
			max_body 64KiB
		}
	}
}`
	out, err := adapt(t, site)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`{"handler":"webhook_consumer","max_body":65536,"max_claim":50,"max_wait":20000000000,"max_waiting":2,"targets":["laptop","ci"],"tokens":["{env.LAPTOP_TOKEN}","{file./run/secrets/ci}"]}`,
		`{"deliver":{"kind":"pull"},"events":["push"],"max_attempts":5,"name":"laptop"}`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("adapted config lacks %s:\n%s", want, out)
		}
	}
	var v any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("adapted config is not JSON: %v", err)
	}
}

func TestCaddyfileErrors(t *testing.T) {
	tests := []struct {
		name, block, want string
	}{
		{"argument", "webhook_consumer x {\n}", `unexpected argument "x"`},
		{"unknown option", "webhook_consumer {\n\ttokens a\n}", `unknown option "tokens"`},
		{"token without value", "webhook_consumer {\n\ttoken\n}", "token takes one value"},
		{"targets without names", "webhook_consumer {\n\ttargets\n}", "targets needs at least one name"},
		{"max_claim zero", "webhook_consumer {\n\tmax_claim 0\n}", `max_claim: "0" is not a number of at least 1`},
		{"max_wait not a duration", "webhook_consumer {\n\tmax_wait soon\n}", `max_wait: "soon" is not a positive duration`},
		{"max_body not a size", "webhook_consumer {\n\tmax_body lots\n}", `max_body: "lots" is not a size`},
		{"pull target with an option", "webhook_receiver /h {\n\tsource s\n\tscheme github\n\tsecret x\n\tto pull {\n\t\turl http://x\n\t}\n}", `pull target: unknown option "url"`},
		{"pull target with an argument", "webhook_receiver /h {\n\tsource s\n\tscheme github\n\tsecret x\n\tto pull laptop\n}", `pull target: takes no arguments`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := adapt(t, ":8080 {\n"+tt.block+"\n}")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("adapt: %v, want an error with %q", err, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		h    Handler
		want string
	}{
		{"no token", Handler{Targets: []string{"laptop"}}, "token: at least one is required"},
		{"no target", Handler{Tokens: []string{"x"}}, "targets: at least one pull target is required"},
		{"empty target", Handler{Tokens: []string{"x"}, Targets: []string{""}}, "targets: a name is empty"},
		{"negative max_claim", Handler{Tokens: []string{"x"}, Targets: []string{"l"}, MaxClaim: -1}, "max_claim is -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.h.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate: %v, want %q", err, tt.want)
			}
		})
	}
}

// TestProvisionTokenErrors checks that a token that cannot be resolved is a
// config error naming the token's place and the unset variable, and never
// quoting the token: a brace pair inside a literal token is part of the
// secret.
func TestProvisionTokenErrors(t *testing.T) {
	tests := []struct {
		name    string
		token   string
		want    []string
		notWant string
	}{
		{"brace pair inside a literal token", "abcdefgh{s3cretpart}ijklmnop", []string{"webhook_consumer: token 1"}, "s3cretpart"},
		{"unset variable", "{env.CADDYWEBHOOK_TEST_NO_SUCH_TOKEN}", []string{"webhook_consumer: token 1", "env.CADDYWEBHOOK_TEST_NO_SUCH_TOKEN"}, ""},
		{"too short", "short", []string{"token 1 is 5 bytes, shorter than"}, "short,"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
			defer cancel()
			h := Handler{Tokens: []string{tt.token}, Targets: []string{"laptop"}}
			err := h.Provision(ctx)
			if err == nil {
				t.Fatal("Provision: nil error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Provision: %v, want it to contain %q", err, w)
				}
			}
			if tt.notWant != "" && strings.Contains(err.Error(), tt.notWant) {
				t.Errorf("Provision: %v quotes %q", err, tt.notWant)
			}
		})
	}
}
