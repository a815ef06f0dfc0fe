package rules

import (
	"strings"
	"testing"
)

func TestRedactQuoted(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"strconv quotes the value", `strconv.ParseInt: parsing "canary": invalid syntax`, `strconv.ParseInt: parsing "…": invalid syntax`},
		{"type names in single quotes stay", `type conversion error from 'string' to 'int'`, `type conversion error from 'string' to 'int'`},
		{"unclosed quote", `bad "secret`, `bad "…`},
		{"a missing key is named unquoted", `no such key: bodysecretvalue`, `no such key: …`},
		{"a key inserted twice", `insert failed: key bodysecretvalue already exists`, `insert failed: key …`},
		{"an index value", `unsupported index value bodysecretvalue in list`, `unsupported index value …`},
		{"an optional's value", `cannot convert from non-optional value bodysecretvalue`, `cannot convert from non-optional value …`},
		{"words that only contain key or value stay", `monkey valueless keys`, `monkey valueless keys`},
		{"long text is cut", strings.Repeat("x", 500), strings.Repeat("x", MaxErrorText)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RedactQuoted(tt.in); got != tt.want {
				t.Errorf("RedactQuoted(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
