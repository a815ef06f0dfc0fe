package sqlite

import (
	"path/filepath"
	"testing"
)

// TestPausesSurviveReopen: a pause is in the file, so it holds after a
// restart and for another store on the same file.
func TestPausesSurviveReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	a, err := Open(t.Context(), Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Pause(t.Context(), "shop", "mail"); err != nil {
		t.Fatal(err)
	}
	b, err := Open(t.Context(), Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	ps, err := b.ListPauses(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].Source != "shop" || ps[0].Target != "mail" {
		t.Fatalf("pauses after reopen = %+v, want shop/mail", ps)
	}
}
