package cli

import "testing"

// TestCLICell: a value from a sender or an upstream cannot drive the
// terminal or break the table's alignment.
func TestCLICell(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		n        int
		want     string
	}{
		{"plain", "push", 0, "push"},
		{"empty is a dash", " \n ", 0, "-"},
		{"escape sequence", "push\x1b[2J", 0, "push\uFFFD[2J"},
		{"newline and tab make one line", "a\n\tb", 0, "a b"},
		{"C1 control", "a\u009bb", 0, "a\uFFFDb"},
		{"multibyte text kept", "café ✓", 0, "café ✓"},
		{"cut with the marker", "connection refused", 13, "connection…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cell(tt.in, tt.n); got != tt.want {
				t.Errorf("cell(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
			}
		})
	}
}
