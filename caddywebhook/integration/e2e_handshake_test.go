package integration

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/signature"
)

// Keys of this scenario only: an ed25519 seed and its public key (hex), and
// an ECDSA P-256 key pair (base64 DER), made with openssl.
const (
	e2eEdSeed  = "8ebaec261791ed0f5432d81ad33b130c42c3f528d3951355c361e46c6f7e0771"
	e2eEdPub   = "92c81eb58dba9b996d0e9f0f59e32cf77b20b97f9d5becf52d4ec00b25ce604f"
	e2eP256Pub = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEygqjzJfr5jNuHxhT9FY/PJkbGaoxyOqRTfde1Hv4jznnBrR9//Zj4TE82032HwYfRM/+czGE05CJiIDx7hcVLQ=="
	e2eP256Key = "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgrBhsDjZiJyOfTK8wnEC/O0TY9v/mVUdfrbEUKpsDjBChRANCAATKCqPMl+vmM24fGFP0Vj88mRsZqjHI6pFN917Ue/iPOecGtH3/9mPhMTzbTfYfBh9Ez/5zMYTTkImIgPHuFxUt"

	e2eSecret      = "e2e-handshake-secret-0123456789"
	e2eVerifyToken = "e2e-meta-verify-token"
	e2eIssued      = "e2e0asana0issued0secret0abcdef"
	e2eNotionToken = "secret_e2e0notion0verification0token"
)

