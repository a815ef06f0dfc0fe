package signature

import "net/http"

// GitLab sends the shared secret itself in X-Gitlab-Token; there is no MAC.
const (
	headerGitLabToken = "X-Gitlab-Token"
	headerGitLabUUID  = "X-Gitlab-Event-Uuid" // canonical form: Get does not allocate
	headerGitLabEvent = "X-Gitlab-Event"
)

func init() {
	register(&scheme{
		Scheme: Scheme{Name: SchemeGitLab, Keys: KeySecrets, Forward: []string{"X-Gitlab-Event",
			"X-Gitlab-Event-UUID", "X-Gitlab-Instance", "X-Gitlab-Webhook-UUID", "Idempotency-Key"}},
		build: func(cfg Config, b base) (Verifier, error) {
			return newTokenVerifier(b, cfg.Secrets, SchemeGitLab, headerGitLabToken), nil
		},
		sign:   signGitLab,
		id:     []source{header(headerGitLabUUID)},
		typ:    []source{header(headerGitLabEvent)},
		sender: Sender{ID: SenderIDUUID},
	})
}

func signGitLab(secret string, _ []byte, opts SignOptions) (http.Header, error) {
	h := http.Header{}
	h.Set(headerGitLabToken, secret)
	setNonEmpty(h, headerGitLabUUID, opts.ID)
	setNonEmpty(h, headerGitLabEvent, opts.EventType)
	return h, nil
}
