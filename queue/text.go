package queue

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// TextCut ends a text that SafeText or SafeLine cut short.
const TextCut = "…"

// SafeText makes s safe to store, log and print on a terminal, keeping its
// lines. Job errors, exec output, upstream answers and payloads come from
// programs and senders nobody vetted; this is the one rule the project
// applies to them, so an escape sequence, a NUL or a forged line cannot
// reach a log, a table, a terminal or a PostgreSQL text column:
//
//   - newlines and tabs are kept, carriage returns are dropped (CRLF
//     becomes LF), and any other white space (vertical tab, form feed,
//     U+0085, U+2028, no-break space) becomes a plain space;
//   - every other character that is not printable (control characters
//     such as ESC, NUL, DEL, C1 controls such as CSI, format characters
//     such as the bidi overrides) and every byte of invalid UTF-8 becomes U+FFFD,
//     except that a partial rune at either end, left by a caller that
//     kept only a window of a longer stream, is dropped;
//   - white space at both ends is trimmed;
//   - when the result is longer than limit bytes (limit > 0), it is cut
//     at a rune boundary and ends with TextCut, all within limit bytes.
//
// The result is valid UTF-8 and, when limit > 0, at most limit bytes.
func SafeText(s string, limit int) string {
	return safeText(s, limit, false)
}

// SafeLine is SafeText for one line: a log field, a table cell, a status
// line. Every run of white space, newlines and tabs included, becomes one
// space; everything else follows SafeText's rule.
func SafeLine(s string, limit int) string {
	return safeText(s, limit, true)
}

func safeText(s string, limit int, oneLine bool) string {
	// A partial rune at the start is what a ring buffer or a tail cut left.
	for i := 1; i < utf8.UTFMax && len(s) > 0 && !utf8.RuneStart(s[0]); i++ {
		s = s[1:]
	}
	var b strings.Builder
	if limit > 0 {
		b.Grow(min(len(s), limit+len(TextCut)))
	} else {
		b.Grow(len(s))
	}
	// White space is held back until a visible rune follows, so none is
	// written at either end; in one line a run of it becomes one space.
	var space []byte
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 && !utf8.FullRuneInString(s[i:]) {
			break // a partial rune at the end: the caller's cut
		}
		i += size
		invalid := r == utf8.RuneError && size == 1
		if !invalid && (r == '\r' || unicode.IsSpace(r)) {
			if b.Len() == 0 || (oneLine && len(space) > 0) || (limit > 0 && len(space) > limit) {
				continue
			}
			switch {
			case oneLine:
				space = append(space, ' ')
			case r == '\n' || r == '\t':
				space = append(space, byte(r))
			case r != '\r':
				space = append(space, ' ')
			}
			continue
		}
		b.Write(space)
		space = space[:0]
		if !invalid && unicode.IsPrint(r) {
			b.WriteRune(r)
		} else {
			b.WriteRune(utf8.RuneError)
		}
		if limit > 0 && b.Len() > limit {
			break // it will be cut; the rest cannot change that
		}
	}
	out := b.String()
	if limit <= 0 || len(out) <= limit {
		return out
	}
	if limit < len(TextCut) {
		return strings.TrimRightFunc(cutRunes(out, limit), unicode.IsSpace)
	}
	return strings.TrimRightFunc(cutRunes(out, limit-len(TextCut)), unicode.IsSpace) + TextCut
}

// cutRunes returns the longest prefix of s of at most n bytes that does
// not split a UTF-8 sequence.
func cutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
