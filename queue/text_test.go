package queue_test

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/caddywebhook/caddywebhook/queue"
)

func TestSafeText(t *testing.T) {
	long := strings.Repeat("é", 10) // 20 bytes
	tests := []struct {
		name  string
		in    string
		limit int
		text  string // SafeText
		line  string // SafeLine
	}{
		{"plain text unchanged", "exit status 1", 0, "exit status 1", "exit status 1"},
		{"empty", "", 10, "", ""},
		{"only white space", " \r\n\t ", 0, "", ""},
		{"control characters", "a\x01b\x7fc\u009bd", 0, "a\uFFFDb\uFFFDc\uFFFDd", "a\uFFFDb\uFFFDc\uFFFDd"},
		{"NUL", "exit 1: \x00 tail", 0, "exit 1: \uFFFD tail", "exit 1: \uFFFD tail"},
		{"invalid UTF-8 inside", "a\xffb\xc3(c", 0, "a\uFFFDb\uFFFD(c", "a\uFFFDb\uFFFD(c"},
		{"partial runes at both ends dropped", "\xa9 mid \xe2\x82", 0, "mid", "mid"},
		{"CRLF", "one\r\ntwo\r\n", 0, "one\ntwo", "one two"},
		{"carriage return cannot overwrite", "ok\rFAIL", 0, "okFAIL", "ok FAIL"},
		{"tabs and lines", "  a\tb\n\n c  ", 0, "a\tb\n\n c", "a b c"},
		{"other white space becomes a space", "a\u00a0b\u2028c\vd\u0085e", 0, "a b c d e", "a b c d e"},
		{"ANSI escape", "push\x1b[2J\x1b[31mred", 0, "push\uFFFD[2J\uFFFD[31mred", "push\uFFFD[2J\uFFFD[31mred"},
		{"bidi override", "abc\u202edcba", 0, "abc\uFFFDdcba", "abc\uFFFDdcba"},
		{"forged log line", "done\n{\"level\":\"info\"}", 0, "done\n{\"level\":\"info\"}", "done {\"level\":\"info\"}"},
		{"fits exactly", "abcdef", 6, "abcdef", "abcdef"},
		{"cut with the marker", "abcdefgh", 6, "abc…", "abc…"},
		{"long multi-byte cut on a rune boundary", long, 10, "ééé…", "ééé…"},
		{"cut drops the space before the marker", "ab  cdefgh", 6, "ab…", "ab…"},
		{"trailing space does not force a cut", "abcdef" + strings.Repeat(" ", 100), 6, "abcdef", "abcdef"},
		{"limit below the marker", "abcdef", 2, "ab", "ab"},
		{"replacement counts toward the limit", "\x00\x00\x00", 6, "\uFFFD…", "\uFFFD…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := queue.SafeText(tt.in, tt.limit); got != tt.text {
				t.Errorf("SafeText(%q, %d) = %q, want %q", tt.in, tt.limit, got, tt.text)
			}
			if got := queue.SafeLine(tt.in, tt.limit); got != tt.line {
				t.Errorf("SafeLine(%q, %d) = %q, want %q", tt.in, tt.limit, got, tt.line)
			}
		})
	}
}

func FuzzSafeText(f *testing.F) {
	for _, s := range []string{"", "exit 1", "a\x00b", "\xff\xfe", "one\r\ntwo", "\x1b[2J", "é" + strings.Repeat("x", 40), " \t\n "} {
		f.Add(s, 0)
		f.Add(s, 4)
	}
	f.Fuzz(func(t *testing.T, s string, limit int) {
		limit %= 64
		for _, tt := range []struct {
			name    string
			sanit   func(string, int) string
			allowed string
		}{
			{"SafeText", queue.SafeText, "\n\t"},
			{"SafeLine", queue.SafeLine, ""},
		} {
			got := tt.sanit(s, limit)
			if !utf8.ValidString(got) {
				t.Fatalf("%s(%q, %d) = %q: invalid UTF-8", tt.name, s, limit, got)
			}
			if limit > 0 && len(got) > limit {
				t.Fatalf("%s(%q, %d) = %q: %d bytes", tt.name, s, limit, got, len(got))
			}
			for _, r := range got {
				if !unicode.IsPrint(r) && r != ' ' && !strings.ContainsRune(tt.allowed, r) {
					t.Fatalf("%s(%q, %d) = %q: holds %U", tt.name, s, limit, got, r)
				}
			}
			if strings.TrimSpace(got) != got {
				t.Fatalf("%s(%q, %d) = %q: not trimmed", tt.name, s, limit, got)
			}
			if again := tt.sanit(got, limit); again != got {
				t.Fatalf("%s(%q, %d) = %q, but again gives %q", tt.name, s, limit, got, again)
			}
		}
	})
}
