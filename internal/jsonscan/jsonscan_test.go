package jsonscan

import "testing"

// TestScanners: each scanner accepts what JSON's grammar accepts, ends
// where the value ends, and refuses the rest; SkipValid finds the end of
// any valid value. (The content rules' FuzzValidJSON checks the whole
// grammar against encoding/json through these.)
func TestScanners(t *testing.T) {
	tests := []struct {
		name string
		scan func(b []byte, i int) (int, bool)
		in   string
		end  int // where the value ends, when ok
		ok   bool
	}{
		{"string", String, `"abc",`, 5, true},
		{"string with escapes", String, `"a\"b\\c\u00e9\n"`, 17, true},
		{"string not closed", String, `"abc`, 0, false},
		{"string with a control character", String, "\"a\x01b\"", 0, false},
		{"string with a bad escape", String, `"a\qb"`, 0, false},
		{"string with a short \\u", String, `"\u12"`, 0, false},
		{"not a string", String, `abc`, 0, false},
		{"zero", Number, `0,`, 1, true},
		{"negative fraction exponent", Number, `-12.5e+3]`, 8, true},
		{"a leading zero ends the number", Number, `01`, 1, true},
		{"a bare minus", Number, `-`, 0, false},
		{"a dot without digits", Number, `1.`, 0, false},
		{"an exponent without digits", Number, `1e+`, 0, false},
		{"true", func(b []byte, i int) (int, bool) { return Literal(b, i, "true") }, `true}`, 4, true},
		{"tru", func(b []byte, i int) (int, bool) { return Literal(b, i, "true") }, `tru`, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			end, ok := tt.scan([]byte(tt.in), 0)
			if ok != tt.ok || (ok && end != tt.end) {
				t.Errorf("scan(%q) = %d, %v; want %d, %v", tt.in, end, ok, tt.end, tt.ok)
			}
		})
	}
}

func TestSkipValid(t *testing.T) {
	tests := []struct {
		name, in string
		end      int
	}{
		{"object with a quoted brace", `{"a":"}","b":[1,{"c":2}]} `, 25},
		{"array", `[1,[2,[3]]],`, 11},
		{"string with escaped quotes", `"a\\\"b\\" x`, 10},
		{"number", `-1.5e3,`, 6},
		{"literal", `null]`, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SkipValid([]byte(tt.in), 0); got != tt.end {
				t.Errorf("SkipValid(%q) = %d, want %d", tt.in, got, tt.end)
			}
		})
	}
	if got := SkipSpace([]byte(" \t\r\nx"), 0); got != 4 {
		t.Errorf("SkipSpace = %d, want 4", got)
	}
}
