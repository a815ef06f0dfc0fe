package rules

import "strings"

// MaxErrorText bounds a rule error as RedactQuoted leaves it, in bytes.
const MaxErrorText = 200

// RedactQuoted replaces what s quotes in double quotes with an ellipsis,
// drops what follows the word "key" or "value", and cuts it to
// MaxErrorText: cel's messages name the values they failed on, quoted
// (strconv's `parsing "abc"`) or not, after those words (`no such key:
// abc`, `insert failed: key abc already exists`, `unsupported index value
// abc in list`), and those may come from the body (`headers[body.k]`).
// Single quotes stay: cel puts type names in them.
func RedactQuoted(s string) string {
	s = cutAfterNamedValue(s)
	var b strings.Builder
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
			b.WriteString("…")
			b.WriteRune(r)
		case quote != 0:
		case r == '"':
			quote = r
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
		if b.Len() >= MaxErrorText {
			break
		}
	}
	if quote != 0 {
		b.WriteString("…")
	}
	return b.String()
}

// cutAfterNamedValue cuts s after the first whole word "key" or "value"
// (with its colon, if any) and ends it with an ellipsis.
func cutAfterNamedValue(s string) string {
	for i := 0; i < len(s); {
		j := strings.IndexAny(s[i:], " ")
		word := s[i:]
		if j >= 0 {
			word = s[i : i+j]
		}
		if w := strings.TrimSuffix(word, ":"); (w == "key" || w == "value") && j >= 0 {
			return s[:i+j+1] + "…"
		}
		if j < 0 {
			break
		}
		i += j + 1
	}
	return s
}
