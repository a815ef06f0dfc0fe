package postgres

import (
	"testing"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// TestPausesShared: instances sharing a schema share the pauses, and a
// resume in one wakes the pools of the others (the NOTIFY of new work).
func TestPausesShared(t *testing.T) {
	dsn := testutil.PostgresDSN(t)
	schema := testSchema(t, dsn)
	a := openStore(t, Config{DSN: dsn, Schema: schema})
	b := openStore(t, Config{DSN: dsn, Schema: schema})
	if err := a.Pause(t.Context(), "shop", "mail"); err != nil {
		t.Fatal(err)
	}
	ps, err := b.ListPauses(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].Source != "shop" || ps[0].Target != "mail" {
		t.Fatalf("the other instance sees pauses %+v, want shop/mail", ps)
	}
	select {
	case <-a.Ready():
	default:
	}
	if err := b.Resume(t.Context(), "shop", ""); err != nil {
		t.Fatal(err)
	}
	testutil.Receive(t, a.Ready())
	if ps, err := a.ListPauses(t.Context()); err != nil || len(ps) != 0 {
		t.Fatalf("pauses after the other instance's resume: %+v, %v; want none", ps, err)
	}
}
