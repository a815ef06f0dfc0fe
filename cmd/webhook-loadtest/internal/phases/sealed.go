package phases

// The sealed phase: encryption at rest's cost through Caddy. Each round
// runs ingest and e2e again, each on a fresh queue, with the webhook app's
// encryption block on; the report sets them beside the plain ingest and
// e2e of the same run, whose rounds alternate with theirs:
//
//	go run ./cmd/webhook-loadtest -phases ingest,e2e,sealed -rounds 6 -d 12s

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
)

const (
	sealedPhase = "sealed"
	// sealedKeyEnv holds the run's encryption key, made when the run
	// starts: the configs name it as a placeholder, as docs/CONFIGURATION.md
	// asks, so no config file holds the key.
	sealedKeyEnv = "WEBHOOK_LOADTEST_KEY"
	sealedKeyID  = "loadtest"
)

// SealedPairs are the results the sealed phase fills, each beside the
// plain phase it is set against.
var SealedPairs = [][2]string{{"ingest-sealed", "ingest"}, {"e2e-sealed", "e2e"}}

// sealedEnv is Caddy's environment entry holding a new random key.
func sealedEnv() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return sealedKeyEnv + "=" + base64.StdEncoding.EncodeToString(b[:])
}

// encryptionJSON is the webhook app's encryption block of the phase.
func encryptionJSON() map[string]any {
	return map[string]any{"keys": []any{map[string]any{"id": sealedKeyID, "key": "{env." + sealedKeyEnv + "}"}}}
}

// runSealed runs one round of the sealed phase.
func (r *runner) runSealed(ctx context.Context) error {
	r.sealed = true
	defer func() { r.sealed = false }()
	if err := r.ingest(ctx, "ingest-sealed", fmt.Sprintf("ingest-sealed-%d.db", r.round), 0, nil); err != nil {
		return err
	}
	return r.e2e(ctx, "e2e-sealed", fmt.Sprintf("e2e-sealed-%d.db", r.round))
}
