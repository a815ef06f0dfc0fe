package seal_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/caddywebhook/caddywebhook/queue/seal"
)

// FuzzOpen feeds Open, OpenInPlace, OpenString and KeyID arbitrary bytes,
// starting from genuine sealed values. None may panic, and whatever opens
// must be one of the genuine values, byte for byte, with its own
// plaintext: a value changed in any way never opens.
// fuzzGenuine are values sealed once under ring(f, "k1", "2026-06") with
// ad("event", "github/d-1"), in both forms, and their plaintexts. They
// are constants because the fuzzing engine runs the target in several
// processes and hands each the others' inputs: values sealed at run time
// would open in a process that did not seal them.
var fuzzGenuine = map[string]string{
	"\x01\x02k1\x1c\x97Vy\x96\xf1\xfa\xa5\xa09\xd0[\x17\xe6Kޝ\n\x0eP{\xeb\xcay\x13\x01\fh\xb1\x06\x92\x81=\xc5E\x92\x9e2Gs":                                                        "",
	"\x02\x02k1pZRHnv0cglwbV1uFJqBSAygA+0OEwFmpFx/RyUP6RYcwLlZMfG24pA":                                                                                                             "",
	"\x01\x02k1?\xffR+$\x15S\xd7`\xc7'\xebM/A\xd8S\xa8p\xea\x13Ź\x05\xe3\xfcq\xfd>\x9d9\xd8\xe4\xd1~\xa0\xb3#\x98=\xb9":                                                            "x",
	"\x02\x02k1NEaAOGWyQlCkfftaz+NqudmTu20dFhc7qM8gGUDF6kWPFedb0NIsuNU":                                                                                                            "x",
	"\x01\x02k1K̇5\x1bٗ\x95cF\xb2Z\x1f%\a\x0e\x91\x83'\x8e\x85\xf9\x04)n?\xc0\xdcV\xd9tс6\x82?\xb0\x12\\\x899n\xa5\xf7I\x84\xaf!A\x861\x90{?\x1dT\xb9\x92\xe2)z\xf5<\xeb\xfd\xd5K": `{"email":"ada@example.com"}`,
	"\x02\x02k1XB/UF1LJI79wQ7d2qpAH7VUFo07yrj/p9jDSNw0H6xH7W8rrKdJAG41WfX/NVtKpoK0Ujo3ALpXsOvIZ6AaYkWrRIg":                                                                         `{"email":"ada@example.com"}`,
}

// FuzzOpen feeds Open, OpenInPlace, OpenString and KeyID arbitrary bytes,
// starting from genuine sealed values. None may panic, and whatever opens
// must be one of the genuine values, byte for byte, with its own
// plaintext: a value changed in any way never opens.
func FuzzOpen(f *testing.F) {
	r := ring(f, "k1", "2026-06")
	a := ad("event", "github/d-1")
	for v := range fuzzGenuine {
		f.Add([]byte(v))
	}
	f.Add([]byte(nil))
	f.Add([]byte{seal.FormatBinary, 2, 'k', '1'})
	f.Add([]byte{seal.FormatText, 2, 'k', '1', '='})

	f.Fuzz(func(t *testing.T, v []byte) {
		check := func(form string, got []byte, err error) {
			t.Helper()
			var missing *seal.MissingKeyError
			switch {
			case err == nil:
				want, ok := fuzzGenuine[string(v)]
				if !ok {
					t.Fatalf("%s: a value that is not genuine opened: %x → %q", form, v, got)
				}
				if string(got) != want {
					t.Fatalf("%s: opened as %q, want %q", form, got, want)
				}
			case errors.As(err, &missing):
				if r.Has(missing.KeyID) {
					t.Fatalf("%s: MissingKeyError for %q, which the ring holds", form, missing.KeyID)
				}
			case !errors.Is(err, seal.ErrMalformed) && !errors.Is(err, seal.ErrNotAuthentic):
				t.Fatalf("%s: unexpected error %v", form, err)
			}
		}
		got, err := r.Open(nil, v, a)
		check("Open", got, err)
		got, err = r.OpenInPlace(bytes.Clone(v), a)
		check("OpenInPlace", got, err)
		gs, err := r.OpenString(string(v), a)
		check("OpenString", []byte(gs), err)
		if id, ok := seal.KeyID(v); ok {
			if err := seal.CheckKeyID(id); err != nil {
				t.Fatalf("KeyID returned %q, not a valid id: %v", id, err)
			}
		}
	})
}

// TestFuzzGenuine: the fuzz target's constants open, so that the property
// it checks is not vacuous.
func TestFuzzGenuine(t *testing.T) {
	r := ring(t, "k1", "2026-06")
	a := ad("event", "github/d-1")
	for v, want := range fuzzGenuine {
		var got []byte
		var err error
		if v[0] == seal.FormatText {
			var s string
			s, err = r.OpenString(v, a)
			got = []byte(s)
		} else {
			got, err = r.Open(nil, []byte(v), a)
		}
		if err != nil || string(got) != want {
			t.Errorf("genuine %q opens as %q, %v; want %q", v, got, err, want)
		}
	}
}
