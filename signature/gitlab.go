package signature

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"hash"
	"net/http"
	"sync"
)

// GitLab sends the shared secret itself in X-Gitlab-Token; there is no MAC.
const (
	headerGitLabToken = "X-Gitlab-Token"
	headerGitLabUUID  = "X-Gitlab-Event-Uuid" // canonical form: Get does not allocate
	headerGitLabEvent = "X-Gitlab-Event"
)

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
	hashes  sync.Pool           // of *macState keyed with nothing: plain SHA-256
}

func newGitLab(b base, secrets []string) *gitlabVerifier {
	v := &gitlabVerifier{base: b, digests: make([][sha256.Size]byte, len(secrets))}
	for i, s := range secrets {
		v.digests[i] = sha256.Sum256([]byte(s))
	}
	v.hashes.New = func() any { return &macState{h: sha256.New()} }
	return v
}

// Verify implements Verifier.
func (v *gitlabVerifier) Verify(h http.Header, body []byte) (Result, error) {
	token, err := gitlabErrors.get(h, headerGitLabToken)
	if err != nil {
		return Result{}, err
	}
	st := v.hashes.Get().(*macState)
	sum := digestString(st.h, &st.scratch, st.sum[:0], token)
	index := -1
	for i := range v.digests {
		if subtle.ConstantTimeCompare(sum, v.digests[i][:]) == 1 && index < 0 {
			index = i
		}
	}
	if cap(st.scratch) > 1<<10 {
		st.scratch = nil
	}
	v.hashes.Put(st)
	if index < 0 {
		return Result{}, gitlabNoMatch
	}
	return v.meta.result(index, h, body, ""), nil
}

// digestString hashes s through a reusable scratch buffer, because
// converting a long string to []byte for Write would allocate.
func digestString(h hash.Hash, scratch *[]byte, dst []byte, s string) []byte {
	h.Reset()
	*scratch = append((*scratch)[:0], s...)
	h.Write(*scratch)
	return h.Sum(dst)
}

var _ Verifier = (*gitlabVerifier)(nil)
