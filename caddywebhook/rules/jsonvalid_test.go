package rules

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"

	"github.com/caddywebhook/caddywebhook/internal/jsonscan"
)

// TestValidJSON holds scanJSON to encoding/json's Valid, case by case.
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
		{"nested at the limit", strings.Repeat("[", jsonscan.MaxDepth) + strings.Repeat("]", jsonscan.MaxDepth)},
		{"nested past the limit", strings.Repeat("[", jsonscan.MaxDepth+1) + strings.Repeat("]", jsonscan.MaxDepth+1)},
		{"objects past the limit", strings.Repeat(`{"a":`, jsonscan.MaxDepth+1) + "1" + strings.Repeat("}", jsonscan.MaxDepth+1)},
		{"a Stripe event", stripeBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, got := scanJSON([]byte(tt.in)); got != json.Valid([]byte(tt.in)) {
				t.Errorf("scanJSON says valid %v, encoding/json the opposite", got)
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

// TestLazyObjectManyMembers: an object of more members than an index
// holds is still read right, member by member.
func TestLazyObjectManyMembers(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range maxIndexed + 10 {
		fmt.Fprintf(&b, `"k%d":%d,`, i, i)
	}
	b.WriteString(`"k5":"last"}`)
	obj := parseBody([]byte(b.String())).(*lazyObject)
	for key, want := range map[string]ref.Val{"k0": types.Double(0), "k1030": types.Double(1030), "k5": types.String("last")} {
		if got, found := obj.find(key); !found || got.Equal(want) != types.True {
			t.Errorf("%s = %v, %v; want %v", key, got, found, want)
		}
	}
	if _, found := obj.find("k9999"); found {
		t.Error("k9999 found")
	}
	if obj.members != nil {
		t.Errorf("an index of %d members kept", len(obj.members))
	}
}

// FuzzValidJSON: scanJSON and encoding/json's Valid agree on any input.
func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":"c"}]}`, `"\u00e9"`, `-1.5e+3`, `[true,null]`, stripeBody, `{"a":1,}`, "\"\x01\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ends, ok := scanJSON(b)
		if want := json.Valid(b); ok != want {
			t.Fatalf("scanJSON(%q) says valid %v, encoding/json says %v", b, ok, want)
		}
		if !ok {
			return
		}
		// Every container's noted end is where reading its bytes ends.
		for _, e := range ends {
			if got := jsonscan.SkipValid(b, int(e.Start)); got != int(e.End) {
				t.Fatalf("%q: the container at %d ends at %d, noted %d", b, e.Start, got, e.End)
			}
		}
	})
}

// FuzzLazyObject: every member a lazily read object finds is the one
// encoding/json decodes (the last of a repeated key, escapes decoded).
func FuzzLazyObject(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":{"c":[1,2]},"a":"x"}`, `{"e\u0066":"escaped","d":{"e":{"f":null}}}`, stripeBody, `{"":true," k ":false}`,
		`{"a\\b":1}`, `{"\u0061":1}`, "{\"\xff\":1}"} {
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
		// A key's raw text (escapes, bytes not UTF-8) is found only when
		// it is also what the key decodes to.
		obj.each(func(m memberSpan) bool {
			raw := string(b[m.key0:m.key1])
			_, inJSON := want[raw]
			if _, found := obj.find(raw); found != inJSON {
				t.Fatalf("%q: the raw key %q found %v, encoding/json has it %v", b, raw, found, inJSON)
			}
			return true
		})
	})
}
