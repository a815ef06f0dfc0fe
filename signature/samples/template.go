package samples

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The template convention of the data files (the package documentation
// says it for the writers of samples): a JSON string may hold
// placeholders, {{generator arguments #label}}. Every occurrence of the
// same placeholder text in one rendering gets the same value, so an id
// that a body repeats (a customer in a session and in its invoice) stays
// one id; the #label tells two values of one generator apart. A string
// that is exactly one placeholder of a number generator becomes a JSON
// number; anywhere else a placeholder is replaced by its text.

// renderer expands the placeholders of one rendering.
type renderer struct {
	now       time.Time
	event     string
	fragments map[string]*value
	vars      map[string]string // placeholder text → value
}

// maxFragmentDepth bounds fragments within fragments: a loop in the data
// is an error, not a stack overflow.
const maxFragmentDepth = 8

// render returns a copy of v with every placeholder expanded.
func (r *renderer) render(v *value, depth int) (*value, error) {
	switch v.kind {
	case kindObject, kindArray:
		c := &value{kind: v.kind, keys: slices.Clone(v.keys)}
		c.elems = make([]*value, len(v.elems))
		for i, e := range v.elems {
			re, err := r.render(e, depth)
			if err != nil {
				if v.kind == kindObject {
					return nil, fmt.Errorf("%s: %w", v.keys[i], err)
				}
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			c.elems[i] = re
		}
		return c, nil
	case kindString:
		return r.renderString(v.text, depth)
	}
	// A copy, as of everything else: Event.Set writes over the nodes of
	// its rendering, which must not be the template's, shared by every
	// later rendering (and by concurrent ones: the admin API renders
	// samples for every `caddy webhook send`).
	return &value{kind: v.kind, text: v.text}, nil
}

// renderString expands the placeholders of one JSON string.
func (r *renderer) renderString(s string, depth int) (*value, error) {
	if !strings.Contains(s, "{{") {
		return &value{kind: kindString, text: s}, nil
	}
	if inner, ok := whole(s); ok {
		if name, ok := strings.CutPrefix(inner, "use "); ok {
			f := r.fragments[strings.TrimSpace(name)]
			if f == nil {
				return nil, fmt.Errorf("{{%s}}: no fragment %q", inner, name)
			}
			if depth >= maxFragmentDepth {
				return nil, fmt.Errorf("{{%s}}: fragments nested deeper than %d", inner, maxFragmentDepth)
			}
			return r.render(f, depth+1)
		}
		text, number, err := r.expand(inner)
		if err != nil {
			return nil, err
		}
		if number {
			return &value{kind: kindLiteral, text: text}, nil
		}
		return &value{kind: kindString, text: text}, nil
	}
	text, err := r.text(s)
	if err != nil {
		return nil, err
	}
	return &value{kind: kindString, text: text}, nil
}

// text expands every placeholder of s into its text.
func (r *renderer) text(s string) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(s, "{{")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		j := strings.Index(s[i:], "}}")
		if j < 0 {
			return "", fmt.Errorf("%q: {{ without }}", s)
		}
		b.WriteString(s[:i])
		inner := s[i+2 : i+j]
		if strings.HasPrefix(inner, "use ") {
			return "", fmt.Errorf("{{%s}}: a fragment must be a whole string", inner)
		}
		text, _, err := r.expand(inner)
		if err != nil {
			return "", err
		}
		b.WriteString(text)
		s = s[i+j+2:]
	}
}

// whole reports whether s is exactly one placeholder, and its inside.
func whole(s string) (string, bool) {
	inner, ok := strings.CutPrefix(s, "{{")
	if !ok {
		return "", false
	}
	inner, ok = strings.CutSuffix(inner, "}}")
	if !ok || strings.Contains(inner, "{{") || strings.Contains(inner, "}}") {
		return "", false
	}
	return inner, true
}

// expand returns the value of one placeholder (its inside, without the
// braces) and whether it is a number. The first use of a placeholder
// generates its value; the later ones repeat it.
func (r *renderer) expand(inner string) (string, bool, error) {
	key := strings.Join(strings.Fields(inner), " ")
	if rest, ok := strings.CutPrefix(key, "int "); ok {
		// int is digits as a JSON number: one value, two types, so that
		// "id": "{{digits 7 #order}}" and "order_id": "{{int 7 #order}}"
		// name one order.
		key = "digits " + rest
	}
	spec, _, _ := strings.Cut(key, "#")
	fields := strings.Fields(spec)
	if len(fields) == 0 {
		return "", false, fmt.Errorf("{{%s}}: no generator", inner)
	}
	number := numberGenerator(strings.Fields(inner)[0])
	v, ok := r.vars[key]
	if !ok {
		var err error
		if v, err = r.generate(fields[0], fields[1:]); err != nil {
			return "", false, fmt.Errorf("{{%s}}: %w", inner, err)
		}
		r.vars[key] = v
	}
	if number && len(v) > maxNumberDigits {
		return "", false, fmt.Errorf("{{%s}}: a number of more than %d digits, which readers that use doubles do not keep exact", inner, maxNumberDigits)
	}
	return v, number, nil
}

// numberGenerator reports whether gen makes a JSON number when it is a
// whole string.
func numberGenerator(gen string) bool {
	base, _, _ := cutOffset(gen)
	return base == "int" || base == "unix" || base == "unixms"
}

// The alphabets of the random generators.
const (
	alnumChars = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	lowerChars = "0123456789abcdefghijklmnopqrstuvwxyz"
	upperChars = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	digitChars = "0123456789"
	// crockford is the lower-case Crockford base 32 of ULIDs (Paddle's ids).
	crockford = "0123456789abcdefghjkmnpqrstvwxyz"
)

