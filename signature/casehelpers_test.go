package signature

import (
	"errors"
	"net/http"
	"testing"
)

// verifyCase is one request a provider's verifier accepts with want, or
// refuses with an error wrapping err.
type verifyCase struct {
	name string
	cfg  Config
	req  Request
	want Result
	err  error
}

// runVerifyCases runs each case against a fresh verifier of its Config.
func runVerifyCases(t *testing.T, cases []verifyCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := setup(t, tc.cfg)
			got, err := v.Verify(tc.req)
			switch {
			case tc.err != nil && !errors.Is(err, tc.err):
				t.Fatalf("Verify: %v, want %v", err, tc.err)
			case tc.err == nil && err != nil:
				t.Fatalf("Verify: %v", err)
			case tc.err == nil && got != tc.want:
				t.Errorf("Verify = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// flipped returns req with byte i of its body changed.
func flipped(req Request, i int) Request {
	b := append([]byte(nil), req.Body...)
	b[i] ^= 0x01
	req.Body = b
	return req
}

// post is a POST of body with h to url.
func post(url string, h http.Header, body string) Request {
	return Request{Method: http.MethodPost, URL: url, Header: h, Body: []byte(body)}
}

// signedRequest signs body for scheme with key and opts.
func signedRequest(t *testing.T, scheme, key, body string, opts SignOptions) Request {
	t.Helper()
	h, err := Sign(scheme, key, []byte(body), opts)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	return post(opts.URL, h, body)
}
