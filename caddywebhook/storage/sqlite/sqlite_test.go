package sqlitestorage

import (
	"context"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// TestMaxBatch: max_batch has the SQLite default, and a negative one is
// refused naming the option.
func TestMaxBatch(t *testing.T) {
	tests := []struct {
		name     string
		st       Storage
		settings string // must appear in the settings
		err      string // the error must contain this; "" for none
	}{
		{"default", Storage{Path: "/tmp/q.db"}, "max_batch=256", ""},
		{"one", Storage{Path: "/tmp/q.db", MaxBatch: 1}, "max_batch=1", ""},
		{"negative", Storage{Path: "/tmp/q.db", MaxBatch: -1}, "", "max_batch is -1, must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
			defer cancel()
			err := tt.st.Provision(ctx)
			if err == nil {
				err = tt.st.Validate()
			}
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
			if key := tt.st.StoreKey(); key != "sqlite:/tmp/q.db" {
				t.Errorf("key %q, want sqlite:/tmp/q.db", key)
			}
		})
	}
}
