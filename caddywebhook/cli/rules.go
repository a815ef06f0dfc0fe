package cli

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
)

// `caddy webhook rules test`, the client of POST /webhook/rules/test: a
// target's filter and transform tried on a stored event or a body.

// addRulesCommands adds `caddy webhook rules test`.
func addRulesCommands(cmd *cobra.Command, run cliRunner) {
	rulesCmd := &cobra.Command{
		Use:   "rules",
		Short: "Tries the content rules (filters and transforms) of the running config",
		Long: `
Content rules are a target's filter and transform, CEL expressions compiled
when the config loads (see docs/RULES.md). 'caddy webhook rules test' runs
them on a stored event or a body of your own.
`,
		Example: `  caddy webhook rules test --source github --target deploy --event 1234`,
		Args:    noArgs,
	}
	rulesCmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	test := &cobra.Command{
		Use:   "test --source <name> --target <name> (--job <id> | --event <id> | --body <file> [--header 'Name: value'…])",
		Short: "Shows whether a target's filter takes an event, and the request its transform makes",
		Long: `
Runs the running config's compiled rules of one target on a stored job's or
event's payload, or on a body of your own, and prints whether the target
takes the event (its events and its filter) and the request the target would
receive: method, headers and body. The target adds its own header options
and the X-Webhook-* metadata to what is shown. Nothing is stored or sent.

With --job the source and target default to the job's, with --event the
source to the event's. A stored event's headers are those stored with it
(its content type and event-type header); --body takes the request headers
from --header and the event type from --event-type.
`,
		Example: `  caddy webhook rules test --source github --target deploy --event 1234
  caddy webhook rules test --job 56
  caddy webhook rules test --source github --target deploy --body push.json --event-type push --header 'X-GitHub-Event: push'`,
		Args: noArgs,
		RunE: run((*client).rulesTest),
	}
	f := test.Flags()
	f.String("source", "", "The receiver's source")
	f.String("target", "", "The target's name")
	f.Int64("job", 0, "Try the payload of this stored job")
	f.Int64("event", 0, "Try the payload of this stored event")
	f.String("body", "", "Try this file's bytes as the body ('-' for stdin)")
	f.StringArray("header", nil, "With --body: a request header, 'Name: value' (repeatable)")
	f.String("event-type", "", "With --body: the event type")
	rulesCmd.AddCommand(test)
	cmd.AddCommand(rulesCmd)
}

func (c *client) rulesTest(cmd *cobra.Command, _ []string) error {
	fl := cmd.Flags()
	var req adminapi.RulesTestRequest
	req.Source, _ = fl.GetString("source")
	req.Target, _ = fl.GetString("target")
	req.Job, _ = fl.GetInt64("job")
	req.Event, _ = fl.GetInt64("event")
	if fl.Changed("body") {
		body, err := readBodyFlag(cmd)
		if err != nil {
			return err
		}
		if utf8.Valid(body) {
			s := string(body)
			req.Body = &s
		} else {
			req.BodyBase64 = base64.StdEncoding.EncodeToString(body)
		}
		req.EventType, _ = fl.GetString("event-type")
		headers, _ := fl.GetStringArray("header")
		req.Headers = make(map[string]string, len(headers))
		for _, h := range headers {
			name, value, ok := strings.Cut(h, ":")
			if !ok || strings.TrimSpace(name) == "" {
				return fmt.Errorf("--header %q: write it as Name: value", h)
			}
			req.Headers[strings.TrimSpace(name)] = strings.TrimSpace(value)
		}
	}
	var r adminapi.RulesTestResponse
	if ok, err := c.callBody(http.MethodPost, "/webhook/rules/test", req, &r); !ok {
		return err
	}
	c.printRulesTest(r)
	return nil
}

// printRulesTest prints a rule test for a person: the verdict, then the
// request as it would go out.
func (c *client) printRulesTest(r adminapi.RulesTestResponse) {
	w := c.out
	if r.Takes {
		fmt.Fprintf(w, "target %s of source %s takes the event", r.Target, r.Source)
		if r.Filter != "" {
			fmt.Fprintf(w, ": its filter is true")
		}
		fmt.Fprintln(w)
	} else {
		fmt.Fprintf(w, "target %s of source %s does not take the event: %s\n", r.Target, r.Source, r.Reason)
		if r.FilterError != "" {
			fmt.Fprintf(w, "filter error: %s\n", r.FilterError)
		}
	}
	if r.Filter != "" {
		fmt.Fprintf(w, "filter: %s\n", strings.ReplaceAll(r.Filter, "\n", " "))
	}
	for _, n := range r.FilterNotes {
		fmt.Fprintf(w, "filter note: %s\n", n)
	}
	if r.TransformError != "" {
		fmt.Fprintf(w, "transform error (the job would go dead): %s\n", r.TransformError)
		return
	}
	if r.Request == nil {
		return
	}
	fmt.Fprintln(w)
	printRequest(w, r.Request)
}
