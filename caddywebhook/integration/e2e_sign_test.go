package integration

// Signers for the end-to-end tests, written from the providers' documentation
// (see /work/shared/PROVIDERS.md) independently of the signature package, so
// the suite checks the receiver against the senders rather than against its
// own helper. Every secret and every signature they produce is registered as
// a string that must never appear in Caddy's logs.

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// The suite's secrets: distinctive, so the log audit can find any leak.
const (
	githubSecret = "e2e-secret-github-Q7vX2pLm9"
	stripeSecret = "whsec_e2e-secret-stripe-Kd83nBv"
	// standardKey is the raw key of the Standard Webhooks receiver; its
	// secret is "whsec_" followed by the key in base64.
	standardKey = "e2e-secret-standard-Zt41wYe"
	// gitlabSecret is sent as is in X-Gitlab-Token: GitLab signs nothing.
	gitlabSecret = "e2e-secret-gitlab-Hs62qRc"
)

var standardSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte(standardKey))

func init() {
	forbidInLogs(kindSecret, githubSecret, stripeSecret, gitlabSecret, standardKey, standardSecret,
		base64.StdEncoding.EncodeToString([]byte(standardKey)))
}

// bodyMarker is in every payload the suite sends; it must never reach a log.
const bodyMarker = "E2E-BODY-MARKER"

// payload returns a JSON body with the Stripe and Standard Webhooks fields
// the receiver reads (id, type) and the body marker.
func payload(id, eventType string) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"type":%q,"data":{"note":"%s-%s"}}`, id, eventType, bodyMarker, id))
}

func hmacSHA256(key, msg []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return m.Sum(nil)
}

// signGitHub returns GitHub's headers for body: X-Hub-Signature-256 over the
// raw body, the delivery id and the event type.
func signGitHub(secret, deliveryID, event string, body []byte) http.Header {
	sig := "sha256=" + hex.EncodeToString(hmacSHA256([]byte(secret), body))
	forbidInLogs(kindSignature, sig[len("sha256="):])
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-Hub-Signature-256", sig)
	h.Set("X-GitHub-Delivery", deliveryID)
	h.Set("X-GitHub-Event", event)
	return h
}

// signStripe returns Stripe's header for body: t=<unix>,v1=<hex of
// HMAC(secret bytes, "t.body")>, the whsec_ prefix part of the key.
func signStripe(secret string, ts time.Time, body []byte) http.Header {
	t := strconv.FormatInt(ts.Unix(), 10)
	mac := hex.EncodeToString(hmacSHA256([]byte(secret), append([]byte(t+"."), body...)))
	forbidInLogs(kindSignature, mac)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Stripe-Signature", "t="+t+",v1="+mac)
	return h
}

// signStandard returns the Standard Webhooks headers for body: the key is the
// base64 after "whsec_", the signed content "id.timestamp.body".
func signStandard(secret, id string, ts time.Time, body []byte) http.Header {
	key, err := base64.StdEncoding.DecodeString(secret[len("whsec_"):])
	if err != nil {
		panic(err)
	}
	t := strconv.FormatInt(ts.Unix(), 10)
	msg := bytes.Join([][]byte{[]byte(id), []byte(t), body}, []byte("."))
	mac := base64.StdEncoding.EncodeToString(hmacSHA256(key, msg))
	forbidInLogs(kindSignature, mac)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", t)
	h.Set("webhook-signature", "v1,"+mac)
	return h
}

// signGitLab returns GitLab's headers: the shared secret itself, the event
// UUID and the event name.
func signGitLab(secret, uuid, event string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-Gitlab-Token", secret)
	h.Set("X-Gitlab-Event-UUID", uuid)
	h.Set("X-Gitlab-Event", event)
	return h
}
