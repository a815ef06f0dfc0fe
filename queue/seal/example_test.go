package seal_test

import (
	"errors"
	"fmt"

	"github.com/caddywebhook/caddywebhook/queue/seal"
)

// A ring in the middle of a rotation: 2026-12 seals, 2026-06 still opens
// what it sealed. The associated data names the row and the column.
func Example() {
	// Real keys come from openssl rand -base64 32; these two are
	// examples, never to be used.
	newKey, err := seal.ParseKey("2026-12", "ZEbPbm0Iz0hJ3kG6W7JZ7t3a0vW4eKq1m8yP2sT5uXc=")
	if err != nil {
		fmt.Println(err)
		return
	}
	oldKey, err := seal.ParseKey("2026-06", "q0N7sV3mZ8pL1xR4tY6wB9cE2fH5jK8nM1qS4vX7zA0=")
	if err != nil {
		fmt.Println(err)
		return
	}
	ring, err := seal.NewRing(newKey, oldKey)
	if err != nil {
		fmt.Println(err)
		return
	}

	ad := []byte("event\x00github\x00d-1")
	v := ring.Seal(nil, []byte(`{"email":"ada@example.com"}`), ad)
	id, _ := seal.KeyID(v)
	fmt.Println("sealed under", id)

	body, err := ring.Open(nil, v, ad)
	fmt.Println(string(body), err)

	_, err = ring.Open(nil, v, []byte("event\x00github\x00d-2"))
	fmt.Println(err)

	onlyOld, _ := seal.NewRing(oldKey)
	_, err = onlyOld.Open(nil, v, ad)
	var missing *seal.MissingKeyError
	fmt.Println(errors.As(err, &missing), missing.KeyID)
	// Output:
	// sealed under 2026-12
	// {"email":"ada@example.com"} <nil>
	// open sealed value: authentication failed
	// true 2026-12
}
