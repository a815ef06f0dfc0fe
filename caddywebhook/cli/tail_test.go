package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
)

// TestTailLineAsDocumented: the sample of `caddy webhook tail` in
// docs/ADMIN.md is what the formatter prints for those lines, spacing
// included.
func TestTailLineAsDocumented(t *testing.T) {
	t.Parallel()
	at := func(s string) time.Time {
		v, err := time.ParseInLocation("15:04:05.000", s, time.Local)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	lines := []adminapi.TailLine{
		{Time: at("12:00:01.203"), Kind: adminapi.TailReceived, Source: "github", Outcome: "accepted", Status: 202, DeliveryID: "72d3…", EventType: "push"},
		{Time: at("12:00:01.251"), Kind: adminapi.TailDelivery, Source: "github", Target: "http", Outcome: "delivered", JobID: 1532, Attempt: 1, DurationMS: 41, DeliveryID: "72d3…"},
		{Time: at("12:00:07.880"), Kind: adminapi.TailDelivery, Source: "github", Target: "exec", Outcome: "retry", JobID: 1533, Attempt: 2, DurationMS: 2003, DeliveryID: "72d3…", Error: "exit status 3: …"},
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "ADMIN.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sample, ok := strings.Cut(string(doc), "$ caddy webhook tail --source github\n")
	if !ok {
		t.Fatal("docs/ADMIN.md has no sample of `caddy webhook tail --source github`")
	}
	shown := strings.Split(sample, "\n")[1:] // after the "following …" line
	for i, l := range lines {
		if got := formatTailLine(l); got != shown[i] {
			t.Errorf("docs/ADMIN.md shows\n%q\nthe formatter prints\n%q", shown[i], got)
		}
	}
}