// testEnginePathsAndHandshakes sends one event per engine path (template
// HMAC, URL-signed, ed25519, ECDSA) and every handshake through a real
// Caddy: events are stored and delivered, handshakes answered as each
// sender expects and never stored, forgeries refused.
func testEnginePathsAndHandshakes(t *testing.T) {
	t.Parallel()
	forbidInLogs(kindSecret, e2eSecret, e2eVerifyToken, e2eIssued, e2eNotionToken)
	up := newUpstream(t, always(http.StatusOK))
	c := newCaddy(t)
	issuedFile := filepath.Join(c.dir, "asana.secret")
	notionFile := filepath.Join(c.dir, "notion.secret")
	block := func(source, scheme string, lines ...string) string {
		return "\twebhook_receiver /hooks/" + source + " {\n\t\tsource " + source + "\n\t\tscheme " + scheme + "\n\t\t" +
			strings.Join(lines, "\n\t\t") + "\n\t\tto http " + up.URL("/"+source) + "\n\t}\n"
	}
	secret := "secret " + e2eSecret
	c.start(t, caddyConfig{Site: block("twitch", "twitch", secret) +
		block("byurl", "hmac", secret, "signature_header X-Sig", `signed_content "{url}{body}"`) +
		block("discord", "discord", "public_key "+e2eEdPub) +
		block("sendgrid", "sendgrid", "public_key "+e2eP256Pub) +
		block("slack", "slack", secret) +
		block("zoom", "zoom", secret) +
		block("meta", "meta", secret, "verify_token "+e2eVerifyToken) +
		block("dropbox", "dropbox", secret) +
		block("x", "x", secret) +
		block("okta", "okta", secret) +
		block("asana", "asana", "issued_secret_file "+issuedFile) +
		block("woocommerce", "woocommerce", secret) +
		block("msgraph", "msgraph", secret) +
		block("notion", "notion", "issued_secret_file "+notionFile)})

	sign := func(scheme, key string, body string, opts signature.SignOptions) http.Header {
		t.Helper()
		if opts.Timestamp.IsZero() {
			opts.Timestamp = time.Now()
		}
		h, err := signature.Sign(scheme, key, []byte(body), opts)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	type answer struct {
		status int
		typ    string
		body   string
		header http.Header
	}
	send := func(method, path string, h http.Header, body string) answer {
		t.Helper()
		req, err := http.NewRequest(method, c.URL(path), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if h != nil {
			req.Header = h
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, resp.Header.Get("Content-Type"), string(b), resp.Header}
	}

	// A Discord webhook event as Discord sends it: the version/event
	// envelope, typed by event.type, with no id of its own, to be answered
	// 204 (https://discord.com/developers/docs/events/webhook-events). The
	// receiver knows it by its body hash, and so does the upstream.
	discordEntitlement := `{"version":1,"application_id":"1234560123453231555","type":1,"event":{"type":"ENTITLEMENT_CREATE","timestamp":"2024-10-18T18:41:21.109604","data":{"id":"1296925200000000000","sku_id":"1296920000000000000","type":8}}}`
	bodyHash := func(body string) string { return fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(body))) }
	events := []struct {
		name, source, body string
		header             http.Header
		key                string // the id the upstream knows it by
		status             int    // the receiver's answer; 0: 202
	}{
		{"template HMAC", "twitch", `{"id":"ev-twitch"}`, sign("twitch", e2eSecret, `{"id":"ev-twitch"}`, signature.SignOptions{ID: "tw-1", EventType: "channel.follow"}), "ev-twitch", 0},
		{"URL-signed", "byurl", `{"id":"ev-byurl"}`, sign("hmac", e2eSecret, `{"id":"ev-byurl"}`, signature.SignOptions{SignatureHeader: "X-Sig", SignedContent: "{url}{body}", URL: c.URL("/hooks/byurl")}), "ev-byurl", 0},
		{"ed25519", "discord", `{"type":2,"id":"ev-discord"}`, sign("discord", e2eEdSeed, `{"type":2,"id":"ev-discord"}`, signature.SignOptions{}), "ev-discord", http.StatusNoContent},
		{"discord webhook event", "discord", discordEntitlement, sign("discord", e2eEdSeed, discordEntitlement, signature.SignOptions{}), bodyHash(discordEntitlement), http.StatusNoContent},
		// A SendGrid batch is an array with no id: the receiver knows it by
		// its body hash, and so does the upstream.
		{"ECDSA", "sendgrid", `[{"event":"delivered"}]`, sign("sendgrid", e2eP256Key, `[{"event":"delivered"}]`, signature.SignOptions{}), bodyHash(`[{"event":"delivered"}]`), 0},
	}
	for _, ev := range events {
		t.Run("event/"+ev.name, func(t *testing.T) {
			want := cmp.Or(ev.status, http.StatusAccepted)
			if a := send(http.MethodPost, "/hooks/"+ev.source, ev.header, ev.body); a.status != want || a.body != "" {
				t.Fatalf("got %d %q, want %d\n%s", a.status, a.body, want, c.logTail())
			}
			ds := up.waitAnswered(t, ev.key, http.StatusOK, 1)
			if !slices.ContainsFunc(ds, func(d delivery) bool { return bytes.Equal(d.Body, []byte(ev.body)) }) {
				t.Errorf("upstream got %s, want %q", summarize(ds), ev.body)
			}
		})
	}

	slackChallenge := `{"type":"url_verification","challenge":"slack-c-1"}`
	twitchChallenge := `{"challenge":"twitch-c-1","subscription":{"type":"channel.follow"}}`
	twitchHeader := sign("twitch", e2eSecret, twitchChallenge, signature.SignOptions{ID: "tw-h-1",
		Header: http.Header{"Twitch-Eventsub-Message-Type": {"webhook_callback_verification"}}})
	zoomValidation := `{"event":"endpoint.url_validation","payload":{"plainToken":"zoomPlain1"}}`
	mac := func(msg string) []byte {
		h, _ := signature.Sign("hmac", e2eSecret, []byte(msg), signature.SignOptions{SignatureHeader: "X-M"})
		b, _ := hex.DecodeString(h.Get("X-M"))
		return b
	}
	okta := http.Header{"Authorization": {e2eSecret}, "X-Okta-Verification-Challenge": {"okta-c-1"}}
	const discordEventPing = `{"version":1,"application_id":"1234560123453231555","type":0}`
	handshakes := []struct {
		name, method, path string
		header             http.Header
		body               string
		want               answer
	}{
		{"slack url_verification", "POST", "/hooks/slack", sign("slack", e2eSecret, slackChallenge, signature.SignOptions{}), slackChallenge,
			answer{200, "text/plain; charset=utf-8", "slack-c-1", http.Header{"X-Content-Type-Options": {"nosniff"}}}},
		{"slack forged", "POST", "/hooks/slack", sign("slack", "wrong", slackChallenge, signature.SignOptions{}), slackChallenge, answer{401, "", "", nil}},
		{"twitch verification", "POST", "/hooks/twitch", twitchHeader, twitchChallenge, answer{200, "text/plain", "twitch-c-1", nil}},
		{"zoom url_validation", "POST", "/hooks/zoom", sign("zoom", e2eSecret, zoomValidation, signature.SignOptions{}), zoomValidation,
			answer{200, "application/json", `{"encryptedToken":"` + hex.EncodeToString(mac("zoomPlain1")) + `","plainToken":"zoomPlain1"}`, nil}},
		{"discord PING", "POST", "/hooks/discord", sign("discord", e2eEdSeed, `{"type":1}`, signature.SignOptions{}), `{"type":1}`,
			answer{200, "application/json", `{"type":1}`, http.Header{"X-Content-Type-Options": {"nosniff"}}}},
		{"discord webhook-event PING", "POST", "/hooks/discord", sign("discord", e2eEdSeed, discordEventPing, signature.SignOptions{}), discordEventPing,
			answer{204, "application/json", "", nil}},
		{"discord webhook-event PING forged", "POST", "/hooks/discord", sign("discord", e2eEdSeed, discordEventPing, signature.SignOptions{}), strings.Replace(discordEventPing, "1234", "1235", 1),
			answer{401, "", "", nil}},
		{"meta GET", "GET", "/hooks/meta?hub.mode=subscribe&hub.challenge=42&hub.verify_token=" + e2eVerifyToken, nil, "",
			answer{200, "text/plain; charset=utf-8", "42", http.Header{"X-Content-Type-Options": {"nosniff"}}}},
		{"meta GET forged", "GET", "/hooks/meta?hub.mode=subscribe&hub.challenge=42&hub.verify_token=guess", nil, "", answer{401, "", "", nil}},
		{"dropbox GET", "GET", "/hooks/dropbox?challenge=db-c-1", nil, "",
			answer{200, "text/plain; charset=utf-8", "db-c-1", http.Header{"X-Content-Type-Options": {"nosniff"}}}},
		{"x CRC", "GET", "/hooks/x?crc_token=x-c-1", nil, "",
			answer{200, "application/json", `{"response_token":"sha256=` + base64.StdEncoding.EncodeToString(mac("x-c-1")) + `"}`, nil}},
		{"okta verification", "GET", "/hooks/okta", okta, "", answer{200, "application/json", `{"verification":"okta-c-1"}`, nil}},
		{"asana X-Hook-Secret", "POST", "/hooks/asana", http.Header{"X-Hook-Secret": {e2eIssued}}, "",
			answer{200, "", "", http.Header{"X-Hook-Secret": {e2eIssued}}}},
		{"woocommerce ping", "POST", "/hooks/woocommerce", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, "webhook_id=7",
			answer{200, "", "", nil}},
		{"msgraph validationToken", "POST", "/hooks/msgraph?validationToken=Validation%3A%20e2e%20reachability", http.Header{"Content-Type": {"text/plain"}}, "",
			answer{200, "text/plain; charset=utf-8", "Validation: e2e reachability", http.Header{"X-Content-Type-Options": {"nosniff"}}}},
		{"msgraph forged clientState", "POST", "/hooks/msgraph", http.Header{"Content-Type": {"application/json"}}, `{"value":[{"clientState":"guess","changeType":"created"}]}`,
			answer{401, "", "", nil}},
		{"notion verification_token", "POST", "/hooks/notion", http.Header{"Content-Type": {"application/json"}}, `{"verification_token":"` + e2eNotionToken + `"}`,
			answer{200, "", "", nil}},
		{"GET without a GET handshake", "GET", "/hooks/slack?challenge=1", nil, "", answer{405, "", "", nil}},
	}
	for _, hs := range handshakes {
		t.Run("handshake/"+hs.name, func(t *testing.T) {
			got := send(hs.method, hs.path, hs.header, hs.body)
			if got.status != hs.want.status || got.typ != hs.want.typ || got.body != hs.want.body {
				t.Errorf("got %d %q %q, want %d %q %q\n%s", got.status, got.typ, got.body, hs.want.status, hs.want.typ, hs.want.body, c.logTail())
			}
			for k, v := range hs.want.header {
				if got.header.Get(k) != v[0] {
					t.Errorf("header %s = %q, want %q", k, got.header.Get(k), v[0])
				}
			}
			// Every answer that echoes something says nosniff.
			if got.body != "" && got.header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("answer %q without X-Content-Type-Options: nosniff", got.body)
			}
		})
	}
	if b, err := os.ReadFile(issuedFile); err != nil || strings.TrimSpace(string(b)) != e2eIssued {
		t.Errorf("asana issued secret file: %q, %v", b, err)
	}
	if b, err := os.ReadFile(notionFile); err != nil || strings.TrimSpace(string(b)) != e2eNotionToken {
		t.Errorf("notion token file: %q, %v", b, err)
	}
	t.Run("msgraph genuine notification, clientState kept from everyone", func(t *testing.T) {
		testGraphNotification(t, c, up)
	})

	// Only the events are stored; no handshake is.
	if n := c.eventCount(t, ""); n != len(events)+1 {
		t.Errorf("database holds %d events, want %d", n, len(events)+1)
	}
}

