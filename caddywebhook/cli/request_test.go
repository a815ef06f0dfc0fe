package cli

import (
	"strings"
	"testing"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
)

func TestPrintRequestBinarySize(t *testing.T) {
	for _, tc := range []struct {
		name, b64, want string
	}{
		{name: "one byte, two padding", b64: "/w==", want: "(1 byte, not UTF-8, as base64)"},
		{name: "two bytes, one padding", b64: "//8=", want: "(2 bytes, not UTF-8, as base64)"},
		{name: "three bytes, no padding", b64: "////", want: "(3 bytes, not UTF-8, as base64)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w strings.Builder
			printRequest(&w, &adminapi.RulesTestOutput{Method: "POST", BodyBase64: tc.b64})
			if !strings.Contains(w.String(), tc.want) {
				t.Errorf("got %q, want it to hold %q", w.String(), tc.want)
			}
		})
	}
}
