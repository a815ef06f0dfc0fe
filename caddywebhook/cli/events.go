package cli

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/human"
	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/signature"
)

// The subcommands about events beside command.go's jobs: events, resend,
// injected test events, signing without openssl, the live tail, and pause
// and resume.

// cliRunner wraps a subcommand's body with the admin address lookup.
type cliRunner func(f func(c *client, cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error

// addEventCommands adds events, resend, send, sign, tail, pause and resume
// to cmd.
func addEventCommands(cmd *cobra.Command, run cliRunner) {
	events := &cobra.Command{
		Use:   "events [--source <name>] [--delivery <id>] [--event <type>] [--since <when>] [--until <when>] [--has-target true|false] [--where <expression>] [--limit <n>] [--cursor <id>]",
		Short: "Lists received events, newest first, with their jobs (also events no target wanted), or those --where matches",
		Long: `
Lists the stored events newest first, one line each: id, source, the
sender's delivery id, event type, age, and its jobs (id, target, status).
Events that no target wanted are stored too and show no job; find them with
--has-target false. Filter by --source, --delivery (with --source), --event,
and a time range with --since and --until: an RFC 3339 time or a duration
back from now such as 90m, 1h or 2d.

--where searches by content: a CEL expression, as a target's filter is
written (docs/RULES.md), over the stored event: body, headers, event_type,
source and delivery_id (a stored event keeps no query string). The events
are listed oldest first, and the search reads the store from the oldest
event on, in short requests, until the page is full.
`,
		Example: `  caddy webhook events --since 1h
  caddy webhook events --source github --has-target false
  caddy webhook events --source stripe --delivery evt_1N2b3c
  caddy webhook events --where 'body.data.object.customer == "cus_Q1w2"' --event invoice.paid --since 2d`,
		Args: noArgs,
		RunE: run((*client).events),
	}
	ef := events.Flags()
	ef.String("source", "", "Only events of this source")
	ef.String("delivery", "", "Only the event with this sender's delivery id (needs --source)")
	ef.String("event", "", "Only events of this type")
	ef.String("since", "", "Only events received since: an RFC 3339 time or a duration back from now (1h, 2d)")
	ef.String("until", "", "Only events received before: an RFC 3339 time or a duration back from now")
	ef.String("has-target", "", "true: only events with a job; false: only events no target wanted")
	ef.String("where", "", "Only events this CEL expression is true for, e.g. 'body.customer == \"cus_1\"'")
	ef.Int("limit", 0, "Events per page, 1 to 1000 (default 50)")
	ef.Int64("cursor", 0, "Start after this point: the cursor printed at the end of the previous page")

	resend := &cobra.Command{
		Use:   "resend <job id> | --event <event id> --target <name>",
		Short: "Delivers a done or dead job again, or a stored event to a target of its source",
		Long: `
Resends a job that was delivered (done) or gave up (dead): it gets a fresh
attempt budget and is due at once, e.g. after a bug in the handler was
fixed. Its history keeps every earlier attempt, and a resend counts as a
replay, so the handler can tell it from a first delivery. A pending or
running job is refused.

With --event and --target, sends a stored event to a target of its source
in the running config as a new job, also an event that no target wanted
when it arrived.
`,
		Example: `  caddy webhook resend 42
  caddy webhook resend --event 17 --target http`,
		Args: cobra.MaximumNArgs(1),
		RunE: run((*client).resend),
	}
	resend.Flags().Int64("event", 0, "The stored event to send")
	resend.Flags().String("target", "", "With --event: the target of the event's source to send it to")

	send := &cobra.Command{
		Use:   "send <source> [--event <type>] [--body <file>|- | --set <path>=<value>...] [--header <name>:<value>]... [--delivery <id>] | --list",
		Short: "Injects a test event into a source's pipeline, as if it had been verified",
		Long: `
Injects an event into the pipeline of a source of the running config, as
though a request had arrived and passed verification, like 'stripe
trigger': it is stored, fanned out to the source's targets that want its
event type (and whose filters take it), and delivered.

Without --body, --event names a sample event of the source's scheme (--list
shows them): the provider's real envelope and fields, with fresh ids and
times of now, its event type and delivery id, and the provider's headers
that the receiver stores. --set path=value (repeatable) changes a field of
it first, as 'stripe trigger --override' does: a JSON path (members joined
with dots, array elements as [n]), and a value read as JSON when it is JSON,
else as a string.

With --body (a file, or - for stdin), that body is injected instead, with
--event as its type; without --body and --event, {}. Headers come from
--header (Content-Type defaults to application/json). The delivery id is
the sample's, else injected-<random>, unless --delivery gives one.

This is a privileged action of the admin API: the event is marked with the
header X-Webhook-Injected: 1, which is stored, shown by 'show' and
forwarded to http targets, and the admin log records the injection. To try
the whole path, verification included, sign a request with
'caddy webhook sign' instead.
`,
		Example: `  caddy webhook send github --event push
  caddy webhook send stripe --event checkout.session.completed --set data.object.customer_details.email=alice@example.com
  caddy webhook send github --event push --body push.json --header 'X-GitHub-Event: push'
  echo '{"type":"invoice.paid"}' | caddy webhook send stripe --event invoice.paid --body -
  caddy webhook send --list`,
		Args: func(cmd *cobra.Command, args []string) error {
			if list, _ := cmd.Flags().GetBool("list"); list {
				return nil
			}
			return sourceArg(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if list, _ := cmd.Flags().GetBool("list"); list {
				asJSON, _ := cmd.Flags().GetBool("json")
				return listSamples(cmd.OutOrStdout(), "", asJSON)
			}
			return run((*client).send)(cmd, args)
		},
	}
	send.Flags().String("event", "", "The event type, which picks the targets; without --body, the sample event of that name")
	send.Flags().String("body", "", "The payload: a file, or - for stdin (default: the --event sample, else {})")
	send.Flags().StringArray("set", nil, "Change a field of the sample, as path=value (repeatable)")
	send.Flags().Bool("list", false, "List the sample events of every scheme")
	send.Flags().StringArray("header", nil, "A header stored with the event, as Name: value (repeatable)")
	send.Flags().String("delivery", "", "The delivery id (default injected-<random>)")

	sign := &cobra.Command{
		Use:   "sign --scheme <scheme> --secret-env <VAR> [--event <type>] [--body <file>|- | --set <path>=<value>...] [--url <url>] [--id <delivery id>] | --list [--scheme <scheme>]",
		Short: "Prints the headers a sender would add to a body, or a ready curl command",
		Long: `
Signs a body as a sender of the scheme would and prints the headers it
would send, one per line, so the whole path, signature verification
included, can be tried without openssl. With --url, prints a ready curl
command instead. The secret is read from the environment variable named by
--secret-env, never from the command line; for the schemes that sign with a
private key (discord, sendgrid, telnyx, standard v1a) the variable holds the
private key. Every scheme and preset of the signature registry works.
It needs no running Caddy.

Without --body, --event names a sample event of the scheme (--list shows
them): the body and headers the provider sends for it, with fresh ids in
the provider's formats and times of now, printed after the headers.
--set path=value (repeatable) changes a field of it first, as 'stripe
trigger --override' does: a JSON path (members joined with dots, array
elements as [n]), and a value read as JSON when it is JSON, else as a
string (a form field's name and text for Twilio). A scheme without samples
signs {} unless --body gives a body.

Without --id, it makes up the delivery id the provider would send: a UUID
for GitHub and the other schemes whose senders use one, msg_… for Standard
Webhooks and Svix, and an evt_… "id" for a Stripe body that has none. It
also adds the headers the provider always sends (Shopify's shop domain,
API version and webhook id, for instance). The curl command prints the
answer's status line, HTTP 202 or HTTP 401, so "| sh" shows the outcome.
`,
		Example: `  export GITHUB_WEBHOOK_SECRET=…
  caddy webhook sign --scheme github --secret-env GITHUB_WEBHOOK_SECRET --event push \
      --url https://example.com/hooks/github | sh
  caddy webhook sign --scheme stripe --secret-env STRIPE_WEBHOOK_SECRET --event checkout.session.completed \
      --set data.object.customer_details.email=alice@example.com --url https://example.com/hooks/stripe | sh
  caddy webhook sign --scheme github --secret-env GITHUB_WEBHOOK_SECRET --body push.json --event push
  caddy webhook sign --list --scheme stripe`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return signCommand(cmd) },
	}
	sgf := sign.Flags()
	sgf.String("scheme", "", "The signature scheme: "+strings.Join(signature.Schemes(), ", "))
	sgf.String("secret-env", "", "The environment variable that holds the secret (or private key)")
	sgf.String("body", "", "The payload: a file, or - for stdin (default: the --event sample, else {})")
	sgf.String("url", "", "Print a curl command that posts the signed body to this URL")
	sgf.String("event", "", "The event type; without --body, the sample event of that name (see --list)")
	sgf.StringArray("set", nil, "Change a field of the sample, as path=value (repeatable)")
	sgf.Bool("list", false, "List the sample events (of --scheme, or of every scheme) and exit")
	sgf.String("id", "", "The delivery id, for schemes that send one (default: a new one, as the provider makes it)")

	tail := &cobra.Command{
		Use:   "tail [--source <name>] [--target <name>] [--outcome <word>]",
		Short: "Follows received events and delivery attempts live, like 'stripe listen'",
		Long: `
Prints one line per received event and per delivery attempt as they
happen, until interrupted: the receiver's outcome (accepted, duplicate,
no_target, bad_signature, …) with its status code, and each attempt's
outcome (delivered, retry, dead, lease_lost, handed_back) with the job,
attempt number, duration and error. Filter by --source, --target (only
deliveries) and --outcome. With --json, each line is the stream's JSON.
A reader too slow for the stream loses lines, and is told how many.
`,
		Example: `  caddy webhook tail
  caddy webhook tail --source stripe --outcome dead`,
		Args: noArgs,
		RunE: run((*client).tail),
	}
	tail.Flags().String("source", "", "Only events and deliveries of this source")
	tail.Flags().String("target", "", "Only deliveries to this target")
	tail.Flags().String("outcome", "", "Only lines with this outcome word")

	cmd.AddCommand(events, resend, send, sign, tail, pauseCommand(run, true), pauseCommand(run, false))
}

// pauseCommand returns the pause subcommand, or resume.
func pauseCommand(run cliRunner, pause bool) *cobra.Command {
	c := &cobra.Command{
		Use:   "pause --source <name> [--target <name>]",
		Short: "Pauses delivery to a target, or to every target of a source; receiving goes on",
		Long: `
Pauses delivery to one target of a source (--target), or to every target of
the source. Receiving goes on: events are verified, stored and answered as
always, and their jobs wait as pending. Paused jobs are not claimed, so no
attempt is charged to them, until 'caddy webhook resume'. The pause is kept
in the queue's database: it survives a restart and holds for every Caddy
sharing a Postgres queue (within a second). 'caddy webhook stats' marks
paused routes.
`,
		Example: `  caddy webhook pause --source stripe --target http
  caddy webhook pause --source github`,
		Args: noArgs,
		RunE: run(func(c *client, cmd *cobra.Command, _ []string) error { return c.pause(cmd, "/webhook/pause") }),
	}
	if !pause {
		c.Use = "resume --source <name> [--target <name>]"
		c.Short = "Resumes delivery paused with 'caddy webhook pause'"
		c.Long = `
Lifts a pause made with 'caddy webhook pause'; the waiting jobs are
delivered at once. With --target, lifts the pause of that target alone
(which stays paused while its whole source is); without it, lifts every
pause of the source, the whole source's and each target's.
`
		c.Example = `  caddy webhook resume --source stripe --target http
  caddy webhook resume --source github`
		c.RunE = run(func(c *client, cmd *cobra.Command, _ []string) error { return c.pause(cmd, "/webhook/resume") })
	}
	c.Flags().String("source", "", "The source (required)")
	c.Flags().String("target", "", "Only this target of the source")
	return c
}

// pause calls the pause or resume endpoint and says what holds now.
func (c *client) pause(cmd *cobra.Command, path string) error {
	q := url.Values{}
	flagQuery(cmd, q, "source", "target")
	if q.Get("source") == "" {
		return errors.New("--source is required: the source to pause or resume (--target narrows it to one target)")
	}
	var resp adminapi.PauseResponse
	if ok, err := c.call(http.MethodPost, path+"?"+q.Encode(), &resp); !ok {
		return err
	}
	name := cell(resp.Source, 0)
	if resp.Target != "" {
		name += "/" + cell(resp.Target, 0)
	}
	state := "delivering"
	if resp.Paused {
		state = "paused"
	}
	fmt.Fprintf(c.out, "%s: %s\n", name, state)
	fmt.Fprintln(c.out, pauseLine(resp.Pauses))
	return nil
}

// pauseLine says which pauses hold: "paused: github (every target), stripe/http".
func pauseLine(ps []queue.Pause) string {
	if len(ps) == 0 {
		return "paused: nothing"
	}
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = cell(p.Source, 0) + " (every target)"
		if p.Target != "" {
			parts[i] = cell(p.Source, 0) + "/" + cell(p.Target, 0)
		}
	}
	return "paused: " + strings.Join(parts, ", ")
}

// showArgs accepts one job id, or none when an event is named by flags.
func showArgs(cmd *cobra.Command, args []string) error {
	fl := cmd.Flags()
	byEvent := fl.Changed("event") || fl.Changed("delivery") || fl.Changed("source")
	switch {
	case len(args) == 1 && byEvent:
		return errors.New("give a job id, or --source with --delivery, or --event; not both")
	case len(args) == 1:
		return jobIDArg("show")(cmd, args)
	case len(args) == 0 && byEvent:
		return nil
	}
	return errors.New("show needs a job id ('caddy webhook show 42'), or an event: --source <name> --delivery <id>, or --event <id>")
}

// sourceArg checks send's one source argument.
func sourceArg(_ *cobra.Command, args []string) error {
	if len(args) != 1 {
		return errors.New("send needs one source, e.g. 'caddy webhook send github --event push'")
	}
	if !adminapi.ValidName(args[0]) {
		return fmt.Errorf("source %q: use letters, digits, '.', '_' and '-'", args[0])
	}
	return nil
}

// apiParams names the API's query parameter of each flag whose name
// differs; every other flag is its parameter with "-" for "_".
var apiParams = map[string]string{"delivery": "delivery_id", "event": "event_type", "has-target": "has_target",
	"older-than": "older_than"}

// apiParam is the API's query parameter for flag.
func apiParam(flag string) string {
	if p, ok := apiParams[flag]; ok {
		return p
	}
	return strings.ReplaceAll(flag, "-", "_")
}

// flagOf is the flag for the API's query parameter param: apiParam turned
// around, so that the API's errors name what the user typed.
func flagOf(param string) string {
	for flag, p := range apiParams {
		if p == param {
			return flag
		}
	}
	return strings.ReplaceAll(param, "_", "-")
}

// flagQuery copies the named string flags that are set into q, under the
// API's parameter names.
func flagQuery(cmd *cobra.Command, q url.Values, flags ...string) {
	for _, flag := range flags {
		if v, _ := cmd.Flags().GetString(flag); v != "" {
			q.Set(apiParam(flag), v)
		}
	}
}

func (c *client) events(cmd *cobra.Command, _ []string) error {
	q := url.Values{}
	flagQuery(cmd, q, "source", "delivery", "event", "since", "until", "has-target", "where")
	if q.Has("where") {
		return c.eventsWhere(cmd, q)
	}
	var page queue.EventPage
	if ok, err := c.call(http.MethodGet, pageURI(cmd, "/webhook/events", q), &page); !ok {
		return err
	}
	if len(page.Events) == 0 {
		fmt.Fprintln(c.out, "no events")
		return nil
	}
	return c.endPage(c.eventsTable(page.Events), page.NextCursor)
}

// eventsTable writes a listing of events to a table, for the caller to
// flush.
func (c *client) eventsTable(events []queue.EventSummary) *tabwriter.Writer {
	now := c.now()
	tw := newTable(c.out)
	fmt.Fprintln(tw, "ID\tSOURCE\tDELIVERY\tEVENT\tAGE\tJOBS")
	for _, e := range events {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", e.ID, cell(e.Source, 0), cell(e.DeliveryID, 0), cell(e.EventType, 0),
			human.Duration(now.Sub(e.CreatedAt)), eventJobs(e.Jobs))
	}
	return tw
}