// graphNotification is the change notification of Graph's delivery docs
// (https://learn.microsoft.com/en-us/graph/change-notifications-delivery-webhooks),
// the clientState in each notification of value, nothing in a header.
const graphNotification = `{"value":[{"id":"lsgTZMr9KwAAA","subscriptionId":"7f105c7d-2dc5-4530-97cd-4e7ae6534c07",` +
	`"subscriptionExpirationDateTime":"2016-03-19T22:11:09.952Z","clientState":"` + e2eSecret + `","changeType":"created",` +
	`"resource":"users/48d31887/messages/AAMkADg=","tenantId":"84bd8158-6d4d-4958-8b9f-9d6445542f95",` +
	`"resourceData":{"@odata.type":"#Microsoft.Graph.Message","@odata.id":"Users/48d31887/Messages/AAMkADg=","id":"AAMkADg="}}]}`

// testGraphNotification posts a genuine Graph notification: it is accepted,
// and its clientState, a shared secret, is in neither the stored payload,
// the admin API's answer, nor what the target receives: all hold the
// marker instead.
func testGraphNotification(t *testing.T, c *caddyInstance, up *upstream) {
	req, err := http.NewRequest(http.MethodPost, c.URL("/hooks/msgraph"), strings.NewReader(graphNotification))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("genuine notification: %d, want 202\n%s", resp.StatusCode, c.logTail())
	}
	marker := []byte(`"clientState":"` + signature.RedactedMarker + `"`)
	ds := up.waitFor(t, "the notification at /msgraph", func(ds []delivery) bool {
		return slices.ContainsFunc(ds, func(d delivery) bool { return d.Path == "/msgraph" })
	})
	for _, d := range ds {
		if d.Path == "/msgraph" && (bytes.Contains(d.Body, []byte(e2eSecret)) || !bytes.Contains(d.Body, marker)) {
			t.Errorf("target received %s", d.Body)
		}
	}
	status, list := c.adminDo(t, http.MethodGet, "/webhook/events?source=msgraph", nil)
	var events struct {
		Events []struct {
			ID int64 `json:"id"`
		} `json:"events"`
	}
	if err := json.Unmarshal(list, &events); status != http.StatusOK || err != nil || len(events.Events) != 1 {
		t.Fatalf("GET /webhook/events?source=msgraph: %d %s, %v", status, list, err)
	}
	status, detail := c.adminDo(t, http.MethodGet, fmt.Sprintf("/webhook/events/%d", events.Events[0].ID), nil)
	if status != http.StatusOK || bytes.Contains(detail, []byte(e2eSecret)) || !bytes.Contains(detail, []byte(signature.RedactedMarker)) {
		t.Errorf("GET /webhook/events/{id}: %d %s", status, detail)
	}
	var stored []byte
	c.queryDB(t, func(db *sql.DB) error {
		return db.QueryRow(`SELECT payload FROM events WHERE source = 'msgraph'`).Scan(&stored)
	})
	if bytes.Contains(stored, []byte(e2eSecret)) || !bytes.Contains(stored, marker) {
		t.Errorf("stored payload %s", stored)
	}
}
