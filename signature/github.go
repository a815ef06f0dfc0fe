package signature

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
)

// GitHub signs the raw body with HMAC-SHA256 keyed with the secret's bytes.
// The legacy SHA-1 X-Hub-Signature header is deliberately not accepted.
const (
	headerGitHubSignature = "X-Hub-Signature-256"
	headerGitHubDelivery  = "X-Github-Delivery" // canonical form: Get does not allocate
	headerGitHubEvent     = "X-Github-Event"
	githubPrefix          = "sha256="
)

func init() {
	register(&scheme{
		Scheme: Scheme{Name: SchemeGitHub, Keys: KeySecrets, Forward: []string{"X-GitHub-Event",
			"X-GitHub-Delivery", "X-GitHub-Hook-ID", "X-GitHub-Hook-Installation-Target-ID", "X-GitHub-Hook-Installation-Target-Type"}},
		build:  func(_ Config, b base) (Verifier, error) { return &githubVerifier{b}, nil },
		sign:   signGitHub,
		id:     []source{header(headerGitHubDelivery)},
		typ:    []source{header(headerGitHubEvent)},
		sender: Sender{ID: SenderIDUUID},
	})
}

var (
	githubErrors  = newHeaderErrors(SchemeGitHub, headerGitHubSignature)
	githubNoMatch = fmt.Errorf("%s: %w", SchemeGitHub, ErrNoMatch)
)

// githubVerifier verifies X-Hub-Signature-256: sha256=<hex>.
type githubVerifier struct{ base }

// Verify implements Verifier.
func (v *githubVerifier) Verify(req Request) (Result, error) {
	h, body := req.Header, req.Body
	value, err := githubErrors.get(h, headerGitHubSignature)
	if err != nil {
		return Result{}, err
	}
	var sigs sigSet
	if err := parseGitHub(value, &sigs); err != nil {
		return Result{}, err
	}
	index, ok := v.find(&sigs, body)
	if !ok {
		return Result{}, githubNoMatch
	}
	return v.meta.result(index, h, body, ""), nil
}

// parseGitHub decodes "sha256=<hex>" into sigs.
func parseGitHub(value string, sigs *sigSet) error {
	sigs.size = sha256.Size
	hexMAC, ok := strings.CutPrefix(value, githubPrefix)
	if !ok || !decodeHex(sigs.slot(), hexMAC) {
		return githubErrors.malformed
	}
	sigs.commit()
	return nil
}

func signGitHub(secret string, body []byte, opts SignOptions) (http.Header, error) {
	h := http.Header{}
	h.Set(headerGitHubSignature, githubPrefix+hexMAC(sha256.New, []byte(secret), body))
	setNonEmpty(h, headerGitHubDelivery, opts.ID)
	setNonEmpty(h, headerGitHubEvent, opts.EventType)
	return h, nil
}

var _ Verifier = (*githubVerifier)(nil)
