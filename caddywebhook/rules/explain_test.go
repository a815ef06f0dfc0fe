package rules

import (
	"slices"
	"testing"
)

func TestFilterExplain(t *testing.T) {
	tests := []struct {
		name   string
		filter string
		body   string
		want   []string // the notes, as String gives them
	}{
		{
			name:   "an int against a string field",
			filter: `body.ref == 1`,
			body:   `{"ref":"refs/heads/main"}`,
			want:   []string{"line 1, column 10: compared a string with an int: values of different types are never equal, so this is always false"},
		},
		{
			name:   "a string against a bool field, not equal",
			filter: `event_type == "push" && body.draft != "false"`,
			body:   `{"draft":false}`,
			want:   []string{"line 1, column 36: compared a bool with a string: values of different types are never equal, so this is always true"},
		},
		{
			name:   "a quoted number against a JSON number",
			filter: `body.amount == "100"`,
			body:   `{"amount":100}`,
			want:   []string{"line 1, column 13: compared a double with a string: values of different types are never equal, so this is always false"},
		},
		{name: "the same types", filter: `body.ref == "refs/heads/main"`, body: `{"ref":"refs/heads/main"}`},
		{name: "a JSON number against an int literal compares as numbers", filter: `body.amount == 100`, body: `{"amount":100}`},
		{name: "a null compared is a test for a missing value", filter: `body.customer == null`, body: `{"customer":null}`},
		{name: "a missing field is the filter's error, not a note", filter: `body.nope == 1`, body: `{}`},
		{name: "an ordering comparison is not an equality", filter: `body.amount > 10`, body: `{"amount":100}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := CompileFilter([]string{tt.filter}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, n := range f.Explain(NewInput(&Event{Body: []byte(tt.body), EventType: "push"})) {
				got = append(got, n.String())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("notes\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}