// maxNumberDigits bounds the digits of an int: JavaScript's and other
// double-based readers keep 15 significant digits exact, and the ids of
// the providers (Shopify's 14, GitHub's 11) stay below.
const maxNumberDigits = 15

// maxLength bounds the length argument of the random generators.
const maxLength = 128

// discordEpoch is the first millisecond of 2015, Discord's snowflake epoch.
const discordEpoch = 1420070400000

// localZone is the fixed zone of time.local: a store that writes its own
// local time with a numeric offset (Shopify, GitLab).
var localZone = time.FixedZone("UTC-5", -5*60*60)

// generate makes the value of generator gen with its arguments.
func (r *renderer) generate(gen string, args []string) (string, error) {
	base, offset, err := cutOffset(gen)
	if err != nil {
		return "", err
	}
	if offset != 0 && !timeBased(base) {
		return "", fmt.Errorf("%s takes no offset", base)
	}
	at := r.now.Add(offset)
	switch base {
	case "event":
		return r.event, noArgs(args)
	case "uuid":
		return newUUID(), noArgs(args)
	case "unix":
		return strconv.FormatInt(at.Unix(), 10), noArgs(args)
	case "unixms":
		return strconv.FormatInt(at.UnixMilli(), 10), noArgs(args)
	case "time":
		return at.UTC().Format("2006-01-02T15:04:05Z"), noArgs(args)
	case "time.ms":
		return at.UTC().Format("2006-01-02T15:04:05.000Z"), noArgs(args)
	case "time.us":
		return at.UTC().Format("2006-01-02T15:04:05.000000Z"), noArgs(args)
	case "time.local":
		return at.In(localZone).Format("2006-01-02T15:04:05-07:00"), noArgs(args)
	case "ulid":
		return newULID(at), noArgs(args)
	case "snowflake":
		ms := uint64(at.UnixMilli() - discordEpoch)
		return strconv.FormatUint(ms<<22|randUint64()&(1<<22-1), 10), noArgs(args)
	case "hex", "alnum", "lower", "upper", "digits", "int":
		n, err := lengthArg(args)
		if err != nil {
			return "", err
		}
		switch base {
		case "hex":
			b := make([]byte, (n+1)/2)
			rand.Read(b)
			return hex.EncodeToString(b)[:n], nil
		case "alnum":
			return randomString(alnumChars, n), nil
		case "lower":
			return randomString(lowerChars, n), nil
		case "upper":
			return randomString(upperChars, n), nil
		}
		// digits (and int, its twin): no leading zero, as an id has none.
		return randomString("123456789", 1) + randomString(digitChars, n-1), nil
	}
	return "", fmt.Errorf("unknown generator %q", base)
}

// timeBased reports whether generator base makes its value of a time, so
// that it takes an offset: the timestamps, and the ids that begin with
// their creation time (ULIDs, snowflakes).
func timeBased(base string) bool {
	return strings.HasPrefix(base, "unix") || strings.HasPrefix(base, "time") || base == "ulid" || base == "snowflake"
}

// cutOffset splits "unix+30d" into "unix" and 30 days. Units: s, m, h, d.
func cutOffset(gen string) (string, time.Duration, error) {
	i := strings.IndexAny(gen, "+-")
	if i < 0 {
		return gen, 0, nil
	}
	base, off := gen[:i], gen[i+1:]
	if len(off) < 2 {
		return "", 0, fmt.Errorf("offset %q: write a number and a unit (s, m, h, d)", gen[i:])
	}
	n, err := strconv.Atoi(off[:len(off)-1])
	if err != nil || n < 0 {
		return "", 0, fmt.Errorf("offset %q: write a number and a unit (s, m, h, d)", gen[i:])
	}
	var unit time.Duration
	switch off[len(off)-1] {
	case 's':
		unit = time.Second
	case 'm':
		unit = time.Minute
	case 'h':
		unit = time.Hour
	case 'd':
		unit = 24 * time.Hour
	default:
		return "", 0, fmt.Errorf("offset %q: the unit is one of s, m, h, d", gen[i:])
	}
	d := time.Duration(n) * unit
	if gen[i] == '-' {
		d = -d
	}
	return base, d, nil
}

func noArgs(args []string) error {
	if len(args) > 0 {
		return errors.New("takes no argument")
	}
	return nil
}

func lengthArg(args []string) (int, error) {
	if len(args) != 1 {
		return 0, errors.New("takes one argument, a length")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 1 || n > maxLength {
		return 0, fmt.Errorf("length %q: want 1 to %d", args[0], maxLength)
	}
	return n, nil
}

// randomString returns n characters of chars, uniformly.
func randomString(chars string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = chars[randIntn(len(chars))]
	}
	return string(b)
}

// randIntn is a uniform random number in [0, n), n small.
func randIntn(n int) int {
	limit := ^uint64(0) - ^uint64(0)%uint64(n)
	for {
		if v := randUint64(); v < limit {
			return int(v % uint64(n))
		}
	}
}

func randUint64() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

// newUUID is a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// newULID is a ULID of t in lower-case Crockford base 32: 10 characters
// of milliseconds, then 16 random ones (80 bits).
func newULID(t time.Time) string {
	var b [26]byte
	ms := uint64(t.UnixMilli())
	for i := 9; i >= 0; i-- {
		b[i] = crockford[ms&31]
		ms >>= 5
	}
	for i := 10; i < 26; i++ {
		b[i] = crockford[randIntn(32)]
	}
	return string(b[:])
}
