package rules

import (
	"encoding/json"
	"strings"
	"testing"

	"cel.dev/cel-go/common/types"
)

// TestValidJSON holds validJSON to encoding/json's Valid, case by case.
func TestValidJSON(t *testing.T) {
	tests := []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"space only", " \t\r\n"},
		{"object", `{"a":1,"b":[true,false,null],"c":{"d":"e"}}`},
		{"space everywhere", " { \"a\" : [ 1 , 2 ] , \"b\" : { } } "},
		{"empty containers", `[{},[],""]`},
		{"trailing comma in object", `{"a":1,}`},
		{"trailing comma in array", `[1,]`},
		{"missing colon", `{"a" 1}`},
		{"unquoted key", `{a:1}`},
		{"key not a string", `{1:1}`},
		{"unclosed object", `{"a":1`},
		{"unclosed array", `[1,2`},
		{"unclosed string", `"abc`},
		{"two values", `{} {}`},
		{"garbage after", `{}x`},
		{"numbers", `[0,-0,1,-1,12.5,1e5,1E+5,1e-5,0.0e0,123456789012345678901234567890]`},
		{"leading zero", `01`},
		{"bare minus", `-`},
		{"dot without digits", `1.`},
		{"exponent without digits", `1e`},
		{"plus sign", `+1`},
		{"escapes", `"\" \\ \/ \b \f \n \r \t \u00e9 \uD83D\uDE00"`},
		{"bad escape", `"\x"`},
		{"short unicode escape", `"\u12"`},
		{"bad hex", `"\u12g4"`},
		{"control character", "\"a\tb\""},
		{"DEL is allowed", "\"\x7f\""},
		{"invalid UTF-8 allowed", "\"\xff\xfe\""},
		{"literals", `[true,false,null]`},
		{"short literal", `tru`},
		{"misspelt literal", `nul1`},
		{"literal with tail", `truex`},
		{"nested at the limit", strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth)},
		{"nested past the limit", strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1)},
		{"objects past the limit", strings.Repeat(`{"a":`, maxJSONDepth+1) + "1" + strings.Repeat("}", maxJSONDepth+1)},
		{"a Stripe event", stripeBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := validJSON([]byte(tt.in)), json.Valid([]byte(tt.in)); got != want {
				t.Errorf("validJSON = %v, encoding/json says %v", got, want)
			}
		})
	}
}

// TestScanJSONBoundsNotes checks that a body of tiny containers gets at
// most its bound of notes, and that objects past it still read right.
func TestScanJSONBoundsNotes(t *testing.T) {
	body := `{"list":[` + strings.Repeat(`[],`, 10000) + `[]],"after":{"x":1}}`
	ends, ok := scanJSON([]byte(body))
	if !ok {
		t.Fatal("scanJSON: not valid")
	}
	if limit := len(body)/64 + 64; len(ends) > limit {
		t.Errorf("%d ends noted, want at most %d", len(ends), limit)
	}
	obj := parseBody([]byte(body)).(*lazyObject)
	after, found := obj.find("after")
	if !found {
		t.Fatal("after: not found")
	}
	x, found := after.(*lazyObject).find("x")
	if !found || x.Equal(types.Double(1)) != types.True {
		t.Errorf("after.x = %v, %v; want 1", x, found)
	}
}

// FuzzValidJSON: validJSON and encoding/json's Valid agree on any input.
func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":"c"}]}`, `"\u00e9"`, `-1.5e+3`, `[true,null]`, stripeBody, `{"a":1,}`, "\"\x01\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ends, ok := scanJSON(b)
		if want := json.Valid(b); ok != want {
			t.Fatalf("validJSON(%q) = %v, encoding/json says %v", b, ok, want)
		}
		if !ok {
			return
		}
		// Every container's noted end is where reading its bytes ends.
		for _, e := range ends {
			if got := skipValue(b, int(e.start)); got != int(e.end) {
				t.Fatalf("%q: the container at %d ends at %d, noted %d", b, e.start, got, e.end)
			}
		}
	})
}

// FuzzLazyObject: every member a lazily read object finds is the one
// encoding/json decodes (the last of a repeated key, escapes decoded).
func FuzzLazyObject(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":{"c":[1,2]},"a":"x"}`, `{"e\u0066":"escaped","d":{"e":{"f":null}}}`, stripeBody, `{"":true," k ":false}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want map[string]any
		if json.Unmarshal(b, &want) != nil || want == nil {
			return
		}
		obj, ok := parseBody(b).(*lazyObject)
		if !ok {
			t.Fatalf("%q: parseBody gave no object", b)
		}
		for k, v := range want {
			got, found := obj.find(k)
			if !found {
				t.Fatalf("%q: key %q not found", b, k)
			}
			if eq := got.Equal(types.DefaultTypeAdapter.NativeToValue(v)); eq != types.True {
				t.Fatalf("%q: key %q = %v, encoding/json decodes %v", b, k, got, v)
			}
		}
	})
}
