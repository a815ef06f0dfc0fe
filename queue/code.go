package queue

import (
	"encoding/json"
	"strconv"
)

// Code is what a target reported of one attempt besides its error: the
// status an HTTP upstream answered, or the exit code of a program. It is
// kept in the attempt's history for delivered attempts as well as failed
// ones, so an operator sees the 200 or the exit 0, not only the 503 inside
// an error text. The zero Code is none: a network error, a timeout, a
// program that never started or was killed by a signal.
type Code struct {
	value int32
	set   bool
}

// CodeOf returns the Code v.
func CodeOf(v int) Code { return Code{value: int32(v), set: true} }

// Value returns the code, and false when there is none.
func (c Code) Value() (int, bool) { return int(c.value), c.set }

// IsZero reports whether there is no code, for the omitzero JSON option.
func (c Code) IsZero() bool { return !c.set }

// String returns the code in decimal, or "" when there is none.
func (c Code) String() string {
	if !c.set {
		return ""
	}
	return strconv.Itoa(int(c.value))
}

// MarshalJSON writes the code as a number, null when there is none.
func (c Code) MarshalJSON() ([]byte, error) {
	if !c.set {
		return []byte("null"), nil
	}
	return strconv.AppendInt(nil, int64(c.value), 10), nil
}

// UnmarshalJSON reads a number, or null for none.
func (c *Code) UnmarshalJSON(b []byte) error {
	var v *int32
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*c = Code{}
	if v != nil {
		*c = Code{value: *v, set: true}
	}
	return nil
}
