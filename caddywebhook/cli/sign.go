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
	"github.com/caddywebhook/caddywebhook/signature/samples"
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
	if list, _ := cmd.Flags().GetBool("list"); list {
		scheme, _ := cmd.Flags().GetString("scheme")
		asJSON, _ := cmd.Flags().GetBool("json")
		return listSamples(cmd.OutOrStdout(), scheme, asJSON)
	}
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
	target, _ := fl.GetString("url")
	opts := signature.SignOptions{URL: target, Timestamp: time.Now()}
	opts.EventType, _ = fl.GetString("event")
	opts.ID, _ = fl.GetString("id")
	ev, err := sampleFor(cmd, scheme)
	if err != nil {
		return signedRequest{}, err
	}
	var file []byte
	if ev != nil {
		// The sample's headers (its event type and delivery id where the
		// provider puts them, its User-Agent) and time; its ids agree
		// with its body, and --id was given to the rendering.
		file, opts.ID, opts.EventType, opts.Timestamp, opts.Header = ev.Body, ev.DeliveryID, ev.EventType, ev.Time, ev.Header
	} else if file, err = readBodyFlag(cmd); err != nil {
		return signedRequest{}, err
	}
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
	return signedRequest{body: signed, header: h, changed: ev != nil || !bytes.Equal(signed, file)}, nil
}

// sampleFor renders the sample sign uses when --body is not given, --event
// names an event and the scheme has samples: nil when it uses a body.
func sampleFor(cmd *cobra.Command, scheme string) (*samples.Event, error) {
	fl := cmd.Flags()
	event, _ := fl.GetString("event")
	set, _ := fl.GetStringArray("set")
	id, _ := fl.GetString("id")
	body, _ := fl.GetString("body")
	hasSamples := slices.Contains(samples.Schemes(), scheme)
	switch {
	case body != "" && len(set) > 0:
		return nil, errors.New("--set changes the fields of a sample: give --event and no --body")
	case body != "":
		return nil, nil
	case event == "" && len(set) > 0:
		return nil, errors.New("--set changes the fields of a sample: name it with --event (see --list)")
	case event == "" || !hasSamples:
		// As before samples: a body of {} with --event's type.
		if len(set) > 0 {
			return nil, fmt.Errorf("--set: the %s scheme has no samples (they exist for %s); give --body", scheme, strings.Join(samples.Schemes(), ", "))
		}
		return nil, nil
	}
	if _, ok := samples.Lookup(scheme, event); !ok {
		var names []string
		for _, info := range samples.List() {
			if info.Scheme == scheme {
				names = append(names, info.Event)
			}
		}
		return nil, fmt.Errorf("--event %q: %s has no sample of it (there are %s); give --body to sign a body of your own", event, scheme,
			strings.Join(names, ", "))
	}
	ev, err := samples.Render(scheme, event, samples.Options{Set: set, DeliveryID: id})
	if err != nil {
		return nil, fmt.Errorf("--event %s: %w", event, err)
	}
	return ev, nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
