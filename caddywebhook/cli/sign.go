package cli

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/caddywebhook/caddywebhook/signature"
)

// `caddy webhook sign`: a body signed as a sender of a scheme signs it,
// with the headers that sender sends, printed or as a curl command.

// signedRequest is what sign prints: the body to send (the file's, or one
// the scheme or sign changed) and its headers.
type signedRequest struct {
	body    []byte
	header  http.Header
	changed bool // body is not the --body file's
}

// signCommand prints the headers a sender of the scheme would send, or
// with --url a curl command that sends the request.
func signCommand(cmd *cobra.Command) error {
	req, err := signRequest(cmd)
	if err != nil {
		return err
	}
	fl := cmd.Flags()
	out := cmd.OutOrStdout()
	names := slices.Sorted(maps.Keys(req.header))
	if asJSON, _ := fl.GetBool("json"); asJSON {
		m := make(map[string]string, len(names)+1)
		for _, name := range names {
			m[name] = req.header.Get(name)
		}
		if req.changed {
			// Header names are canonical, so "body" names no header.
			m["body"] = string(req.body)
		}
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	}
	target, _ := fl.GetString("url")
	if target == "" {
		for _, name := range names {
			fmt.Fprintf(out, "%s: %s\n", name, req.header.Get(name))
		}
		if req.changed {
			fmt.Fprintf(out, "\n%s\n", req.body)
		}
		return nil
	}
	var b strings.Builder
	// --write-out prints the status line of the answer (202, 401, …), which
	// a receiver sends with an empty body.
	b.WriteString("curl --silent --show-error --write-out " + shellQuote(`HTTP %{http_code}\n`) + " --request POST --url " + shellQuote(target))
	for _, name := range names {
		b.WriteString(" \\\n  --header " + shellQuote(name+": "+req.header.Get(name)))
	}
	if file, _ := fl.GetString("body"); file != "" && file != "-" && !req.changed {
		b.WriteString(" \\\n  --data-binary " + shellQuote("@"+file))
	} else {
		b.WriteString(" \\\n  --data-binary " + shellQuote(string(req.body)))
	}
	fmt.Fprintln(out, b.String())
	return nil
}

// signRequest reads the flags, the key and the body, and signs the body as
// the scheme's sender would send it.
func signRequest(cmd *cobra.Command) (signedRequest, error) {
	fl := cmd.Flags()
	scheme, _ := fl.GetString("scheme")
	env, _ := fl.GetString("secret-env")
	if scheme == "" {
		return signedRequest{}, fmt.Errorf("--scheme is required: one of %s", strings.Join(signature.Schemes(), ", "))
	}
	if _, ok := signature.Lookup(scheme); !ok {
		return signedRequest{}, fmt.Errorf("--scheme %q is unknown: use one of %s", scheme, strings.Join(signature.Schemes(), ", "))
	}
	if env == "" {
		return signedRequest{}, errors.New("--secret-env is required: the name of the environment variable that holds the secret (never the secret itself)")
	}
	key := os.Getenv(env)
	if key == "" {
		return signedRequest{}, fmt.Errorf("environment variable %s is empty or unset", env)
	}
	file, err := readBodyFlag(cmd)
	if err != nil {
		return signedRequest{}, err
	}
	target, _ := fl.GetString("url")
	opts := signature.SignOptions{URL: target, Timestamp: time.Now()}
	opts.EventType, _ = fl.GetString("event")
	opts.ID, _ = fl.GetString("id")
	body := file
	if opts.ID == "" {
		opts.ID, body = senderID(scheme, file)
	}
	// Some schemes carry their signature inside the body (mailgun,
	// msgraph): then the body to send is the signed one, printed too.
	signed, h, err := signature.SignBody(scheme, key, body, opts)
	if err != nil {
		// The key is never part of the message: Sign's errors name what is
		// wrong with it, not its value.
		return signedRequest{}, err
	}
	addSenderHeaders(scheme, h, signed, opts)
	return signedRequest{body: signed, header: h, changed: !bytes.Equal(signed, file)}, nil
}

// uuidSchemes are the schemes whose senders give each delivery a UUID in
// a header signature.SignOptions.ID fills: GitHub's X-GitHub-Delivery,
// GitLab's X-Gitlab-Event-UUID, Shopify's X-Shopify-Event-Id, and the id
// headers of the Gitea, Forgejo, Bitbucket, Linear, Sentry and Twitch
// presets.
var uuidSchemes = []string{"github", "gitlab", "shopify", "gitea", "forgejo", "bitbucket", "linear", "sentry", "twitch"}

// senderID returns the delivery id the scheme's sender would give body,
// and the body to send. Standard Webhooks and its senders (svix, polar)
// get their "msg_…" id from signature.SignBody itself. A Stripe event's
// id is the body's "id" ("evt_…"): a JSON object without one gets one,
// so the event is deduplicated as Stripe's are, not on a body hash.
func senderID(scheme string, body []byte) (string, []byte) {
	switch {
	case slices.Contains(uuidSchemes, scheme):
		return newUUID(), body
	case scheme == "stripe":
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &m) != nil || m == nil || m["id"] != nil {
			return "", body
		}
		id, _ := json.Marshal("evt_" + rand.Text())
		m["id"] = id
		if b, err := json.Marshal(m); err == nil {
			return "", b
		}
	}
	return "", body
}

// newUUID is a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// addSenderHeaders adds what the scheme's sender sends besides its
// signature: the Content-Type, and Shopify's headers, which its own SDK
// requires (https://shopify.dev/docs/api/shopify-app-remix/v4/authenticate/webhook:
// shop, apiVersion, webhookId, topic, triggeredAt and eventId are read from
// them).
func addSenderHeaders(scheme string, h http.Header, body []byte, opts signature.SignOptions) {
	switch scheme {
	case "twilio", "slack":
		// Twilio posts its parameters as a form (a JSON body is signed
		// through bodySHA256 in the URL instead), and Slack its slash
		// commands and interactivity requests
		// (https://api.slack.com/slash-commands); its Events API posts
		// JSON.
		if !json.Valid(body) {
			h.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	case "shopify":
		setDefault(h, "X-Shopify-Shop-Domain", "example.myshopify.com")
		setDefault(h, "X-Shopify-API-Version", "2025-07")
		setDefault(h, "X-Shopify-Webhook-Id", newUUID())
		setDefault(h, "X-Shopify-Topic", "orders/create")
		setDefault(h, "X-Shopify-Triggered-At", opts.Timestamp.UTC().Format(time.RFC3339Nano))
		setDefault(h, "X-Shopify-Event-Id", newUUID())
	}
	setDefault(h, "Content-Type", "application/json")
}

// setDefault sets name to value unless h has it.
func setDefault(h http.Header, name, value string) {
	if h.Get(name) == "" {
		h.Set(name, value)
	}
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
