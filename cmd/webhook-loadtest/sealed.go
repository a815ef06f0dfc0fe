package main

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

// sealedPhases are the results the sealed phase fills, beside the plain
// phases they are set against.
var sealedPhases = [][2]string{{"ingest-sealed", "ingest"}, {"e2e-sealed", "e2e"}}

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

// sealedFigures sets the sealed phase's rates, and Caddy's CPU per event,
// beside the plain phases': encryption is expected to cost a few per cent.
func (rep *report) sealedFigures() []figure {
	var out []figure
	for _, p := range sealedPhases {
		name := "encryption: " + p[1] + ", sealed / plain"
		s, plain := rep.ran(p[0]), rep.ran(p[1])
		if s == nil || plain == nil {
			missing := p[0]
			if s != nil {
				missing = p[1]
			}
			out = append(out, figure{name: name, target: "≥ 0.95", missing: missing + " not run"})
			continue
		}
		sr, pr := s.rate, plain.rate
		if p[1] == "e2e" {
			sr, pr = s.deliveredRate, plain.deliveredRate
		}
		ratio := 0.0
		if pr > 0 {
			ratio = sr / pr
		}
		out = append(out, figure{name: name, value: fmt.Sprintf("%.0f/s", sr), ref: fmt.Sprintf("%.0f/s", pr),
			ratio: ratio, target: "≥ 0.95", ok: ratio >= 0.95, hasCheck: true})
		if sc, pc := s.cpuPerEvent(), plain.cpuPerEvent(); sc > 0 && pc > 0 {
			out = append(out, figure{name: "  … Caddy's CPU per event, sealed / plain", value: fmt.Sprintf("%.0f µs", sc),
				ref: fmt.Sprintf("%.0f µs", pc), ratio: sc / pc, target: "—"})
		}
	}
	return out
}

// cpuPerEvent is Caddy's CPU time per accepted event in the windows, in
// microseconds; 0 when it was not measured.
func (pr *phaseResult) cpuPerEvent() float64 {
	if pr.rate <= 0 || pr.cores <= 0 {
		return 0
	}
	return pr.cores / pr.rate * 1e6
}
