package signature

import (
	"strings"
	"testing"

	"github.com/caddywebhook/caddywebhook/internal/jsonscan"
)

func TestLookupJSON(t *testing.T) {
	cases := []struct {
		name      string
		body      string
		key       string
		want      string
		wantFound bool
		wantValid bool
	}{
		{"string", `{"id":"evt_1"}`, "id", "evt_1", true, true},
		{"number", `{"id": -12.5e3 }`, "id", "-12.5e3", true, true},
		{"last duplicate wins", `{"id":"a","id":"b"}`, "id", "b", true, true},
		{"later null clears", `{"id":"a","id":null}`, "id", "", false, true},
		{"nested key is not top level", `{"data":{"id":"inner"},"x":1}`, "id", "", false, true},
		{"after nested", `{"data":{"id":"inner","a":[1,{"id":2}]},"id":"outer"}`, "id", "outer", true, true},
		{"escaped value", `{"type":"a\u002eb\n"}`, "type", "a.b\n", true, true},
		{"escaped key", `{"t\u0079pe":"x"}`, "type", "x", true, true},
		{"case sensitive", `{"ID":"x"}`, "id", "", false, true},
		{"object value", `{"id":{}}`, "id", "", false, true},
		{"array top level", `[{"id":"x"}]`, "id", "", false, false},
		{"truncated", `{"id":"x"`, "id", "", false, false},
		{"trailing garbage", `{"id":"x"} x`, "id", "", false, false},
		{"trailing comma", `{"id":"x",}`, "id", "", false, false},
		{"leading zero", `{"id":01}`, "id", "", false, false},
		{"control char in string", "{\"id\":\"a\tb\"}", "id", "", false, false},
		{"bad escape", `{"id":"\x"}`, "id", "", false, false},
		{"mismatched brackets", `{"a":[}`, "id", "", false, false},
		{"empty", ``, "id", "", false, false},
		{"empty object", " {} ", "id", "", false, true},
		{"too deep", `{"a":` + strings.Repeat("[", jsonscan.MaxDepth) + strings.Repeat("]", jsonscan.MaxDepth) + `}`, "id", "", false, false},
		{"deepest allowed", `{"id":"x","a":` + strings.Repeat("[", jsonscan.MaxDepth-1) + strings.Repeat("]", jsonscan.MaxDepth-1) + `}`, "id", "x", true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vals, found := make([]string, 1), make([]bool, 1)
			valid := lookupJSON([]byte(tc.body), []string{tc.key}, vals, found)
			if valid != tc.wantValid || vals[0] != tc.want || found[0] != tc.wantFound {
				t.Errorf("lookupJSON = %q, %v, valid %v; want %q, %v, valid %v", vals[0], found[0], valid, tc.want, tc.wantFound, tc.wantValid)
			}
			checkAgainstEncodingJSON(t, []byte(tc.body), tc.key)
		})
	}
}
