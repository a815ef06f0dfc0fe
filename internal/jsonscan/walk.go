package jsonscan

// Walker validates one JSON value and reports, on the way, what the
// project's readers need of it: the members of the top-level object (the
// verifiers' delivery id and event type, before any decoding) and where
// each object and array ends (the content rules' lazy objects step over a
// container with one lookup). It is one direct loop with a stack of its
// open containers: encoding/json's Valid steps a state machine through a
// function call per byte, and a recursive descent would grow the
// goroutine's stack by megabytes on a body nested MaxDepth deep. Unless it
// notes ends, it allocates nothing for a value nested up to 32 deep.
type Walker struct {
	// MaxEnds bounds Ends, so a body of tiny nested containers ([[],[],…])
	// costs a bounded share of its size in notes; 0 notes none.
	MaxEnds int
	// Ends are where the value's objects and arrays end, in the order
	// they start, up to MaxEnds; Walk appends to it.
	Ends []Span

	// The top-level member being read, when members are reported: its
	// key, and where its value starts. (Fields, not locals, so the loop
	// that reports none keeps its registers for itself.)
	keyStart, keyEnd, valueStart int
}

// Span is an object or array of the value: it starts at Start and ends
// just past its closing bracket, at End. int32 holds any offset of a body
// the plugin reads (max_body caps it at 64 MiB).
type Span struct{ Start, End int32 }

// Walk reports whether b is one JSON value with optional white space
// around it, exactly as encoding/json's Valid decides (it accepts bytes
// that are not UTF-8 inside strings, as Valid does), noting its
// containers' ends in w on the way. member, when not nil, is called with
// the quoted key and the raw value of each member of the top-level object,
// in order. (A parameter, not a field: a func stored in the Walker would
// escape to the heap with every call.)
func (w *Walker) Walk(b []byte, member func(key, value []byte)) bool {
	i, ok := w.value(b, SkipSpace(b, 0), member)
	return ok && SkipSpace(b, i) == len(b)
}

// open is a container the walker is inside: its closing bracket and its
// note in Ends (-1: not noted).
type open struct {
	closing byte
	note    int32
}

// value checks the value at b[i] and returns the index just past it.
func (w *Walker) value(b []byte, i int, member func(key, value []byte)) (int, bool) {
	var inline [32]open
	stack := inline[:0]
	report := false // the value is an object and member is set
	for {
		// A value starts at b[i].
		if i >= len(b) {
			return i, false
		}
		if report && len(stack) == 1 {
			w.valueStart = i
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			if len(stack) == MaxDepth {
				return i, false
			}
			closing := byte('}')
			if c == '[' {
				closing = ']'
			}
			note := int32(-1)
			if len(w.Ends) < w.MaxEnds {
				w.Ends = append(w.Ends, Span{Start: int32(i), End: -1})
				note = int32(len(w.Ends) - 1)
			}
			stack = append(stack, open{closing: closing, note: note})
			if len(stack) == 1 {
				report = closing == '}' && member != nil
			}
			if i = SkipSpace(b, i+1); i < len(b) && b[i] == closing {
				stack, i = w.closeTop(stack, i)
				break
			}
			if closing == '}' {
				if report && len(stack) == 1 {
					w.keyStart = i
					w.keyEnd, _ = String(b, i)
				}
				var ok bool
				if i, ok = key(b, i); !ok {
					return i, false
				}
			}
			continue // the first member's value
		case c == '"':
			var ok bool
			if i, ok = String(b, i); !ok {
				return i, false
			}
		case c == '-' || c >= '0' && c <= '9':
			var ok bool
			if i, ok = Number(b, i); !ok {
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
			if i, ok = Literal(b, i, word); !ok {
				return i, false
			}
		default:
			return i, false
		}
		// A value ended at i: a comma and the next member, or closing
		// brackets, follow.
		for {
			if report && len(stack) == 1 {
				member(b[w.keyStart:w.keyEnd], b[w.valueStart:i])
			}
			if len(stack) == 0 {
				return i, true
			}
			if i = SkipSpace(b, i); i >= len(b) {
				return i, false
			}
			top := stack[len(stack)-1]
			if b[i] == top.closing {
				stack, i = w.closeTop(stack, i)
				continue
			}
			if b[i] != ',' {
				return i, false
			}
			i = SkipSpace(b, i+1)
			if top.closing == '}' {
				if report && len(stack) == 1 {
					w.keyStart = i
					w.keyEnd, _ = String(b, i)
				}
				var ok bool
				if i, ok = key(b, i); !ok {
					return i, false
				}
			}
			break
		}
	}
}

// key checks an object member's key and colon at b[i], and returns the
// index of its value.
func key(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	i, ok := String(b, i)
	if !ok {
		return i, false
	}
	if i = SkipSpace(b, i); i >= len(b) || b[i] != ':' {
		return i, false
	}
	return SkipSpace(b, i+1), true
}

// closeTop closes the innermost container at its bracket b[i], notes its
// end, and returns the stack without it and the index past the bracket.
func (w *Walker) closeTop(stack []open, i int) ([]open, int) {
	if n := stack[len(stack)-1].note; n >= 0 {
		w.Ends[n].End = int32(i + 1)
	}
	return stack[:len(stack)-1], i + 1
}
