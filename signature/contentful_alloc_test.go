package signature

import "testing"

// TestContentfulAllocations holds a warm contentful Verify to its budget:
// the signed-headers list is parsed into an array on the stack, the header
// keys are canonicalized in a stack buffer and the signed content is
// gathered in the pooled MAC state, so nothing is allocated when the
// delivery id is a header; the body-hash id is one string more.
func TestContentfulAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items at random")
	}
	cfg := Config{Scheme: "contentful", Secrets: []string{contentfulSecret}, Now: clockAt(t, "1700000000")}
	for _, tc := range []struct {
		name string
		req  Request
		max  float64
	}{
		{"idempotency key", post(contentfulQueryURL, contentfulHeader("X-Contentful-Signature", contentfulQuerySig, "X-Contentful-Idempotency-Key", "4f1c2d"), contentfulBody), 0},
		{"body hash", post(contentfulURL, contentfulHeader(), contentfulBody), 1},
	} {
		v := setup(t, cfg)
		got := testing.AllocsPerRun(100, func() {
			if _, err := v.Verify(tc.req); err != nil {
				t.Fatal(err)
			}
		})
		t.Logf("%s: %.0f allocations", tc.name, got)
		if got > tc.max {
			t.Errorf("%s: %.0f allocations, budget %.0f", tc.name, got, tc.max)
		}
	}
}
