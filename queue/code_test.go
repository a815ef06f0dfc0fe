package queue_test

import (
	"encoding/json"
	"testing"

	"github.com/caddywebhook/caddywebhook/queue"
)

// TestCodeJSON: an attempt's status is a number in JSON, 0 (an exit code)
// kept apart from none, which is left out.
func TestCodeJSON(t *testing.T) {
	tests := []struct {
		name string
		code queue.Code
		json string
	}{
		{"http status", queue.CodeOf(503), `{"attempt":1,"started":"0001-01-01T00:00:00Z","duration_ns":0,"outcome":"dead","status":503}`},
		{"exit 0", queue.CodeOf(0), `{"attempt":1,"started":"0001-01-01T00:00:00Z","duration_ns":0,"outcome":"dead","status":0}`},
		{"none", queue.Code{}, `{"attempt":1,"started":"0001-01-01T00:00:00Z","duration_ns":0,"outcome":"dead"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(queue.Attempt{Attempt: 1, Outcome: queue.StatusDead, Code: tt.code})
			if err != nil || string(b) != tt.json {
				t.Fatalf("Marshal = %s, %v; want %s", b, err, tt.json)
			}
			var a queue.Attempt
			if err := json.Unmarshal(b, &a); err != nil || a.Code != tt.code {
				t.Errorf("Unmarshal: code %v, %v; want %v", a.Code, err, tt.code)
			}
		})
	}
}
