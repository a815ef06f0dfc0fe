package signature

import (
	"testing"
)

// Forgejo: Gitea's MAC under its own names
// (https://forgejo.org/docs/latest/user/webhooks); the vector is Gitea's,
// computed with
//
//	printf '%s' "$body" | openssl dgst -sha256 -hmac gitea-secret -hex
const ()

func TestForgejoPreset(t *testing.T) {
	for _, tc := range []presetVector{
		{
			name:   "forgejo/openssl vector",
			cfg:    Config{Scheme: "forgejo", Secrets: []string{giteaSecret}},
			header: hdr("X-Forgejo-Signature", giteaSig, "X-Forgejo-Delivery", "d-1", "X-Forgejo-Event", "push"),
			body:   giteaBody,
			want:   Result{DeliveryID: "d-1", EventType: "push"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPreset(t, tc) })
	}
}
