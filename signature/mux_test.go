package signature

import (
	"testing"
	"time"
)

// Mux: HMAC-SHA256 of "<t>.<body>", t=<unix>,v1=<hex> in Mux-Signature
// (https://www.mux.com/docs/core/verify-webhook-signatures); computed with
//
//	printf '%s' "1700000000.$body" | openssl dgst -sha256 -hmac mux_secret_123 -hex
const (
	muxSecret = "mux_secret_123"
	muxBody   = `{"type":"video.asset.ready","id":"3a56ac3d-33da-4366-855b-f592d898409d","data":{}}`
	muxSig    = "0d4f24a99cdd4b277cf2c8248219633653c65071b521bd8384ff09a0e13b8a8a"
)

func TestMuxPreset(t *testing.T) {
	for _, tc := range []presetVector{
		{
			name:   "mux/openssl vector",
			cfg:    Config{Scheme: "mux", Secrets: []string{muxSecret}, Now: clockAt(t, vectorTS)},
			header: hdr("Mux-Signature", "t="+vectorTS+",v1="+muxSig),
			body:   muxBody,
			want:   Result{DeliveryID: "3a56ac3d-33da-4366-855b-f592d898409d", EventType: "video.asset.ready"},
			stale:  6 * time.Minute,
		},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPreset(t, tc) })
	}
}
