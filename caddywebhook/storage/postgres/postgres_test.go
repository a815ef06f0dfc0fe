package postgresstorage

import (
	"context"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/postgres"
)

// provision provisions and validates s as Caddy would.
func provision(t *testing.T, s *Storage) error {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	if err := s.Provision(ctx); err != nil {
		return err
	}
	return s.Validate()
}

func TestDSNFingerprint(t *testing.T) {
	const a = "postgres://u:pw-one@h/db"
	const b = "postgres://u:pw-two@h/db"
	if dsnFingerprint(a) != dsnFingerprint(a) {
		t.Error("one DSN has two fingerprints")
	}
	if dsnFingerprint(a) == dsnFingerprint(b) {
		t.Error("two DSNs share a fingerprint")
	}
	s := &Storage{DSN: a, Schema: "s1"}
	if err := provision(t, s); err != nil {
		t.Fatal(err)
	}
	key, name := s.StoreKey(), s.StoreName()
	if !strings.HasPrefix(key, "postgres:") || !strings.HasSuffix(key, "/s1") {
		t.Errorf("key %q is not postgres:<fingerprint>/<schema>", key)
	}
	for _, part := range []string{"pw-one", "u:", "@h"} {
		if strings.Contains(key, part) || strings.Contains(name, part) {
			t.Errorf("key %q or name %q reveals %q", key, name, part)
		}
	}
}

// TestMaxBatch: max_batch has the Postgres default, a negative one is
// refused naming the option, and the value reaches the opened store.
func TestMaxBatch(t *testing.T) {
	tests := []struct {
		name     string
		st       Storage
		settings string // must appear in the settings
		err      string // the error must contain this; "" for none
		open     int    // when not 0, open the store and want this cap
	}{
		{"default", Storage{DSN: "postgres://h/db"}, "max_batch=128", "", 0},
		{"32", Storage{DSN: "postgres://h/db", MaxBatch: 32}, "max_batch=32", "", 0},
		{"negative", Storage{DSN: "postgres://h/db", MaxBatch: -1}, "", "max_batch is -1, must not be negative", 0},
		{"opened with one", Storage{DSN: "{env." + testutil.DSNEnv + "}", MaxBatch: 1}, "max_batch=1", "", 1},
		{"opened with the default", Storage{DSN: "{env." + testutil.DSNEnv + "}"}, "max_batch=128", "", 128},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.open != 0 {
				tt.st.Schema = testutil.FreshSchema(t, testutil.PostgresDSN(t))
			}
			err := provision(t, &tt.st)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("provision = %v, want an error with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if settings := tt.st.StoreSettings(); !strings.Contains(settings, tt.settings) {
				t.Errorf("settings %q lack %q", settings, tt.settings)
			}
			if tt.open == 0 {
				return
			}
			s, err := tt.st.OpenStore(t.Context(), queue.Keys{})
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer s.Close()
			pg, ok := s.(*postgres.Store)
			if !ok {
				t.Fatalf("opened a %T", s)
			}
			if got := pg.MaxBatch(); got != tt.open {
				t.Errorf("the store's MaxBatch is %d, want %d", got, tt.open)
			}
		})
	}
}
