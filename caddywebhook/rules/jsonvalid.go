package rules

// validJSON reports whether b is one JSON value with optional white space
// around it, exactly as encoding/json's Valid does (which accepts bytes
// that are not UTF-8 inside strings, as this does), but in a direct loop:
// Valid steps a state machine through a function call per byte, and on a
// 2 KB body that check was half of what a body filter cost.
func validJSON(b []byte) bool {
	_, ok := scanJSON(b)
	return ok
}

// scanJSON checks b as validJSON does and returns where each of its
// objects and arrays ends, in the order they start, so that a reader can
// step over a container without reading it again.
func scanJSON(b []byte) ([]containerEnd, bool) {
	v := validator{b: b, maxEnds: len(b)/64 + 64}
	i := skipSpace(b, 0)
	i, ok := v.value(i, 0)
	return v.ends, ok && skipSpace(b, i) == len(b)
}

// containerEnd is where an object or array that starts at start ends:
// just past its closing bracket.
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

// value checks the value at b[i] and returns the index just past it.
func (v *validator) value(i, depth int) (int, bool) {
	b := v.b
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '"':
		return v.str(i)
	case c == '{':
		return v.object(i, depth+1)
	case c == '[':
		return v.array(i, depth+1)
	case c == '-' || c >= '0' && c <= '9':
		return v.number(i)
	case c == 't':
		return v.literal(i, "true")
	case c == 'f':
		return v.literal(i, "false")
	case c == 'n':
		return v.literal(i, "null")
	}
	return i, false
}

func (v *validator) literal(i int, word string) (int, bool) {
	if len(v.b)-i < len(word) || string(v.b[i:i+len(word)]) != word {
		return i, false
	}
	return i + len(word), true
}

func (v *validator) object(i, depth int) (int, bool) {
	b := v.b
	return v.container(i, depth, '}', func(i int) (int, bool) {
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
		return v.value(skipSpace(b, i+1), depth)
	})
}

func (v *validator) array(i, depth int) (int, bool) {
	return v.container(i, depth, ']', func(i int) (int, bool) { return v.value(i, depth) })
}

// container checks the object or array at b[i]: members read by member,
// separated by commas, up to the closing bracket.
func (v *validator) container(i, depth int, closing byte, member func(i int) (int, bool)) (int, bool) {
	if depth > maxJSONDepth {
		return i, false
	}
	at := v.open(i)
	b := v.b
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == closing {
		return v.close(at, i+1), true
	}
	for {
		var ok bool
		if i, ok = member(i); !ok {
			return i, false
		}
		if i = skipSpace(b, i); i >= len(b) {
			return i, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case closing:
			return v.close(at, i+1), true
		default:
			return i, false
		}
	}
}

// open notes a container starting at i, unless maxEnds are noted
// already; close notes where it ends.
func (v *validator) open(i int) int {
	if len(v.ends) >= v.maxEnds {
		return -1
	}
	v.ends = append(v.ends, containerEnd{start: int32(i), end: -1})
	return len(v.ends) - 1
}

func (v *validator) close(at, end int) int {
	if at >= 0 {
		v.ends[at].end = int32(end)
	}
	return end
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
