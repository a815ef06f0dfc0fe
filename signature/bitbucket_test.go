package signature

import (
	"testing"
)

// Bitbucket: HMAC-SHA256 of the body, hex after sha256= in X-Hub-Signature
// (https://support.atlassian.com/bitbucket-cloud/docs/manage-webhooks/);
// computed with
//
//	printf '%s' "$body" | openssl dgst -sha256 -hmac bb-secret-123 -hex
const (
	bitbucketSecret = "bb-secret-123"
	bitbucketBody   = `{"push":{"changes":[]},"repository":{"full_name":"team/repo"}}`
	bitbucketSig    = "a4b07b7bbe0d8b2c3b92e161b3cc0083724099f259d53498279d44eceb6fb5e4"
)

func TestBitbucketPreset(t *testing.T) {
	for _, tc := range []presetVector{
		{
			name:   "bitbucket/openssl vector",
			cfg:    Config{Scheme: "bitbucket", Secrets: []string{"old", bitbucketSecret}},
			header: hdr("X-Hub-Signature", "sha256="+bitbucketSig, "X-Request-UUID", "r-1", "X-Event-Key", "repo:push"),
			body:   bitbucketBody,
			want:   Result{SecretIndex: 1, DeliveryID: "r-1", EventType: "repo:push"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPreset(t, tc) })
	}
}