// eventJobs lists an event's jobs in one cell: "12 http done, 13 exec dead".
func eventJobs(jobs []queue.EventJob) string {
	if len(jobs) == 0 {
		return "none (no target wanted it)"
	}
	parts := make([]string, len(jobs))
	for i, j := range jobs {
		parts[i] = fmt.Sprintf("%d %s %s", j.ID, cell(j.Target, 0), j.Status)
	}
	return strings.Join(parts, ", ")
}

func (c *client) showEvent(cmd *cobra.Command, _ []string) error {
	fl := cmd.Flags()
	source, _ := fl.GetString("source")
	delivery, _ := fl.GetString("delivery")
	id, _ := fl.GetInt64("event")
	switch {
	case fl.Changed("event") && (source != "" || delivery != ""):
		return errors.New("give --event, or --source with --delivery; not both")
	case fl.Changed("event") && id < 1:
		return fmt.Errorf("--event must be a positive event id, not %d", id)
	case !fl.Changed("event") && (source == "" || delivery == ""):
		return errors.New("--delivery needs --source too (delivery ids are unique per source): --source <name> --delivery <id>")
	}
	if !fl.Changed("event") {
		var page queue.EventPage
		q := url.Values{"source": {source}, "delivery_id": {delivery}}
		if err := c.callData(http.MethodGet, "/webhook/events?"+q.Encode(), nil, &page); err != nil {
			return err
		}
		if len(page.Events) == 0 {
			return fmt.Errorf("no event of source %s has the delivery id %q (events that were purged are gone)", source, delivery)
		}
		id = page.Events[0].ID
	}
	var ev adminapi.EventResponse
	if ok, err := c.call(http.MethodGet, "/webhook/events/"+strconv.FormatInt(id, 10), &ev); !ok {
		return err
	}
	now := c.now()
	fmt.Fprintf(c.out, "event %d\n\n", ev.ID)
	tw := newTable(c.out)
	fmt.Fprintf(tw, "source:\t%s\n", cell(ev.Source, 0))
	fmt.Fprintf(tw, "delivery id:\t%s\n", cell(ev.DeliveryID, 0))
	fmt.Fprintf(tw, "event type:\t%s\n", cell(ev.EventType, 0))
	fmt.Fprintf(tw, "received:\t%s\n", when(ev.CreatedAt, now))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(c.out, "\njobs:")
	if len(ev.Jobs) == 0 {
		fmt.Fprintln(c.out, "  none: no target wanted it (send it to one with 'caddy webhook resend --event", ev.ID, "--target <name>')")
	} else {
		tw = newTable(c.out)
		fmt.Fprintln(tw, "  ID\tTARGET\tSTATUS\tATTEMPTS")
		for _, j := range ev.Jobs {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%d\n", j.ID, cell(j.Target, 0), j.Status, j.Attempts)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(c.out, "  (history of a job: 'caddy webhook show %d')\n", ev.Jobs[0].ID)
	}
	if len(ev.Headers) > 0 {
		fmt.Fprintln(c.out, "\nheaders:")
		for _, h := range ev.Headers {
			fmt.Fprintf(c.out, "  %s: %s\n", cell(h.Name, 0), cell(h.Value, 0))
		}
	}
	if ev.ReadError != "" {
		fmt.Fprintf(c.out, "\nthe event cannot be read:\n%s\n", indent(queue.SafeText(ev.ReadError, 0)))
		return nil
	}
	if utf8.Valid(ev.Payload) {
		fmt.Fprintf(c.out, "\npayload (%d bytes, text):\n%s\n", len(ev.Payload), queue.SafeText(string(ev.Payload), 0))
	} else {
		fmt.Fprintf(c.out, "\npayload (%d bytes, base64, not UTF-8):\n%s\n", len(ev.Payload), base64.StdEncoding.EncodeToString(ev.Payload))
	}
	return nil
}

// callData makes one admin API request with an optional JSON body and
// decodes the response into v, whatever --json says: for the requests a
// subcommand makes before the one whose response it prints.
func (c *client) callData(method, uri string, body any, v any) error {
	saved := c.json
	c.json = false
	defer func() { c.json = saved }()
	_, err := c.callBody(method, uri, body, v)
	return err
}

// callBody is call with a JSON request body (nil for none).
func (c *client) callBody(method, uri string, body any, v any) (bool, error) {
	if body == nil {
		return c.call(method, uri, v)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return false, fmt.Errorf("encode request: %w", err)
	}
	headers := http.Header{"Content-Type": {"application/json"}}
	return c.request(method, uri, headers, bytes.NewReader(b), v)
}

func (c *client) resend(cmd *cobra.Command, args []string) error {
	fl := cmd.Flags()
	eventID, _ := fl.GetInt64("event")
	target, _ := fl.GetString("target")
	switch {
	case len(args) == 1 && (fl.Changed("event") || target != ""):
		return errors.New("give a job id, or --event with --target; not both")
	case len(args) == 1:
		if err := jobIDArg("resend")(cmd, args); err != nil {
			return err
		}
		var r adminapi.ResendResponse
		if ok, err := c.call(http.MethodPost, "/webhook/jobs/"+args[0]+"/resend", &r); !ok {
			return err
		}
		fmt.Fprintf(c.out, "resent job %d: pending, due now; its history keeps the earlier attempts\n", r.ID)
		return nil
	case fl.Changed("event") && target != "":
		if eventID < 1 {
			return fmt.Errorf("--event must be a positive event id, not %d", eventID)
		}
		var r adminapi.SendEventResponse
		uri := "/webhook/events/" + strconv.FormatInt(eventID, 10) + "/send?" + url.Values{"target": {target}}.Encode()
		if ok, err := c.call(http.MethodPost, uri, &r); !ok {
			return err
		}
		fmt.Fprintf(c.out, "sent event %d to target %s as job %d: pending, due now\n", r.EventID, r.Target, r.JobID)
		return nil
	}
	return errors.New("say what to resend: a job id ('caddy webhook resend 42'), or --event <id> --target <name>")
}

// readBody reads the --body flag's file, stdin for -, or {} if not given.
func readBodyFlag(cmd *cobra.Command) ([]byte, error) {
	name, _ := cmd.Flags().GetString("body")
	switch name {
	case "":
		return []byte("{}"), nil
	case "-":
		b, err := io.ReadAll(cmd.InOrStdin())
		if err != nil {
			return nil, fmt.Errorf("read body from stdin: %w", err)
		}
		return b, nil
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	return b, nil
}

func (c *client) send(cmd *cobra.Command, args []string) error {
	fl := cmd.Flags()
	req := adminapi.InjectRequest{Source: args[0], Headers: map[string]string{}}
	req.EventType, _ = fl.GetString("event")
	req.DeliveryID, _ = fl.GetString("delivery")
	req.Set, _ = fl.GetStringArray("set")
	file, _ := fl.GetString("body")
	switch {
	case file != "" && len(req.Set) > 0:
		return errors.New("--set changes the fields of a sample: give --event and no --body")
	case file == "" && req.EventType == "" && len(req.Set) > 0:
		return errors.New("--set changes the fields of a sample: name it with --event (see --list)")
	case file == "" && req.EventType != "":
		// The server renders the sample of the source's scheme; its
		// event type is the sample's (GitLab's "push" is "Push Hook").
		req.Sample, req.EventType = req.EventType, ""
	default:
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
	}
	headers, _ := fl.GetStringArray("header")
	for _, h := range headers {
		name, value, ok := strings.Cut(h, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return fmt.Errorf("--header %q: write it as Name: value", h)
		}
		req.Headers[strings.TrimSpace(name)] = strings.TrimSpace(value)
	}
	var r adminapi.InjectResponse
	if ok, err := c.callBody(http.MethodPost, "/webhook/send", req, &r); !ok {
		return err
	}
	switch {
	case r.Duplicate:
		fmt.Fprintf(c.out, "event %d of source %s already has the delivery id %s: nothing was added (a duplicate)\n", r.EventID, req.Source, cell(r.DeliveryID, 0))
	case r.Jobs == 0:
		fmt.Fprintf(c.out, "injected event %d (delivery id %s) into source %s: no target wants event type %q; stored without a job\n",
			r.EventID, cell(r.DeliveryID, 0), req.Source, cmp.Or(r.EventType, req.EventType))
	default:
		fmt.Fprintf(c.out, "injected event %d (%s, delivery id %s) into source %s: %d %s (%s)\n", r.EventID, cell(cmp.Or(r.EventType, req.EventType), 0),
			cell(r.DeliveryID, 0), req.Source, r.Jobs, plural(r.Jobs, "job", "jobs"), strings.Join(r.Targets, ", "))
	}
	return nil
}

func (c *client) tail(cmd *cobra.Command, _ []string) error {
	q := url.Values{}
	flagQuery(cmd, q, "source", "target", "outcome")
	uri := "/webhook/tail"
	if len(q) > 0 {
		uri += "?" + q.Encode()
	}
	resp, err := c.do(http.MethodGet, uri, nil, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	fmt.Fprintf(cmd.ErrOrStderr(), "following the webhook queue at %s (interrupt to stop)\n", c.addr)
	r := bufio.NewReader(resp.Body)
	for {
		s, err := r.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return errors.New("the admin endpoint closed the stream (did Caddy stop?)")
			}
			return fmt.Errorf("read the stream from %s: %w", c.addr, err)
		}
		data, ok := strings.CutPrefix(strings.TrimRight(s, "\r\n"), "data: ")
		if !ok {
			continue // a comment or the blank line between events
		}
		if c.json {
			fmt.Fprintln(c.out, data)
			continue
		}
		var l adminapi.TailLine
		if err := json.Unmarshal([]byte(data), &l); err != nil {
			return fmt.Errorf("decode the stream from %s: %w", c.addr, err)
		}
		fmt.Fprintln(c.out, formatTailLine(l))
	}
}

// formatTailLine is one line of `caddy webhook tail`.
func formatTailLine(l adminapi.TailLine) string {
	at := l.Time.Local().Format("15:04:05.000")
	switch l.Kind {
	case adminapi.TailDropped:
		return fmt.Sprintf("%s  … %d %s lost: this reader was too slow", at, l.Dropped, plural(int(l.Dropped), "line", "lines"))
	case adminapi.TailReceived:
		s := fmt.Sprintf("%s  received  %s  %s", at, cell(l.Source, 0), l.Outcome)
		if l.Status != 0 {
			s += " " + strconv.Itoa(l.Status)
		}
		if l.Injected {
			s += " (injected)"
		}
		if l.DeliveryID != "" {
			s += "  delivery " + cell(l.DeliveryID, 0)
		}
		if l.EventType != "" {
			s += "  " + cell(l.EventType, 0)
		}
		return s
	}
	s := fmt.Sprintf("%s  %-8s  %s → %s  job %d attempt %d  %s", at, l.Outcome, cell(l.Source, 0), cell(l.Target, 0),
		l.JobID, l.Attempt, human.Latency(time.Duration(l.DurationMS*float64(time.Millisecond))))
	if l.DeliveryID != "" {
		s += "  delivery " + cell(l.DeliveryID, 0)
	}
	if l.Error != "" {
		s += "  " + cell(l.Error, 120)
	}
	return s
}
