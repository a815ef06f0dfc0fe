package rules

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
	i, ok := v.run(skipSpace(b, 0))
	return v.ends, ok && skipSpace(b, i) == len(b)
}

// containerEnd is where an object or array that starts at start ends:
// just past its closing bracket. int32 holds any offset of a body, which
// max_body caps at 64 MiB.
type containerEnd struct{ start, end int32 }

// maxJSONDepth is encoding/json's nesting limit, past which it refuses a
// document.
const maxJSONDepth = 10000

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
			if len(stack) == maxJSONDepth {
				return i, false
			}
			closing := byte('}')
			if c == '[' {
				closing = ']'
			}
			stack = append(stack, open{closing: closing, note: v.note(i)})
			if i = skipSpace(b, i+1); i < len(b) && b[i] == closing {
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
			if i, ok = v.str(i); !ok {
				return i, false
			}
		case c == '-' || c >= '0' && c <= '9':
			var ok bool
			if i, ok = v.number(i); !ok {
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
			if len(b)-i < len(word) || string(b[i:i+len(word)]) != word {
				return i, false
			}
			i += len(word)
		default:
			return i, false
		}
		// A value ended at i: a comma and the next member, or closing
		// brackets, follow.
		for {
			if len(stack) == 0 {
				return i, true
			}
			if i = skipSpace(b, i); i >= len(b) {
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
			i = skipSpace(b, i+1)
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
	i, ok := v.str(i)
	if !ok {
		return i, false
	}
	if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
		return i, false
	}
	return skipSpace(b, i+1), true
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

// plainByte marks the bytes a string may hold as they are: not a quote, a
// backslash or a control character.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func (v *validator) str(i int) (int, bool) {
	b := v.b
	i++
	for {
		for i < len(b) && plainByte[b[i]] {
			i++
		}
		if i >= len(b) {
			return i, false
		}
		switch b[i] {
		case '"':
			return i + 1, true
		case '\\':
			if i+1 >= len(b) {
				return i, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(b)-i < 6 || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return i, false
				}
				i += 6
			default:
				return i, false
			}
		default: // a control character
			return i, false
		}
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// number checks the grammar -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (v *validator) number(i int) (int, bool) {
	b := v.b
	if b[i] == '-' {
		i++
	}
	digits := func(i int) (int, bool) {
		j := i
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		return j, j > i
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i, _ = digits(i)
	default:
		return i, false
	}
	var ok bool
	if i < len(b) && b[i] == '.' {
		if i, ok = digits(i + 1); !ok {
			return i, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i, ok = digits(i); !ok {
			return i, false
		}
	}
	return i, true
}
