package main

import (
	"strings"
	"testing"
)

func TestProgress(t *testing.T) {
	tests := []struct {
		name      string
		tty       bool
		total     int
		output    string // what go build -v printed
		wantShown string // what the progress wrote
		wantOther string // what it handed back as not a package
	}{
		{
			name:      "log: a line every tenth",
			total:     20,
			output:    strings.Repeat("example.com/p\n", 20),
			wantShown: "demo: compiled 2 of 20 packages\ndemo: compiled 4 of 20 packages\ndemo: compiled 6 of 20 packages\ndemo: compiled 8 of 20 packages\ndemo: compiled 10 of 20 packages\ndemo: compiled 12 of 20 packages\ndemo: compiled 14 of 20 packages\ndemo: compiled 16 of 20 packages\ndemo: compiled 18 of 20 packages\ndemo: compiled 20 of 20 packages\n",
		},
		{
			name:      "terminal: one line rewritten",
			tty:       true,
			total:     2,
			output:    "example.com/a\nexample.com/b\n",
			wantShown: "\rdemo: compiled 1 of 2 packages (50%)\rdemo: compiled 2 of 2 packages (100%)\n",
		},
		{
			name:      "errors are kept apart from package names",
			total:     100,
			output:    "example.com/a\n# example.com/b\nb/b.go:3:1: syntax error: unexpected }\n",
			wantOther: "# example.com/b\nb/b.go:3:1: syntax error: unexpected }\n",
		},
		{
			name:      "more packages than listed: the count stops at the total",
			tty:       true,
			total:     1,
			output:    "example.com/a\nexample.com/b\n",
			wantShown: "\rdemo: compiled 1 of 1 packages (100%)\rdemo: compiled 1 of 1 packages (100%)\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w strings.Builder
			p := newProgress(&w, tt.total, tt.tty)
			other := p.read(strings.NewReader(tt.output))
			p.done()
			if got := w.String(); got != tt.wantShown {
				t.Errorf("shown:\n%q\nwant:\n%q", got, tt.wantShown)
			}
			if other != tt.wantOther {
				t.Errorf("other:\n%q\nwant:\n%q", other, tt.wantOther)
			}
		})
	}
}
