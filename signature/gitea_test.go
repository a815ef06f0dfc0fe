package signature

import (
	"errors"
	"testing"
)

// Gitea: HMAC-SHA256 of the JSON body, bare hex in X-Gitea-Signature
// (https://docs.gitea.com/features/webhooks; services/webhook/deliver.go);
// computed with
//
//	printf '%s' "$body" | openssl dgst -sha256 -hmac gitea-secret -hex
const (
	giteaSecret = "gitea-secret"
	giteaBody   = `{"ref":"refs/heads/main","after":"bffeb74224043ba2feb48d137756c8a9331c449a"}`
	giteaSig    = "31dd14ada792d66e1c7143323f815fd25bf64063125820c25e4cc43c846f31b7"
)

func TestGiteaPreset(t *testing.T) {
	for _, tc := range []presetVector{
		{
			name:   "gitea/openssl vector",
			cfg:    Config{Scheme: "gitea", Secrets: []string{giteaSecret}},
			header: hdr("X-Gitea-Signature", giteaSig, "X-Gitea-Delivery", "d-1", "X-Gitea-Event", "push"),
			body:   giteaBody,
			want:   Result{DeliveryID: "d-1", EventType: "push"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPreset(t, tc) })
	}
}

// TestGiteaUnsigned: a hook without a secret sends the signature header
// empty, which is missing, never a match.
func TestGiteaUnsigned(t *testing.T) {
	v := setup(t, Config{Scheme: "gitea", Secrets: []string{giteaSecret}})
	h := hdr("X-Gitea-Delivery", "d-1")
	h["X-Gitea-Signature"] = []string{""}
	if _, err := v.Verify(reqOf(h, []byte(giteaBody))); !errors.Is(err, ErrMissingHeader) {
		t.Errorf("empty signature: err = %v, want ErrMissingHeader", err)
	}
}
