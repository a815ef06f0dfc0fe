package jsonscan

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestWalk: Walk accepts what encoding/json's Valid accepts, reports the
// top-level object's members as they are written, and notes each
// container's end where it is.
func TestWalk(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		members []string // key=value, raw
	}{
		{"object", `{"id":"evt_1","n":-1.5e3,"t":true,"z":null}`, []string{`"id"="evt_1"`, `"n"=-1.5e3`, `"t"=true`, `"z"=null`}},
		{"nested members are the top's", ` { "data" : {"id":"inner","a":[1,{"b":2}]}, "id":"outer" } `, []string{`"data"={"id":"inner","a":[1,{"b":2}]}`, `"id"="outer"`}},
		{"empty containers", `{"o":{},"a":[]}`, []string{`"o"={}`, `"a"=[]`}},
		{"escaped key", `{"i\u0064":"x"}`, []string{`"i\u0064"="x"`}},
		{"an array has no members", `[{"id":"x"}]`, nil},
		{"a scalar", `"just a string"`, nil},
		{"empty", ``, nil},
		{"trailing comma", `{"a":1,}`, nil},
		{"two values", `{} {}`, nil},
		{"unclosed", `{"a":[1,2}`, nil},
		{"bad literal", `{"a":tru}`, nil},
		{"control character in a string", "{\"a\":\"x\ny\"}", nil},
		{"too deep", strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), nil},
		{"as deep as allowed", strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := Walker{MaxEnds: 1 << 20}
			var members []string
			ok := w.Walk([]byte(tt.in), func(key, value []byte) { members = append(members, string(key)+"="+string(value)) })
			if want := json.Valid([]byte(tt.in)); ok != want {
				t.Fatalf("Walk = %v, json.Valid = %v", ok, want)
			}
			if !ok {
				return
			}
			if strings.Join(members, "|") != strings.Join(tt.members, "|") {
				t.Errorf("members %q, want %q", members, tt.members)
			}
			for _, e := range w.Ends[:min(len(w.Ends), 64)] {
				var v any
				if e.End < 0 || json.Unmarshal([]byte(tt.in[e.Start:e.End]), &v) != nil {
					t.Errorf("noted container %d..%d is not one JSON value: %q", e.Start, e.End, tt.in[e.Start:max(e.End, e.Start)])
				}
			}
		})
	}
}

// FuzzWalk holds Walk to encoding/json's Valid.
func FuzzWalk(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":"c"}]}`, `[]`, `"x"`, `{"a":1,}`, `{"\u00e9":"\ud800"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var w Walker
		if got, want := w.Walk(b, func([]byte, []byte) {}), json.Valid(b); got != want {
			t.Fatalf("Walk(%q) = %v, json.Valid = %v", b, got, want)
		}
	})
}
