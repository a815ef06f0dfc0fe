package cli

import (
	"bytes"
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
	// As the scheme's sender sends it: its delivery id, the headers it
	// always sends, its Content-Type. Some schemes carry their signature
	// inside the body (mailgun, msgraph), and Stripe's id is the body's:
	// then the body to send is another one, printed too.
	signed, h, err := signature.SignAsSender(scheme, key, file, opts)
	if err != nil {
		// The key is never part of the message: Sign's errors name what is
		// wrong with it, not its value.
		return signedRequest{}, err
	}
	return signedRequest{body: signed, header: h, changed: !bytes.Equal(signed, file)}, nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
