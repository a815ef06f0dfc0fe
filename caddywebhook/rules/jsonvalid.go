package rules

import "github.com/caddywebhook/caddywebhook/internal/jsonscan"

// scanJSON reports whether b is one JSON value with optional white space
// around it, exactly as encoding/json's Valid does (which accepts bytes
// that are not UTF-8 inside strings, as this does), and returns where each
// of its objects and arrays ends, in the order they start, so that a
// reader can step over a container without reading it again. It is a
// direct loop with its own stack of open containers: Valid steps a state
// machine through a function call per byte, and on a 2 KB body that check
// was half of what a body filter cost; a recursive descent would grow the
// goroutine's stack by megabytes on a body nested 10,000 deep.
func scanJSON(b []byte) ([]containerEnd, bool) {
	v := validator{b: b, maxEnds: len(b)/64 + 64}
	i, ok := v.run(jsonscan.SkipSpace(b, 0))
	return v.ends, ok && jsonscan.SkipSpace(b, i) == len(b)
}

// containerEnd is where an object or array that starts at start ends:
// just past its closing bracket. int32 holds any offset of a body, which
// max_body caps at 64 MiB.
type containerEnd struct{ start, end int32 }

type validator struct {
	b    []byte
	ends []containerEnd
	// maxEnds bounds the ends noted, so a body of tiny nested containers
	// ([[],[],…]) costs at most an eighth of its size in notes; the
	// containers past it are read byte by byte when skipped.
	maxEnds int
}

// open is a container the validator is inside: its closing bracket and
// its note in ends (-1: not noted).
type open struct {
	closing byte
	note    int
}

// run checks the value at b[i] and returns the index just past it.
func (v *validator) run(i int) (int, bool) {
	b := v.b
	var inline [32]open
	stack := inline[:0]
	for {
		// A value starts at b[i].
		if i >= len(b) {
			return i, false
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			if len(stack) == jsonscan.MaxDepth {
				return i, false
			}
			closing := byte('}')
			if c == '[' {
				closing = ']'
			}
			stack = append(stack, open{closing: closing, note: v.note(i)})
			if i = jsonscan.SkipSpace(b, i+1); i < len(b) && b[i] == closing {
				stack, i = v.closeTop(stack, i)
				break
			}
			if closing == '}' {
				var ok bool
				if i, ok = v.key(i); !ok {
					return i, false
				}
			}
			continue // the first member's value
		case c == '"':
			var ok bool
			if i, ok = jsonscan.String(v.b, i); !ok {
				return i, false
			}
		case c == '-' || c >= '0' && c <= '9':
			var ok bool
			if i, ok = jsonscan.Number(v.b, i); !ok {
				return i, false
			}
		case c == 't' || c == 'f' || c == 'n':
			word := "null"
			switch c {
			case 't':
				word = "true"
			case 'f':
				word = "false"
			}
			var ok bool
			if i, ok = jsonscan.Literal(b, i, word); !ok {
				return i, false
			}
		default:
			return i, false
		}
		// A value ended at i: a comma and the next member, or closing
		// brackets, follow.
		for {
			if len(stack) == 0 {
				return i, true
			}
			if i = jsonscan.SkipSpace(b, i); i >= len(b) {
				return i, false
			}
			top := stack[len(stack)-1]
			if b[i] == top.closing {
				stack, i = v.closeTop(stack, i)
				continue
			}
			if b[i] != ',' {
				return i, false
			}
			i = jsonscan.SkipSpace(b, i+1)
			if top.closing == '}' {
				var ok bool
				if i, ok = v.key(i); !ok {
					return i, false
				}
			}
			break
		}
	}
}

// key checks an object member's key and colon at b[i], and returns the
// index of its value.
func (v *validator) key(i int) (int, bool) {
	b := v.b
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	i, ok := jsonscan.String(v.b, i)
	if !ok {
		return i, false
	}
	if i = jsonscan.SkipSpace(b, i); i >= len(b) || b[i] != ':' {
		return i, false
	}
	return jsonscan.SkipSpace(b, i+1), true
}

// note notes a container starting at i, unless maxEnds are noted already.
func (v *validator) note(i int) int {
	if len(v.ends) >= v.maxEnds {
		return -1
	}
	v.ends = append(v.ends, containerEnd{start: int32(i), end: -1})
	return len(v.ends) - 1
}

// closeTop closes the innermost container at its bracket b[i] and returns
// the stack without it and the index past the bracket.
func (v *validator) closeTop(stack []open, i int) ([]open, int) {
	if n := stack[len(stack)-1].note; n >= 0 {
		v.ends[n].end = int32(i + 1)
	}
	return stack[:len(stack)-1], i + 1
}
