package adminapi

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestWriteError: every JSON API of the plugin answers an error with the
// same body, the parameter named only when there is one, and an answer
// that no one caches.
func TestWriteError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, msg, param, want string
	}{
		{"about a parameter", "invalid parameter limit: must be a whole number", "limit", `{"error":"invalid parameter limit: must be a whole number","param":"limit"}` + "\n"},
		{"about no parameter", "job 7 not found", "", `{"error":"job 7 not found"}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			WriteError(rec, http.StatusBadRequest, tt.msg, tt.param)
			if rec.Code != http.StatusBadRequest || rec.Body.String() != tt.want {
				t.Errorf("answered %d %q, want 400 %q", rec.Code, rec.Body, tt.want)
			}
			if h := rec.Header(); h.Get("Content-Type") != "application/json" || h.Get("Cache-Control") != "no-store" {
				t.Errorf("headers %v, want JSON, not to be stored", h)
			}
		})
	}
}

// TestWriteJSONEncodesFirst: a value that cannot be encoded writes
// nothing, so its error can still be answered.
func TestWriteJSONEncodesFirst(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	err := WriteJSON(rec, http.StatusOK, func() {})
	var uerr interface{ Error() string }
	if err == nil || !errors.As(err, &uerr) || rec.Body.Len() != 0 || rec.Header().Get("Content-Type") != "" {
		t.Errorf("WriteJSON of a func: %v, wrote %q", err, rec.Body)
	}
}
