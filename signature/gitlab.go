package signature

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
)

// GitLab sends the shared secret itself in X-Gitlab-Token; there is no MAC.
const (
	headerGitLabToken = "X-Gitlab-Token"
	headerGitLabUUID  = "X-Gitlab-Event-Uuid" // canonical form: Get does not allocate
	headerGitLabEvent = "X-Gitlab-Event"
)

func init() {
	register(&scheme{
		Scheme: Scheme{Name: SchemeGitLab, Keys: KeySecrets, Forward: []string{"X-Gitlab-Event"}},
		build:  func(cfg Config, b base) (Verifier, error) { return newGitLab(b, cfg.Secrets), nil },
		sign:   signGitLab,
		id:     []source{header(headerGitLabUUID)},
		typ:    []source{header(headerGitLabEvent)},
	})
}

var (
	gitlabErrors  = newHeaderErrors(SchemeGitLab, headerGitLabToken)
	gitlabNoMatch = fmt.Errorf("%s: %w", SchemeGitLab, ErrNoMatch)
)

// gitlabVerifier compares X-Gitlab-Token with each secret. It compares
// SHA-256 digests in constant time, so neither the secret's bytes nor its
// length show in the timing.
type gitlabVerifier struct {
	base
	digests [][sha256.Size]byte // of each secret
	hasher  macKey              // pooled plain SHA-256 states, not keyed
}

func newGitLab(b base, secrets []string) *gitlabVerifier {
	v := &gitlabVerifier{base: b, digests: make([][sha256.Size]byte, len(secrets))}
	for i, s := range secrets {
		v.digests[i] = sha256.Sum256([]byte(s))
	}
	v.hasher.pool.New = func() any { return &macState{h: sha256.New()} }
	return v
}

// Verify implements Verifier.
func (v *gitlabVerifier) Verify(req Request) (Result, error) {
	h, body := req.Header, req.Body
	token, err := gitlabErrors.get(h, headerGitLabToken)
	if err != nil {
		return Result{}, err
	}
	// The token goes in as the head: mac copies it into the state's
	// scratch buffer, since converting it to []byte would allocate.
	st, sum := v.hasher.mac(nil, token)
	index := -1
	for i := range v.digests {
		if subtle.ConstantTimeCompare(sum, v.digests[i][:]) == 1 && index < 0 {
			index = i
		}
	}
	v.hasher.put(st)
	if index < 0 {
		return Result{}, gitlabNoMatch
	}
	return v.meta.result(index, h, body, ""), nil
}

func signGitLab(secret string, _ []byte, opts SignOptions) (http.Header, error) {
	h := http.Header{}
	h.Set(headerGitLabToken, secret)
	setNonEmpty(h, headerGitLabUUID, opts.ID)
	setNonEmpty(h, headerGitLabEvent, opts.EventType)
	return h, nil
}

var _ Verifier = (*gitlabVerifier)(nil)
