package caddywebhook

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2"
)

// Every config field that may hold a secret, or a placeholder standing for
// one, is resolved here and nowhere else: the receiver's secrets, public
// keys and verify token, the http target's URL, headers and sign_secret,
// the exec target's env, the SQLite path, the Postgres DSN and the
// webhook_consumer's tokens. The one
// resolver keeps one promise for all of them: an error names the field
// and the placeholder to fix, never a value, and every value it resolves
// is recorded in the Secrets of the config load that asked.

// Secrets is the set of values resolved from secret-bearing fields during
// one config load. The webhook app owns one (App.Secrets); the modules of
// its config load record into it through ResolveSecret, so that a
// redactor can blank those values out of whatever text the config's
// deliveries produce. Its methods are safe for concurrent use and on a nil
// *Secrets, which records nothing.
type Secrets struct {
	mu     sync.Mutex
	values []string
}

// add records v, once.
func (s *Secrets) add(v string) {
	if s == nil || v == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.values, v) {
		s.values = append(s.values, v)
	}
}

// Values returns a copy of the recorded values, in the order they were
// first resolved.
func (s *Secrets) Values() []string {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.values)
}

// secretsKey is the context key of the config load's *Secrets.
type secretsKey struct{}

// withSecrets returns ctx carrying s: ResolveSecret under the returned
// context records into s. The webhook app loads its storage and notify
// target through it, and a receiver its targets.
func withSecrets(ctx caddy.Context, s *Secrets) caddy.Context {
	return ctx.WithValue(secretsKey{}, s)
}

// ResolveSecret expands the placeholders of value, the config field named
// field (such as "sign_secret" or "env: TOKEN"), and records the result in
// the Secrets that ctx carries, if any. Its error starts with field, names
// the global placeholder ({env.*}, {file.*}, …) that is empty or unset,
// and never quotes value nor what it resolved to.
func ResolveSecret(ctx context.Context, field, value string) (string, error) {
	v, err := resolvePlaceholders(value)
	if err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	recordSecret(ctx, v)
	return v, nil
}

// recordSecret records v, a secret that came from somewhere other than a
// config field (an issued secret read from its file), in the Secrets that
// ctx carries, if any.
func recordSecret(ctx context.Context, v string) {
	s, _ := ctx.Value(secretsKey{}).(*Secrets)
	s.add(v)
}

// resolvePlaceholders expands the placeholders in s, a value that may be
// a secret (a webhook secret, a DSN). Its error never quotes s, nor the
// replacer's error, which would: it names the placeholder that is empty or
// unset when that is one of Caddy's global placeholders ({env.*},
// {file.*}, {system.*}, {time.*}), whose name is not a secret and is what
// to fix. Any other brace pair may be part of a literal secret, so it is
// not named.
func resolvePlaceholders(s string) (string, error) {
	repl := caddy.NewReplacer()
	v, err := repl.ReplaceOrErr(s, true, true)
	if err == nil {
		return v, nil
	}
	for rest := s; ; {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			break
		}
		if open > 0 && rest[open-1] == '\\' {
			rest = rest[open+1:]
			continue
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			break
		}
		key := rest[open+1 : open+end]
		rest = rest[open+end+1:]
		if !globalPlaceholder(key) {
			continue
		}
		if v, ok := repl.GetString(key); !ok || v == "" {
			if strings.HasPrefix(key, "env.") {
				// A reload reads the environment Caddy started with:
				// a variable exported or added to an EnvironmentFile
				// since then is not there.
				return "", fmt.Errorf("placeholder {%s} is empty or unset in the environment Caddy was started with: "+
					"a variable set since needs a restart of Caddy, or a {file.…} placeholder, which is read at every load", key)
			}
			return "", fmt.Errorf("placeholder {%s} is empty or unset", key)
		}
	}
	return "", errors.New(`a placeholder in it is unknown (write a literal brace as \{)`)
}

// globalPlaceholder reports whether key is in a namespace of Caddy's
// global placeholders.
func globalPlaceholder(key string) bool {
	for _, ns := range []string{"env.", "file.", "system.", "time."} {
		if strings.HasPrefix(key, ns) && len(key) > len(ns) {
			return true
		}
	}
	return false
}
